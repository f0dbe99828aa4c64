package mcsq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

func order(got []arrival) []uint64 {
	var s []uint64
	for _, a := range got {
		s = append(s, a.seq)
	}
	return s
}

// TestLookaheadPassesAWaitingHead: while flow B's WR waits for the only
// SQ, flow A's next WR (its identifier bound) goes past it; B's own next
// WR does not overtake B's waiting one. With StrictHOL nothing passes.
func TestLookaheadPassesAWaitingHead(t *testing.T) {
	for _, strict := range []bool{false, true} {
		f := newFixture(t, sim.MCSQNetOptions{Seed: 3, Hosts: 2})
		ts := f.targets()
		dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 1})
		require.NoError(t, err)
		q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true, StrictHOL: strict})
		require.NoError(t, err)
		for k, fl := range []uint64{1, 2, 1, 2} { // WR k+1: flows A B A B
			w := f.push(mcsq.Flow(fl), ts[fl-1], int(fl-1), k+1, 64, uint64(k+1), fl)
			require.NoError(t, q.Post(&w))
		}
		f.runUntilCovered(q, 4, time.Second)
		checkCoverage(t, f.cqes, 4, true)
		st := q.Stats()
		if strict {
			require.Equal(t, []uint64{1, 2, 3, 4}, order(f.got), "strict: posting order")
			require.Zero(t, st.Overtook)
		} else {
			require.Equal(t, []uint64{1, 3, 2, 4}, order(f.got), "A's WR 3 passes B's waiting WR 2; B's WR 4 stays behind WR 2")
			require.Equal(t, uint64(1), st.Overtook)
		}
		require.Positive(t, st.HOLNoSQ)
	}
}

// TestLookaheadStopsAtALocalOperation: a WR behind a local operation never
// starts before it, even when its identifier is bound.
func TestLookaheadStopsAtALocalOperation(t *testing.T) {
	f := newFixture(t, sim.MCSQNetOptions{Seed: 4, Hosts: 2})
	ts := f.targets()
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 1})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
	require.NoError(t, err)
	w1 := f.push(mcsq.Flow(1), ts[0], 0, 1, 64, 1, 1)
	w2 := f.push(mcsq.Flow(2), ts[1], 1, 2, 64, 2, 2)
	cp := mcsq.WR{Op: mcsq.OpCopy, Local: f.srcR, LocalAddr: 4096, Dst: f.srcR, DstAddr: 8192, Len: 16}
	w4 := f.push(mcsq.Flow(1), ts[0], 0, 4, 64, 4, 1)
	for _, w := range []*mcsq.WR{&w1, &w2, &cp, &w4} {
		require.NoError(t, q.Post(w))
	}
	f.runUntilCovered(q, 4, time.Second)
	checkCoverage(t, f.cqes, 4, true)
	require.Equal(t, []uint64{1, 2, 4}, order(f.got))
	require.Zero(t, q.Stats().Overtook)
}

// TestShallowQueueDefaultLookahead: a queue shallower than the default
// lookahead is made with the default options (the lookahead is clamped to
// its depth) and still lets a bound WR overtake a waiting head.
func TestShallowQueueDefaultLookahead(t *testing.T) {
	for _, depth := range []int{2, 64, 128} {
		f := newFixture(t, sim.MCSQNetOptions{Seed: 5, Hosts: 2})
		dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 1})
		require.NoError(t, err)
		q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true, Depth: depth})
		require.NoError(t, err, "Depth %d with the default lookahead", depth)
		ts := f.targets()
		w1 := f.push(mcsq.Flow(1), ts[0], 0, 1, 64, 1, 1)
		require.NoError(t, q.Post(&w1))
		f.runUntilCovered(q, 1, time.Second)
		checkCoverage(t, f.cqes, 1, true)
	}
}
