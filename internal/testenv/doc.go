// Package testenv is what every randomized test of the module reads from
// its environment, in one place: how many seeds a suite runs
// (PEREGRINE_SEEDS), the one seed to replay (-seed or PEREGRINE_SEED),
// whether the race detector is on, and the debugging switches. Only test
// files import it.
//
// A suite runs its full count by default, a smaller one under -short or
// the race detector (each about ten times slower), and exactly
// PEREGRINE_SEEDS when that is set, whatever the mode. Seeds a suite
// derives from its index stay the same whatever the count, so a failure
// found at any count replays with -seed alone.
package testenv
