//go:build race

package message

// raceEnabled: the race detector's instrumentation allocates, so the
// allocation count is checked without it.
const raceEnabled = true
