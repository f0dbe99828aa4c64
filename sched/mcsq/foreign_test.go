package mcsq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

// A layer that shares the engine's endpoint gets its own completions
// (Options.Foreign), and its connection is not the engine's (Holds); the
// WRs' completions stay the engine's, a slot whose generation wraps
// included.
func TestForeignCompletionsAndGenerationWrap(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 3, Hosts: 2})
	ts := f.targets()
	var foreign []txn.Completion
	mcsq.SetForeign(f.n.Engine, func(c *txn.Completion) { foreign = append(foreign, *c) })
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 2})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Depth: 8})
	require.NoError(t, err)
	// The next post to each slot wraps its generation past 2^32-1.
	mcsq.SetGenerations(q, ^uint32(0))
	const n = 8
	for k := 1; k <= n; k++ {
		wr := f.push(mcsq.Flow(uint64(k%2)), ts[k%2], k%2, k, 64, uint64(k), uint64(k%2))
		require.NoError(t, q.Post(&wr))
	}
	own, err := f.n.Init.Open(f.n.Peers[1], txn.ConnOptions{})
	require.NoError(t, err)
	require.False(t, f.n.Engine.Holds(own), "a connection the engine never opened")
	posted := false
	ok := f.n.Run(func() bool {
		if !posted && own.Live() {
			_, err := own.Push(txn.Op{Local: f.srcR, Len: 64, Remote: f.push(mcsq.Flow(0), ts[1], 1, 100, 64, 0, 0).Remote, Tag: 7})
			require.NoError(t, err)
			posted = true
		}
		f.drain(q)
		return f.covered() >= n && len(foreign) == 1
	}, time.Second)
	require.True(t, ok, "%d of %d WRs covered, %d foreign completions", f.covered(), n, len(foreign))
	checkCoverage(t, f.cqes, n, false)
	for _, c := range f.cqes {
		require.Equal(t, mcsq.StatusOK, c.Status, "%+v", c)
	}
	require.Equal(t, uint64(7), foreign[0].Tag)
	require.Equal(t, txn.StatusOK, foreign[0].Status)
}
