//go:build !race

package cam

const raceEnabled = false
