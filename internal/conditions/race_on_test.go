//go:build race

package conditions

// raceEnabled: the race detector slows tests about tenfold.
const raceEnabled = true
