//go:build !race

package qpx_test

const raceEnabled = false
