package testenv

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// The environment variables the module's tests read. Every knob is named
// PEREGRINE_*; CONTRIBUTING.md lists them all.
const (
	// SeedsEnv is how many seeds every seeded suite runs.
	SeedsEnv = "PEREGRINE_SEEDS"
	// SeedEnv is the one seed to replay, when -seed is not given.
	SeedEnv = "PEREGRINE_SEED"
	// DebugEnv turns on a suite's debugging output.
	DebugEnv = "PEREGRINE_DEBUG"
)

var seedFlag = flag.String("seed", "", "replay this one seed (as a failure prints it) in the seeded suites; default $"+SeedEnv)

// Seeds is a suite's seed count by mode.
type Seeds struct {
	// Full is the count of a plain run.
	Full int
	// Short is the count under -short (0: Full).
	Short int
	// Race is the count under the race detector (0: Full).
	Race int
}

// N returns how many seeds the suite runs: PEREGRINE_SEEDS when set,
// else the smallest count of the modes in force.
func (s Seeds) N(t testing.TB) int {
	t.Helper()
	if v := os.Getenv(SeedsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a count of seeds", SeedsEnv, v)
		}
		return n
	}
	n := s.Full
	if testing.Short() && s.Short > 0 {
		n = min(n, s.Short)
	}
	if Race && s.Race > 0 {
		n = min(n, s.Race)
	}
	return n
}

// Replay returns the seed to replay and true when -seed or PEREGRINE_SEED
// names one (decimal, or 0x hexadecimal).
func Replay(t testing.TB) (uint64, bool) {
	t.Helper()
	v, what := *seedFlag, "-seed"
	if v == "" {
		v, what = os.Getenv(SeedEnv), SeedEnv
	}
	if v == "" {
		return 0, false
	}
	seed, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a seed", what, v)
	}
	return seed, true
}

// Debug reports whether PEREGRINE_DEBUG is set: suites print their
// traces then.
func Debug() bool { return os.Getenv(DebugEnv) != "" }
