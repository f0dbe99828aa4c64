//go:build race

package roce_test

const raceEnabled = true
