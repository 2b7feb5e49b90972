//go:build !race

package framework

// raceEnabled: this test binary runs under the race detector.
const raceEnabled = false
