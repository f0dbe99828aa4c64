package sched

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// modelFlow is the reference for one flow: two plain FIFO slices and the
// gating state. It knows nothing about rounds or credit; it checks what any
// correct scheduler must do, whatever its fairness policy: hand out only
// sendable heads, data before requests, nothing while paced, and something
// whenever anything is sendable.
type modelFlow struct {
	q       [numClasses][]uint32
	bytes   [numClasses][]int
	blocked [numClasses]bool
	paced   bool
	until   clock.Time
	weight  int
}

func (f *modelFlow) sendable(c Class) bool { return len(f.q[c]) > 0 && !f.blocked[c] }

type model struct {
	flows []modelFlow
	cap   int
	stats Stats
}

func (m *model) queued() (all, paced int) {
	for i := range m.flows {
		n := len(m.flows[i].q[0]) + len(m.flows[i].q[1])
		all += n
		if m.flows[i].paced {
			paced += n
		}
	}
	return all, paced
}

func (m *model) admit(now clock.Time) {
	for i := range m.flows {
		if f := &m.flows[i]; f.paced && f.until <= now {
			f.paced = false
		}
	}
}

func (m *model) anySendable() bool {
	for i := range m.flows {
		f := &m.flows[i]
		if !f.paced && (f.sendable(ClassData) || f.sendable(ClassRequest)) {
			return true
		}
	}
	return false
}

type modelRun struct {
	t         *testing.T
	seed      uint64
	rng       *rand.Rand
	s         *Scheduler
	m         *model
	now       clock.Time
	seq       uint32 // item numbers are unique so a wrong pick is visible
	last      *picked
	lastBytes int
	op        int
}

func (r *modelRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d, op %d: %s (replay: go test ./sched -run TestModel -seed %d)",
		r.seed, r.op, fmt.Sprintf(format, args...), r.seed)
}

func (r *modelRun) size() int {
	switch r.rng.IntN(4) {
	case 0:
		return 64
	case 1:
		return 1500
	case 2:
		return 9000
	}
	return 1 + r.rng.IntN(9000)
}

// checkPick verifies that (f, c, item) is a legal answer now and returns the
// model flow.
func (r *modelRun) checkPick(f int, c Class, item uint32, ok bool) *modelFlow {
	r.t.Helper()
	if !ok {
		if r.m.anySendable() {
			r.fail("Next returned nothing while a flow has sendable items")
		}
		if f != -1 {
			r.fail("empty Next returned flow %d", f)
		}
		return nil
	}
	mf := &r.m.flows[f]
	switch {
	case mf.paced:
		r.fail("picked flow %d paced until %d at %d", f, mf.until, r.now)
	case !mf.sendable(c):
		r.fail("picked flow %d class %v that is blocked (%v) or empty (%d)", f, c, mf.blocked[c], len(mf.q[c]))
	case c == ClassRequest && mf.sendable(ClassData):
		r.fail("picked flow %d's request while its data was sendable", f)
	case mf.q[c][0] != item:
		r.fail("picked item %d from flow %d class %v, head is %d", item, f, c, mf.q[c][0])
	}
	return mf
}

func (r *modelRun) next() {
	r.now += clock.Time(r.rng.IntN(60))
	r.m.admit(r.now)
	all, paced := r.m.queued()
	peek := r.rng.IntN(4) == 0
	var pf int
	var pc Class
	var pitem uint32
	var pok bool
	if peek {
		pf, pc, pitem, pok = r.s.Peek(r.now)
	}
	f, c, item, ok := r.s.Next(r.now)
	if peek && (pf != f || pc != c || pitem != item || pok != ok) {
		r.fail("Peek gave (%d %v %d %v), Next (%d %v %d %v)", pf, pc, pitem, pok, f, c, item, ok)
	}
	mf := r.checkPick(f, c, item, ok)
	if !ok {
		if all > 0 {
			// Peek counts its empty look too.
			n := uint64(1)
			if peek {
				n = 2
			}
			if paced > 0 {
				r.m.stats.PacedSkips += n
			}
			if all > paced {
				r.m.stats.BlockedSkips += n
			}
		}
		r.last = nil
		return
	}
	r.last, r.lastBytes = &picked{f, c, item}, mf.bytes[c][0]
	r.m.stats.Dequeued++
	mf.q[c] = mf.q[c][1:]
	mf.bytes[c] = mf.bytes[c][1:]
}

func (r *modelRun) add(flow int, c Class, item uint32, bytes int, requeue bool) {
	var err error
	if requeue {
		err = r.s.Requeue(flow, c, item, bytes)
	} else {
		err = r.s.Enqueue(flow, c, item, bytes)
	}
	all, _ := r.m.queued()
	if all == r.m.cap {
		if err != ErrFull {
			r.fail("add at %d of %d items: err %v, want ErrFull", all, r.m.cap, err)
		}
		r.m.stats.Full++
		return
	}
	if err != nil {
		r.fail("add at %d of %d items: %v", all, r.m.cap, err)
	}
	mf := &r.m.flows[flow]
	if requeue {
		r.m.stats.Requeued++
		mf.q[c] = slices.Insert(mf.q[c], 0, item)
		mf.bytes[c] = slices.Insert(mf.bytes[c], 0, bytes)
	} else {
		r.m.stats.Enqueued++
		mf.q[c] = append(mf.q[c], item)
		mf.bytes[c] = append(mf.bytes[c], bytes)
	}
}

func (r *modelRun) drop(flow int, reset bool) {
	mf := &r.m.flows[flow]
	var got []uint32
	var classes []Class
	fn := func(c Class, item uint32) {
		got = append(got, item)
		classes = append(classes, c)
	}
	var n int
	if reset {
		n = r.s.Reset(flow, fn)
	} else {
		n = r.s.Drop(flow, fn)
	}
	want := append(slices.Clone(mf.q[ClassData]), mf.q[ClassRequest]...)
	if n != len(want) || !slices.Equal(got, want) {
		r.fail("Drop(%d) returned %d items %v, want %v", flow, n, got, want)
	}
	for i, c := range classes {
		if (i < len(mf.q[ClassData])) != (c == ClassData) {
			r.fail("Drop(%d) reported item %d as class %v", flow, got[i], c)
		}
	}
	r.m.stats.Dropped += uint64(n)
	mf.q = [numClasses][]uint32{}
	mf.bytes = [numClasses][]int{}
	if reset {
		*mf = modelFlow{weight: 1}
	}
}

func (r *modelRun) step() {
	rng, m := r.rng, r.m
	flow := rng.IntN(len(m.flows))
	c := Class(rng.IntN(2))
	op := rng.IntN(100)
	last := r.last
	r.last = nil
	switch {
	case op < 35:
		r.seq++
		r.add(flow, c, r.seq, r.size(), false)
	case op < 70:
		r.next()
	case op < 75:
		// Put back what Next just returned, as a caller whose send failed;
		// otherwise push a new item at the head.
		if last != nil {
			r.add(last.flow, last.class, last.item, r.lastBytes, true)
			return
		}
		r.seq++
		r.add(flow, c, r.seq, r.size(), true)
	case op < 85:
		b := rng.IntN(3) != 0
		r.s.SetBlocked(flow, c, b)
		m.flows[flow].blocked[c] = b
	case op < 91:
		t := r.now + clock.Time(rng.IntN(300)) - 20
		r.s.PaceUntil(flow, t)
		m.flows[flow].paced, m.flows[flow].until = true, t
	case op < 93:
		r.s.Unpace(flow)
		m.flows[flow].paced = false
	case op < 95:
		w := 1 + rng.IntN(8)
		if err := r.s.SetWeight(flow, w); err != nil {
			r.fail("SetWeight: %v", err)
		}
		m.flows[flow].weight = w
	case op < 98:
		r.drop(flow, false)
	default:
		r.drop(flow, true)
	}
}

func (r *modelRun) compare() {
	s, m := r.s, r.m
	all, _ := m.queued()
	if s.Len() != all {
		r.fail("Len %d, model %d", s.Len(), all)
	}
	var deadline clock.Time
	anyPaced := false
	for i := range m.flows {
		mf := &m.flows[i]
		for c := range Class(numClasses) {
			if s.FlowLen(i, c) != len(mf.q[c]) {
				r.fail("FlowLen(%d, %v) %d, model %d", i, c, s.FlowLen(i, c), len(mf.q[c]))
			}
			if s.Blocked(i, c) != mf.blocked[c] {
				r.fail("Blocked(%d, %v) %v, model %v", i, c, s.Blocked(i, c), mf.blocked[c])
			}
		}
		if s.Weight(i) != mf.weight {
			r.fail("Weight(%d) %d, model %d", i, s.Weight(i), mf.weight)
		}
		until, paced := s.Paced(i)
		if paced != mf.paced || (paced && until != mf.until) {
			r.fail("Paced(%d) (%d, %v), model (%d, %v)", i, until, paced, mf.until, mf.paced)
		}
		if mf.paced && (!anyPaced || mf.until < deadline) {
			deadline, anyPaced = mf.until, true
		}
	}
	d, ok := s.NextDeadline()
	if ok != anyPaced || (ok && d != deadline) {
		r.fail("NextDeadline (%d, %v), model (%d, %v)", d, ok, deadline, anyPaced)
	}
	if s.Stats() != m.stats {
		r.fail("Stats %+v, model %+v", s.Stats(), m.stats)
	}
}

func runModel(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	opts := Options{
		Flows:      1 + rng.IntN(8),
		Items:      1 + rng.IntN(48),
		Quantum:    []int{0, 64, 1500, 4096, 20000}[rng.IntN(5)],
		RoundRobin: rng.IntN(4) == 0,
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("seed %d: New(%+v): %v", seed, opts, err)
	}
	m := &model{flows: make([]modelFlow, opts.Flows), cap: opts.Items}
	for i := range m.flows {
		m.flows[i].weight = 1
	}
	r := &modelRun{t: t, seed: seed, rng: rng, s: s, m: m}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("seed %d, op %d: panic: %v (replay: go test ./sched -run TestModel -seed %d)\n%s",
				seed, r.op, p, seed, debug.Stack())
		}
	}()
	for r.op = range ops {
		r.step()
		r.compare()
	}
	// Lift every gate: everything queued must come out, each class in order.
	for i := range m.flows {
		r.s.Unpace(i)
		m.flows[i].paced = false
		for c := range Class(numClasses) {
			r.s.SetBlocked(i, c, false)
			m.flows[i].blocked[c] = false
		}
	}
	for {
		all, _ := m.queued()
		if all == 0 {
			break
		}
		r.next()
	}
	r.compare()
}

func TestModel(t *testing.T) {
	if seed, ok := testenv.Replay(t); ok {
		runModel(t, seed, 3000)
		return
	}
	seeds := testenv.Seeds{Full: 300, Short: 60, Race: 60}.N(t)
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		runModel(t, seed, 3000)
	}
}
