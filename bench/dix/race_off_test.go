//go:build !race

package dix

const raceEnabled = false
