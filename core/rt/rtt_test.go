package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

// A long stall learnt from a spurious timeout wears off by halves even
// while shorter ones keep coming: each used to renew it, so at 1 % ACK
// loss (every lost ACK a spurious timeout) one stall of the peer's loop
// held the timeout at its length for the connection's life. The halving
// stops at the longest stall seen since the last one.
func TestShortStallsDoNotRenewALongOne(t *testing.T) {
	o := Options{MinRTO: 100 * time.Microsecond, MaxRTO: time.Second}
	var r rttEstimator
	r.init(o.MinRTO)
	r.sample(30*time.Microsecond, 0, &o)
	at := clock.Time(0)
	r.stalled(2*time.Millisecond, at, &o)
	require.Equal(t, 2500*time.Microsecond, r.stall)
	for i := range 9 { // a short spurious timeout every 100 ms
		at = clock.Time(time.Duration(i+1) * 100 * time.Millisecond)
		r.stalled(100*time.Microsecond, at, &o)
		r.sample(30*time.Microsecond, at, &o)
	}
	r.sample(30*time.Microsecond, clock.Time(stallHalfLife), &o)
	require.Equal(t, 1250*time.Microsecond, r.stall, "the long stall was renewed by the short ones")
	r.sample(30*time.Microsecond, clock.Time(4*stallHalfLife), &o)
	require.Equal(t, 625*time.Microsecond, r.stall)
	r.sample(30*time.Microsecond, clock.Time(6*stallHalfLife), &o)
	require.Equal(t, 312500*time.Nanosecond, r.stall)
	for at := 7; at < 20; at++ {
		r.sample(30*time.Microsecond, clock.Time(time.Duration(at)*stallHalfLife), &o)
	}
	require.Less(t, r.rto, 200*time.Microsecond, "the timeout never came back down")
}
