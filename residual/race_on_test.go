//go:build race

package residual

// raceEnabled: the race detector slows tests about tenfold.
const raceEnabled = true
