//go:build race

package torture

const raceEnabled = true
