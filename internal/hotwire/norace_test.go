//go:build !race

package hotwire

const raceEnabled = false
