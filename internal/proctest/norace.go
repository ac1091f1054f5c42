//go:build !race

package proctest

const raceEnabled = false
