//go:build race

package engine

// raceEnabled: the race detector slows tests about tenfold.
const raceEnabled = true
