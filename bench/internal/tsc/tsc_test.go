package tsc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadIsMonotonic(t *testing.T) {
	const reads = 100_000
	prev := Read()
	for i := range reads {
		now := Read()
		require.GreaterOrEqual(t, now, prev, "read %d went backwards", i)
		prev = now
	}
}

func TestReadAdvances(t *testing.T) {
	start := Read()
	// Spin on the counter itself: bounded by a generous number of reads, it
	// must move long before that on any clock with >= 1 MHz resolution.
	for range 100_000_000 {
		if Read() != start {
			return
		}
	}
	t.Fatal("counter never advanced in 1e8 reads")
}

func TestReadDoesNotAllocate(t *testing.T) {
	var sink uint64
	allocs := testing.AllocsPerRun(1000, func() { sink += Read() })
	require.Zero(t, allocs)
	_ = sink
}

func TestHzIsSane(t *testing.T) {
	hz, err := Hz()
	require.NoError(t, err)
	require.GreaterOrEqual(t, hz, 1e8, "ticks per second")
	require.LessOrEqual(t, hz, 1e10, "ticks per second")
	if !Supported {
		require.InDelta(t, 1e9, hz, 1e7, "fallback counts nanoseconds")
	}
}

func TestHzIsRepeatable(t *testing.T) {
	first, err := hzOver(calibrationTime)
	require.NoError(t, err)
	second, err := hzOver(calibrationTime)
	require.NoError(t, err)
	// Two calibrations of an invariant counter agree to well under 1 %;
	// a wide bound keeps a loaded machine from failing the test.
	require.InEpsilon(t, first, second, 0.05)
}

func BenchmarkRead(b *testing.B) {
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		sink += Read()
	}
	_ = sink
}
