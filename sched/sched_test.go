package sched

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

func newSched(t testing.TB, opts Options) *Scheduler {
	t.Helper()
	s, err := New(opts)
	require.NoError(t, err)
	return s
}

type picked struct {
	flow  int
	class Class
	item  uint32
}

// drain calls Next until it returns nothing and returns what it got.
func drain(t testing.TB, s *Scheduler, now clock.Time) []picked {
	t.Helper()
	var out []picked
	for {
		f, c, it, ok := s.Next(now)
		if !ok {
			require.Equal(t, -1, f)
			return out
		}
		out = append(out, picked{f, c, it})
	}
}

func TestNewValidatesOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no flows", Options{Flows: 0, Items: 8}, "sched: Flows 0 must be in [1, 16777216] (set Options.Flows"},
		{"too many flows", Options{Flows: MaxFlows + 1, Items: 8}, "Flows 16777217"},
		{"no items", Options{Flows: 1, Items: 0}, "sched: Items 0 must be in [1, 2147483648] (set Options.Items"},
		{"negative quantum", Options{Flows: 1, Items: 1, Quantum: -1}, "sched: Quantum -1 must be in [0, 1073741824] (0 selects 4096 bytes)"},
		{"huge quantum", Options{Flows: 1, Items: 1, Quantum: MaxQuantum + 1}, "Quantum 1073741825"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opts)
			require.Nil(t, s)
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	s := newSched(t, Options{Flows: 3, Items: 5})
	require.Equal(t, 3, s.Flows())
	require.Equal(t, 5, s.Cap())
	require.Equal(t, 0, s.Len())
	require.Equal(t, 1, s.Weight(2))
}

func TestArgumentErrors(t *testing.T) {
	s := newSched(t, Options{Flows: 2, Items: 4})
	for _, err := range []error{
		s.Enqueue(2, ClassData, 1, 100),
		s.Enqueue(-1, ClassData, 1, 100),
		s.Enqueue(0, Class(2), 1, 100),
		s.Enqueue(0, ClassData, 1, 0),
		s.Enqueue(0, ClassData, 1, MaxItemBytes+1),
		s.Requeue(5, ClassRequest, 1, 100),
		s.SetWeight(0, 0),
		s.SetWeight(0, MaxWeight+1),
		s.SetWeight(3, 1),
	} {
		require.ErrorIs(t, err, ErrInvalid)
		require.False(t, errors.Is(err, ErrFull))
	}
	require.EqualError(t, s.Enqueue(2, ClassData, 1, 100),
		"sched: flow 2 out of range [0, 2) (raise Options.Flows): sched: invalid argument")
	require.Equal(t, 0, s.Len())
	require.Equal(t, Stats{}, s.Stats())
	require.Panics(t, func() { s.SetBlocked(2, ClassData, true) })
	require.Panics(t, func() { s.SetBlocked(0, Class(7), true) })
	require.Panics(t, func() { s.PaceUntil(-1, 0) })
	require.Panics(t, func() { s.FlowLen(9, ClassData) })
	require.Panics(t, func() { s.Drop(2, nil) })
	require.Equal(t, "data", ClassData.String())
	require.Equal(t, "request", ClassRequest.String())
	require.Equal(t, "Class(9)", Class(9).String())
}

func TestFIFOPerClassAndDataFirst(t *testing.T) {
	s := newSched(t, Options{Flows: 1, Items: 16})
	// Interleave the classes; each class must come out in its own order,
	// all data before any request.
	for i := range uint32(5) {
		require.NoError(t, s.Enqueue(0, ClassRequest, 100+i, 500))
		require.NoError(t, s.Enqueue(0, ClassData, 200+i, 500))
	}
	require.Equal(t, 5, s.FlowLen(0, ClassData))
	require.Equal(t, 5, s.FlowLen(0, ClassRequest))
	require.Equal(t, 10, s.Len())
	var want []picked
	for i := range uint32(5) {
		want = append(want, picked{0, ClassData, 200 + i})
	}
	for i := range uint32(5) {
		want = append(want, picked{0, ClassRequest, 100 + i})
	}
	require.Equal(t, want, drain(t, s, 0))
	require.Equal(t, 0, s.Len())

	// Data arriving while requests are queued goes out before them.
	require.NoError(t, s.Enqueue(0, ClassRequest, 1, 100))
	require.NoError(t, s.Enqueue(0, ClassRequest, 2, 100))
	_, c, it, ok := s.Next(0)
	require.True(t, ok)
	require.Equal(t, picked{0, ClassRequest, 1}, picked{0, c, it})
	require.NoError(t, s.Enqueue(0, ClassData, 3, 100))
	require.Equal(t, []picked{{0, ClassData, 3}, {0, ClassRequest, 2}}, drain(t, s, 0))
}

func TestPeekMatchesNext(t *testing.T) {
	s := newSched(t, Options{Flows: 3, Items: 32, Quantum: 1000})
	for f := range 3 {
		for i := range 4 {
			require.NoError(t, s.Enqueue(f, Class(i%2), uint32(f*10+i), 300+200*f))
		}
	}
	for s.Len() > 0 {
		pf, pc, pit, pok := s.Peek(0)
		pf2, pc2, pit2, _ := s.Peek(0)
		require.Equal(t, picked{pf, pc, pit}, picked{pf2, pc2, pit2})
		f, c, it, ok := s.Next(0)
		require.Equal(t, pok, ok)
		require.Equal(t, picked{pf, pc, pit}, picked{f, c, it})
	}
	f, _, _, ok := s.Peek(0)
	require.False(t, ok)
	require.Equal(t, -1, f)
}

// backlogged keeps every flow's queue non-empty: each item Next returns is
// enqueued again on the same flow, so the scheduler sees saturated flows.
func runBacklogged(t *testing.T, s *Scheduler, size []int, steps int, check func(sent []int64)) []int64 {
	t.Helper()
	sent := make([]int64, len(size))
	for f := range size {
		for i := range 3 {
			require.NoError(t, s.Enqueue(f, ClassRequest, uint32(i), size[f]))
		}
	}
	for range steps {
		f, c, it, ok := s.Next(0)
		require.True(t, ok)
		sent[f] += int64(size[f])
		require.NoError(t, s.Enqueue(f, c, it, size[f]))
		if check != nil {
			check(sent)
		}
	}
	return sent
}

func TestDRRWeightedFairness(t *testing.T) {
	const quantum = 4096
	s := newSched(t, Options{Flows: 3, Items: 64, Quantum: quantum})
	weights := []int{1, 2, 4}
	for f, w := range weights {
		require.NoError(t, s.SetWeight(f, w))
		require.Equal(t, w, s.Weight(f))
	}
	const item = 1000
	check := func(sent []int64) {
		var total int64
		for _, b := range sent {
			total += b
		}
		for f, w := range weights {
			expected := total * int64(w) / 7
			require.InDelta(t, expected, sent[f], float64(quantum*w),
				"flow %d (weight %d) sent %d of %d bytes, expected %d within one quantum", f, w, sent[f], total, expected)
		}
	}
	sent := runBacklogged(t, s, []int{item, item, item}, 70_000, check)
	require.InDelta(t, 2.0, float64(sent[1])/float64(sent[0]), 0.01)
	require.InDelta(t, 4.0, float64(sent[2])/float64(sent[0]), 0.01)
}

func TestDRRMixedSizesByteFair(t *testing.T) {
	const quantum = 4096
	s := newSched(t, Options{Flows: 2, Items: 64, Quantum: quantum})
	size := []int{64, 9000}
	sent := runBacklogged(t, s, size, 200_000, func(sent []int64) {
		require.LessOrEqual(t, math.Abs(float64(sent[0]-sent[1])), float64(quantum+9000),
			"small-item flow %d bytes, jumbo flow %d bytes", sent[0], sent[1])
	})
	require.InDelta(t, 1.0, float64(sent[0])/float64(sent[1]), 0.01)
	// Item counts are the inverse of the sizes: the small flow is not held
	// to one item per turn.
	require.Greater(t, sent[0]/64, 100*(sent[1]/9000))
}

func TestRoundRobinIgnoresSize(t *testing.T) {
	s := newSched(t, Options{Flows: 3, Items: 64, RoundRobin: true})
	require.NoError(t, s.SetWeight(2, 2))
	for f, size := range []int{64, 9000, 1500} {
		for i := range 4 {
			require.NoError(t, s.Enqueue(f, ClassData, uint32(f*10+i), size))
		}
	}
	var flows []int
	for _, p := range drain(t, s, 0) {
		flows = append(flows, p.flow)
	}
	require.Equal(t, []int{0, 1, 2, 2, 0, 1, 2, 2, 0, 1, 0, 1}, flows)
}

func TestBlockedSkippedAndResumedInOrder(t *testing.T) {
	s := newSched(t, Options{Flows: 2, Items: 32, RoundRobin: true})
	for i := range uint32(3) {
		require.NoError(t, s.Enqueue(0, ClassData, 10+i, 100))
		require.NoError(t, s.Enqueue(0, ClassRequest, 20+i, 100))
		require.NoError(t, s.Enqueue(1, ClassRequest, 30+i, 100))
	}
	// Data window full: flow 0 sends requests meanwhile.
	s.SetBlocked(0, ClassData, true)
	require.True(t, s.Blocked(0, ClassData))
	require.Equal(t, []picked{{0, ClassRequest, 20}, {1, ClassRequest, 30}, {0, ClassRequest, 21}},
		[]picked{next(t, s, 0), next(t, s, 0), next(t, s, 0)})
	// Both windows full: flow 0 is passed over entirely.
	s.SetBlocked(0, ClassRequest, true)
	require.Equal(t, []picked{{1, ClassRequest, 31}, {1, ClassRequest, 32}}, drain(t, s, 0))
	require.Equal(t, uint64(1), s.Stats().BlockedSkips, "the empty Next with blocked items queued")
	_, _, _, ok := s.Next(0)
	require.False(t, ok)
	require.Equal(t, uint64(2), s.Stats().BlockedSkips)
	// Unblocking resumes each class where it stopped, data first.
	s.SetBlocked(0, ClassRequest, false)
	s.SetBlocked(0, ClassData, false)
	s.SetBlocked(0, ClassData, false) // idempotent
	require.False(t, s.Blocked(0, ClassData))
	require.Equal(t, []picked{{0, ClassData, 10}, {0, ClassData, 11}, {0, ClassData, 12}, {0, ClassRequest, 22}},
		drain(t, s, 0))
}

func next(t testing.TB, s *Scheduler, now clock.Time) picked {
	t.Helper()
	f, c, it, ok := s.Next(now)
	require.True(t, ok, "Next(%d) returned nothing", now)
	return picked{f, c, it}
}

// A blocked flow earns no credit while blocked: when it comes back it gets
// one quantum's worth like everyone else, not a burst.
func TestBlockedAccumulatesNoDeficit(t *testing.T) {
	const quantum, item = 4096, 1000
	s := newSched(t, Options{Flows: 2, Items: 64, Quantum: quantum})
	for f := range 2 {
		for i := range 20 {
			require.NoError(t, s.Enqueue(f, ClassRequest, uint32(i), item))
		}
	}
	s.SetBlocked(0, ClassRequest, true)
	for range 12 {
		require.Equal(t, 1, next(t, s, 0).flow)
	}
	s.SetBlocked(0, ClassRequest, false)
	run, maxRun, last := 0, 0, -1
	for range 16 {
		p := next(t, s, 0)
		if p.flow == last {
			run++
		} else {
			run, last = 1, p.flow
		}
		if p.flow == 0 {
			maxRun = max(maxRun, run)
		}
	}
	require.Equal(t, quantum/item, maxRun, "items flow 0 sent in one turn after being unblocked")
}

func TestPacing(t *testing.T) {
	s := newSched(t, Options{Flows: 3, Items: 16, RoundRobin: true})
	for f := range 3 {
		require.NoError(t, s.Enqueue(f, ClassRequest, uint32(f), 100))
	}
	_, ok := s.NextDeadline()
	require.False(t, ok)
	s.PaceUntil(0, 300)
	s.PaceUntil(1, 500)
	s.PaceUntil(1, 200) // replaces the later time
	at, paced := s.Paced(1)
	require.True(t, paced)
	require.Equal(t, clock.Time(200), at)
	d, ok := s.NextDeadline()
	require.True(t, ok)
	require.Equal(t, clock.Time(200), d)

	require.Equal(t, picked{2, ClassRequest, 2}, next(t, s, 100))
	_, _, _, ok = s.Next(199)
	require.False(t, ok, "both remaining flows are paced at 199")
	require.Equal(t, uint64(1), s.Stats().PacedSkips)
	require.Equal(t, uint64(0), s.Stats().BlockedSkips)

	require.Equal(t, picked{1, ClassRequest, 1}, next(t, s, 200), "flow 1 is due at 200")
	_, paced = s.Paced(1)
	require.False(t, paced)
	d, _ = s.NextDeadline()
	require.Equal(t, clock.Time(300), d)
	// Items enqueued while paced wait too.
	require.NoError(t, s.Enqueue(0, ClassData, 7, 100))
	_, _, _, ok = s.Next(250)
	require.False(t, ok)
	require.Equal(t, []picked{{0, ClassData, 7}, {0, ClassRequest, 0}}, drain(t, s, 1000))
	_, ok = s.NextDeadline()
	require.False(t, ok)

	// Unpace ends pacing at once; equal deadlines admit in flow order.
	require.NoError(t, s.Enqueue(2, ClassData, 20, 100))
	require.NoError(t, s.Enqueue(1, ClassData, 10, 100))
	s.PaceUntil(2, 5000)
	s.PaceUntil(1, 5000)
	s.Unpace(0) // not paced: nothing happens
	_, _, _, ok = s.Next(1000)
	require.False(t, ok)
	require.Equal(t, []picked{{1, ClassData, 10}, {2, ClassData, 20}}, drain(t, s, 5000))
	require.NoError(t, s.Enqueue(2, ClassData, 21, 100))
	s.PaceUntil(2, 9000)
	s.Unpace(2)
	require.Equal(t, []picked{{2, ClassData, 21}}, drain(t, s, 1000))
}

func TestPacedFlowRejoinsAtTail(t *testing.T) {
	s := newSched(t, Options{Flows: 3, Items: 16, RoundRobin: true})
	for f := range 3 {
		for i := range 2 {
			require.NoError(t, s.Enqueue(f, ClassData, uint32(10*f+i), 100))
		}
	}
	vc := clock.NewVirtual(1000)
	require.Equal(t, 0, next(t, s, vc.Now()).flow)
	s.PaceUntil(0, vc.Now().Add(10*time.Microsecond)) // congestion window below one packet
	require.Equal(t, 1, next(t, s, vc.Advance(5*time.Microsecond)).flow)
	var flows []int
	for _, p := range drain(t, s, vc.Advance(5*time.Microsecond)) {
		flows = append(flows, p.flow)
	}
	// Flow 1's turn was still running when flow 0 came back, so flow 0 is
	// behind flow 2 (waiting) but ahead of flow 1 (whose turn then ended).
	require.Equal(t, []int{2, 0, 1, 2}, flows)
}

func TestErrFull(t *testing.T) {
	s := newSched(t, Options{Flows: 2, Items: 3})
	require.NoError(t, s.Enqueue(0, ClassData, 1, 100))
	require.NoError(t, s.Enqueue(1, ClassRequest, 2, 100))
	require.NoError(t, s.Enqueue(0, ClassRequest, 3, 100))
	before := s.Stats()
	err := s.Enqueue(1, ClassData, 4, 100)
	require.ErrorIs(t, err, ErrFull)
	require.ErrorIs(t, s.Requeue(1, ClassData, 4, 100), ErrFull)
	require.Equal(t, 3, s.Len())
	require.Equal(t, 0, s.FlowLen(1, ClassData))
	st := s.Stats()
	require.Equal(t, before.Enqueued, st.Enqueued)
	require.Equal(t, uint64(2), st.Full)
	p := next(t, s, 0)
	require.NoError(t, s.Enqueue(1, ClassData, 4, 100), "the slot Next freed is reused")
	got := append([]picked{p}, drain(t, s, 0)...)
	require.ElementsMatch(t, []picked{{0, ClassData, 1}, {0, ClassRequest, 3}, {1, ClassRequest, 2}, {1, ClassData, 4}}, got)
}

type dropSink struct{ got []picked }

func (d *dropSink) release(c Class, item uint32) { d.got = append(d.got, picked{-1, c, item}) }

func TestDrop(t *testing.T) {
	s := newSched(t, Options{Flows: 3, Items: 8, RoundRobin: true})
	require.NoError(t, s.Enqueue(1, ClassRequest, 1, 100))
	require.NoError(t, s.Enqueue(1, ClassData, 2, 100))
	require.NoError(t, s.Enqueue(0, ClassData, 3, 100))
	require.NoError(t, s.Enqueue(1, ClassRequest, 4, 100))
	require.NoError(t, s.Enqueue(1, ClassData, 5, 100))
	require.NoError(t, s.Enqueue(2, ClassData, 6, 100))
	s.SetBlocked(1, ClassData, true)
	var sink dropSink
	require.Equal(t, 4, s.Drop(1, sink.release))
	require.Equal(t, []picked{{-1, ClassData, 2}, {-1, ClassData, 5}, {-1, ClassRequest, 1}, {-1, ClassRequest, 4}}, sink.got)
	require.Equal(t, 2, s.Len())
	require.Equal(t, 0, s.FlowLen(1, ClassData)+s.FlowLen(1, ClassRequest))
	require.Equal(t, uint64(4), s.Stats().Dropped)
	require.Equal(t, 0, s.Drop(1, nil))
	require.True(t, s.Blocked(1, ClassData), "Drop leaves gating alone")

	// The freed slots are reusable and the dropped flow works again.
	for i := range uint32(6) {
		require.NoError(t, s.Enqueue(1, ClassRequest, 10+i, 100))
	}
	require.ErrorIs(t, s.Enqueue(1, ClassRequest, 99, 100), ErrFull)
	require.Equal(t, []picked{{0, ClassData, 3}, {2, ClassData, 6}, {1, ClassRequest, 10}},
		[]picked{next(t, s, 0), next(t, s, 0), next(t, s, 0)}, "flow 1 rejoined the round at its tail")

	// A paced, weighted, blocked flow: Reset clears it all.
	require.NoError(t, s.SetWeight(1, 3))
	s.PaceUntil(1, 100)
	s.SetBlocked(1, ClassRequest, true)
	sink.got = nil
	require.Equal(t, 5, s.Reset(1, sink.release))
	require.Len(t, sink.got, 5)
	require.Equal(t, 1, s.Weight(1))
	require.False(t, s.Blocked(1, ClassData))
	require.False(t, s.Blocked(1, ClassRequest))
	_, paced := s.Paced(1)
	require.False(t, paced)
	_, ok := s.NextDeadline()
	require.False(t, ok)
	require.Equal(t, 0, s.Len())
	_, _, _, ok = s.Next(0)
	require.False(t, ok)
	require.Equal(t, Stats{Enqueued: 12, Dequeued: 3, Dropped: 9, Full: 1, BlockedSkips: 0}, s.Stats())
}

func TestDropCallbackMayEnqueue(t *testing.T) {
	s := newSched(t, Options{Flows: 2, Items: 3})
	for i := range uint32(3) {
		require.NoError(t, s.Enqueue(0, ClassRequest, i, 100))
	}
	// Move every dropped item to flow 1's data queue, reusing the slots as
	// they are released.
	require.Equal(t, 3, s.Drop(0, func(c Class, item uint32) {
		require.NoError(t, s.Enqueue(1, ClassData, item, 100))
	}))
	require.Equal(t, []picked{{1, ClassData, 0}, {1, ClassData, 1}, {1, ClassData, 2}}, drain(t, s, 0))
}

func TestRequeueGivesBackFirst(t *testing.T) {
	s := newSched(t, Options{Flows: 3, Items: 16, RoundRobin: true})
	for f := range 3 {
		for i := range 2 {
			require.NoError(t, s.Enqueue(f, ClassData, uint32(10*f+i), 100))
		}
	}
	// A burst of three picked, only the first one sent: the rest go back in
	// reverse order and come out again in the original order.
	a, b, c := next(t, s, 0), next(t, s, 0), next(t, s, 0)
	require.Equal(t, []int{0, 1, 2}, []int{a.flow, b.flow, c.flow})
	require.NoError(t, s.Requeue(c.flow, c.class, c.item, 100))
	require.NoError(t, s.Requeue(b.flow, b.class, b.item, 100))
	require.Equal(t, uint64(2), s.Stats().Requeued)
	require.Equal(t, []picked{b, c, {0, ClassData, 1}, {1, ClassData, 11}, {2, ClassData, 21}}, drain(t, s, 0))

	// Requeue into an empty blocked class only restores the item.
	s.SetBlocked(1, ClassRequest, true)
	require.NoError(t, s.Requeue(1, ClassRequest, 5, 100))
	_, _, _, ok := s.Next(0)
	require.False(t, ok)
	s.SetBlocked(1, ClassRequest, false)
	require.Equal(t, []picked{{1, ClassRequest, 5}}, drain(t, s, 0))
}

// A send that keeps failing must not cost the flow its share.
func TestRequeueKeepsFairness(t *testing.T) {
	const quantum, item = 4096, 1500
	s := newSched(t, Options{Flows: 2, Items: 16, Quantum: quantum})
	sent := make([]int64, 2)
	for f := range 2 {
		for i := range 4 {
			require.NoError(t, s.Enqueue(f, ClassRequest, uint32(i), item))
		}
	}
	for i := range 20_000 {
		p := next(t, s, 0)
		if p.flow == 0 && i%3 == 0 {
			require.NoError(t, s.Requeue(p.flow, p.class, p.item, item))
			q := next(t, s, 0)
			require.Equal(t, p, q, "the requeued item comes back first")
		}
		sent[p.flow] += item
		require.NoError(t, s.Enqueue(p.flow, p.class, p.item, item))
		require.LessOrEqual(t, math.Abs(float64(sent[0]-sent[1])), float64(quantum+item))
	}
}

func TestZeroAllocs(t *testing.T) {
	s := newSched(t, Options{Flows: 64, Items: 1024})
	for f := range 64 {
		require.NoError(t, s.Enqueue(f, ClassRequest, uint32(f), 1500))
	}
	var sink dropSink
	sink.got = make([]picked, 0, 4096)
	var now clock.Time
	allocs := testing.AllocsPerRun(200, func() {
		now += 10
		f, c, it, ok := s.Next(now)
		if !ok {
			panic("empty")
		}
		_ = s.Requeue(f, c, it, 1500)
		f, c, it, _ = s.Peek(now)
		f, c, it, _ = s.Next(now)
		_ = s.Enqueue(f, c, it, 1500)
		_ = s.Enqueue(f, ClassData, it, 64)
		s.SetBlocked(f, ClassData, true)
		s.PaceUntil(f, now+5)
		_, _ = s.NextDeadline()
		s.SetBlocked(f, ClassData, false)
		s.Drop((f+1)%64, sink.release) // a method value: must not escape
		_ = s.Enqueue((f+1)%64, ClassRequest, it, 1500)
		_ = s.Len() + s.FlowLen(f, c)
		_ = s.Stats()
		sink.got = sink.got[:0]
	})
	require.Equal(t, 0.0, allocs)
	require.Greater(t, s.Stats().Dropped, uint64(0))
}
