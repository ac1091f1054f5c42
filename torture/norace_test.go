//go:build !race

package torture

const raceEnabled = false
