package smallops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

// The meter counts the gaps between iterations longer than its bound,
// and only those, and keeps the longest.
func TestStallMeterCountsLongGaps(t *testing.T) {
	m := newStallMeter("target", time.Millisecond)
	at := clock.Time(1_000_000)
	for _, gap := range []time.Duration{0, time.Microsecond, time.Millisecond, 1001 * time.Microsecond, 5 * time.Microsecond, 7 * time.Millisecond, 2 * time.Microsecond} {
		at = at.Add(gap)
		require.Zero(t, m.Poll(at), "a meter does no work")
	}
	require.EqualValues(t, 2, m.stalls.Load())
	require.Equal(t, 7*time.Millisecond, time.Duration(m.longest.Load()))
}

// An iteration costs the meter no allocation.
func TestStallMeterAllocatesNothing(t *testing.T) {
	m := newStallMeter("initiator", time.Millisecond)
	at := clock.Time(1)
	allocs := testing.AllocsPerRun(1000, func() {
		at = at.Add(3 * time.Millisecond)
		m.Poll(at)
	})
	require.Zero(t, allocs)
	require.Positive(t, m.stalls.Load())
}
