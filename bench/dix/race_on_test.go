//go:build race

package dix

// raceEnabled: the race detector slows the simulations about tenfold; the
// tests run them smaller then.
const raceEnabled = true
