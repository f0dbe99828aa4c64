//go:build race

package mcsq_test

const raceEnabled = true
