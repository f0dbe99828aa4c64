package mcsq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

// TestRCThroughQPNCAM: on endpoints with global QP numbers an RC WR's QPN
// is the one the transport gave a connection (Pool.OpenRC, or a
// connection opened on the endpoint), translated through the CAM: the SQ
// is bound to that connection and the WRs reach its peer. A QPN the CAM
// does not know is an error CQE (CauseUnknownQPN) and goes on the RC
// blacklist; AddRC, which names its own QPN, is refused.
func TestRCThroughQPNCAM(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 31, Hosts: 2, Transport: func(o *rt.Options) {
		fastTransport(o)
		o.QPN.Enabled = true
	}})
	rc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC, SQs: 4})
	require.NoError(t, err)
	require.ErrorIs(t, rc.AddRC(5, f.n.Peers[0]), mcsq.ErrInvalidOptions)
	q0, err := rc.OpenRC(f.n.Peers[0])
	require.NoError(t, err)
	q1, err := rc.OpenRC(f.n.Peers[1])
	require.NoError(t, err)
	c, err := f.n.Init.Open(f.n.Peers[1], txn.ConnOptions{Ordered: true}) // opened by the host itself
	require.NoError(t, err)
	q2 := c.QPN()
	require.NotZero(t, q0)
	require.NotEqual(t, q0, q1)
	require.NotEqual(t, q1, q2)
	unknown := q2 + 1000
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{RC: rc, Ordered: true})
	require.NoError(t, err)

	hostOf := map[uint32]int{q0: 0, q1: 1, q2: 1}
	qpns := []uint32{q0, q1, q2, q0, q1, q2, unknown, q0, unknown}
	for k, qpn := range qpns {
		w := f.push(mcsq.QPN(qpn), 0, hostOf[qpn], k+1, 64, uint64(k+1), uint64(qpn))
		require.NoError(t, q.Post(&w))
	}
	n := len(qpns)
	f.runUntilCovered(q, n, time.Second)
	checkCoverage(t, f.cqes, n, true)
	st := map[uint64]mcsq.CQE{}
	for _, c := range f.cqes {
		for s := c.Seq - uint64(c.Count) + 1; s <= c.Seq; s++ {
			st[s] = c
		}
	}
	for k, qpn := range qpns {
		c := st[uint64(k+1)]
		switch {
		case qpn != unknown:
			require.Equal(t, mcsq.StatusOK, c.Status, "WR %d to qpn %#x: %+v", k+1, qpn, c)
		case k == 6: // the first WR naming it: the CAM does not know it
			require.Equal(t, mcsq.StatusUnknownID, c.Status)
			require.Equal(t, mcsq.CauseUnknownQPN, c.Cause)
			require.ErrorIs(t, c.Err, mcsq.ErrQPNNotInCAM)
		default: // later ones: blacklisted
			require.Equal(t, mcsq.StatusBlacklisted, c.Status)
			require.Equal(t, mcsq.CauseUnknownQPN, c.Cause)
		}
	}
	require.Len(t, f.got, 7)
	for _, a := range f.got {
		require.Equal(t, hostOf[uint32(a.flow)], a.host, "WR %d reached the peer of the connection its QPN names", a.seq)
	}
	ps := rc.Stats()
	require.Equal(t, uint64(3), ps.Binds, "one SQ per connection")
	require.Equal(t, uint64(1), ps.Failures[mcsq.CauseUnknownQPN])
	require.Equal(t, []mcsq.BlacklistEntry{{ID: mcsq.QPN(unknown), Cause: mcsq.CauseUnknownQPN}}, rc.Blacklist(nil))

	// Without global QPNs, OpenRC says what it needs.
	g := newFixture(t, sim.MCSQNetOptions{Seed: 32, Hosts: 1})
	rc2, err := g.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC})
	require.NoError(t, err)
	_, err = rc2.OpenRC(g.n.Peers[0])
	require.ErrorIs(t, err, mcsq.ErrInvalidOptions)
}
