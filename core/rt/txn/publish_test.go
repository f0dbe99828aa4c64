package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestIdlePollPublishesOnlyWhatChanged: a Poll that finds no work does not
// republish the counters (a busy loop's idle Polls spent half their time
// on it), but one that follows a call which counted (a post refused with
// ErrBusy) does, so Stats never misses what a caller just caused.
func TestIdlePollPublishesOnlyWhatChanged(t *testing.T) {
	p := newPair(t, 3, "", func(a, b *Options) {
		a.OnRequest, b.OnRequest = nil, nil
		a.MaxOps, a.CQSize = 1, 1
	})
	c := p.connect(ConnOptions{Ordered: true})
	ra, _ := p.a.Register(make([]byte, 4096), 0)
	rb, _ := p.b.Register(make([]byte, 4096), RemoteWrite)
	op := Op{Local: ra, Len: 64, Remote: wire.RegionRef{Key: rb.Key}}
	_, err := c.Push(op)
	require.NoError(t, err)
	// Complete it without draining the completion queue (pair.poll would).
	for p.a.Outstanding() > 0 {
		now := p.clk.Now()
		if p.a.Poll(now)+p.fab.Poll(now)+p.b.Poll(now) == 0 {
			p.clk.Advance(time.Microsecond)
		}
	}
	settle := func() {
		for {
			now := p.clk.Now()
			if p.a.Poll(now)+p.fab.Poll(now)+p.b.Poll(now) == 0 {
				return
			}
		}
	}
	settle()
	require.Zero(t, p.a.Stats().Busy)

	// The completion queue is full: the post is refused and counted, and
	// the next Poll, idle, publishes it.
	_, err = c.Push(op)
	require.ErrorIs(t, err, ErrBusy)
	p.a.Poll(p.clk.Now())
	require.EqualValues(t, 1, p.a.Stats().Busy)

	// An idle Poll after no call leaves the published counters alone:
	// what changed unseen (here by hand) waits for a Poll that works.
	require.Zero(t, p.a.Poll(p.clk.Now()))
	p.a.cnt.own[cBusy] += 5
	require.Zero(t, p.a.Poll(p.clk.Now()))
	require.EqualValues(t, 1, p.a.Stats().Busy, "an idle Poll republished the counters")
	p.a.cnt.own[cBusy] -= 5
}
