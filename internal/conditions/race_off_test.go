//go:build !race

package conditions

const raceEnabled = false
