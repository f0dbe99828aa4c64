package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestDupReportsAllocateNothing: sprayed pushes with loss and frames held
// back, where early resends reach a receiver that had the packet and its
// ACKs report them, allocate nothing per packet (the push's own buffer
// aside), at either end.
func TestDupReportsAllocateNothing(t *testing.T) {
	n := newRackNet(t, sprayed+",path-loss=1%,reorder=2%/200us", 5, nil)
	setDeliver(n.b, func(*Conn, *wire.Header, []byte) Verdict { return Accept })
	n.cookie = make([]uint64, 0, 1024)
	c := n.connect()
	n.push(c, 512, 1024)
	const packets = 512
	allocs := testing.AllocsPerRun(5, func() {
		n.cookie = n.cookie[:0]
		n.push(c, packets, 1024)
	})
	sa, sb := n.a.Stats(), n.b.Stats()
	t.Logf("%.1f allocations per push of %d packets; early %d, reports sent %d, received %d, spurious by them %d", allocs, packets,
		sa.TxEarlyRetransmit, sb.TxDupReport, sa.RxDupReport, sa.SpuriousDupReport)
	require.Positive(t, sa.RxDupReport, "the receiver reported copies it had")
	require.LessOrEqual(t, allocs, 1.0, "only the push's payload buffer")
}

// The floor duplicate reports put under the reordering window gives way
// when early resends keep turning out needed (no report follows them):
// a fabric that loses a quarter of its frames for good made a few late
// originals hold every later loss back for ten round trips.
func TestReportedFloorYieldsToNeededResends(t *testing.T) {
	var r rackState
	r.widen(400 * time.Microsecond)
	wide := r.floor
	psn := uint32(0)
	resend := func(n int) {
		for range n {
			psn++
			r.noteResent(wire.WindowData, psn, 50*time.Microsecond)
		}
	}
	resend(len(r.resent) + floorKeep - 1)
	require.Equal(t, wide, r.floor, "not yet floorKeep resends known needed")
	resend(1)
	require.Equal(t, wide/2, r.floor, "floorKeep needed resends in a row halve it")

	// A report of a spurious one starts the count again.
	late, ok := r.takeResent(wire.WindowData, psn)
	require.True(t, ok)
	r.widen(late)
	resend(floorKeep - 1)
	require.Equal(t, wide/2, r.floor)
	resend(2) // one of them took the slot the report freed: nothing to count there
	require.Equal(t, wide/4, r.floor)
}
