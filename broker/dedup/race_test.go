//go:build race

package dedup

// raceEnabled: the race detector multiplies memory and time, so the memory
// measurement runs without it.
const raceEnabled = true
