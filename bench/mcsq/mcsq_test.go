package mcsq

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
)

// TestDesignsMove: both designs complete WRs on the real clock with the
// benchmark's 1,000 targets (a smoke test of the harness, not a
// measurement).
func TestDesignsMove(t *testing.T) {
	o := Options{Targets: 1000, Hosts: 16, DCSQs: 64}
	o.defaults()
	for _, d := range []design{designMCSQ, designPerTarget} {
		start := time.Now()
		b, err := newBed(&o, d, true, clock.NewReal(), dcIdle)
		require.NoError(t, err)
		ops, err := b.throughput(context.Background(), 2, 8, 200*time.Millisecond, 1)
		rs := b.n.Init.Transport().Stats()
		t.Logf("%v: %.0f WR/s; queue %+v; transport sent %d data, %d retransmitted, %d probes (%d keepalive)", d, ops, b.q.Stats(), rs.TxData, rs.TxRetransmit, rs.AwaitProbes, rs.KeepAliveSent)
		require.NoError(t, b.n.Close())
		lived := time.Since(start)
		require.NoError(t, err)
		require.Positive(t, ops, "%v completed nothing", d)
		// No probe flood: both designs run on the transport's default
		// liveness policy, which probes only a peer that holds the next
		// move — never one whose next packet our own scheduler holds.
		require.Less(t, rs.AwaitProbes, rs.TxData/2, "%v: %d probes for %d data packets", d, rs.AwaitProbes, rs.TxData)
		// Keep-alives go by the clock, not by the data: at most one per
		// connection and keep-alive interval of the bed's life (a loaded
		// machine stretches the life and shrinks the data: 184 keep-alives
		// for 226 data packets under a CPU hog on each core).
		perConn := uint64(lived/rt.DefaultKeepAlive) + 1
		require.LessOrEqual(t, rs.KeepAliveSent, uint64(o.Targets)*perConn, "%v: %d keep-alives in %v", d, rs.KeepAliveSent, lived)
	}
}
