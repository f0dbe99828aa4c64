package mcsq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

// TestUnblacklistRC: an RC SQ whose WR the target refuses (a region it
// does not have) fails and its QPN goes on the RC pool's blacklist (not
// the DC pool's); later WRs for the QPN complete as blacklisted without
// executing while another QPN goes on; once the host takes the QPN off
// the blacklist, the SQ reconnects on its next WR and the WR executes.
func TestUnblacklistRC(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 21, Hosts: 2})
	rc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC, SQs: 4})
	require.NoError(t, err)
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2})
	require.NoError(t, err)
	require.NoError(t, rc.AddRC(7, f.n.Peers[1]))
	require.NoError(t, rc.AddRC(8, f.n.Peers[0]))
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{RC: rc, DC: dc, Ordered: true})
	require.NoError(t, err)
	f.n.Run(func() bool { return false }, time.Millisecond) // RC connections up

	post := func(k int, qpn uint32, host int, bad bool) {
		w := f.push(mcsq.QPN(qpn), 0, host, k, 64, uint64(k), uint64(qpn))
		if bad {
			w.Remote.Key ^= 0x50000 // not registered at the target
		}
		require.NoError(t, q.Post(&w))
	}
	post(1, 7, 1, false)
	post(2, 7, 1, true)
	post(3, 8, 0, false)
	f.runUntilCovered(q, 3, time.Second)
	post(4, 7, 1, false) // after the failure: never executed
	post(5, 8, 0, false)
	f.runUntilCovered(q, 5, time.Second)
	checkCoverage(t, f.cqes, 5, true)
	st := map[uint64]mcsq.Status{}
	for _, c := range f.cqes {
		for s := c.Seq - uint64(c.Count) + 1; s <= c.Seq; s++ {
			st[s] = c.Status
		}
	}
	require.Equal(t, map[uint64]mcsq.Status{1: mcsq.StatusOK, 2: mcsq.StatusSQFailed, 3: mcsq.StatusOK, 4: mcsq.StatusBlacklisted, 5: mcsq.StatusOK}, st)
	bl := rc.Blacklist(nil)
	require.Equal(t, []mcsq.BlacklistEntry{{ID: mcsq.QPN(7), Cause: mcsq.CauseRemoteError}}, bl)
	require.Empty(t, dc.Blacklist(nil), "RC and DC pools keep separate blacklists")
	ps := rc.Stats()
	require.Equal(t, uint64(1), ps.SQFailures)
	require.Equal(t, uint64(1), ps.Failures[mcsq.CauseRemoteError])
	for _, a := range f.got {
		require.NotEqual(t, uint64(4), a.seq, "a blacklisted WR executed")
	}

	rc.Unblacklist(mcsq.QPN(7))
	f.n.Step() // the poll loop applies it
	require.Empty(t, rc.Blacklist(nil))
	post(6, 7, 1, false)
	f.runUntilCovered(q, 6, time.Second)
	last := f.cqes[len(f.cqes)-1]
	require.Equal(t, uint64(6), last.Seq)
	require.Equal(t, mcsq.StatusOK, last.Status, "%+v", last)
	require.Equal(t, uint64(6), f.got[len(f.got)-1].seq, "the WR after the unblacklist executed at its target")
	require.Equal(t, 1, f.got[len(f.got)-1].host)
	require.Equal(t, uint64(1), rc.Stats().BlacklistRemoves)
}
