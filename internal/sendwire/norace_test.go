//go:build !race

package sendwire

const raceEnabled = false
