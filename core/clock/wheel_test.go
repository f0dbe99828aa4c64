package clock

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newTestWheel(t testing.TB, opts WheelOptions) *Wheel {
	t.Helper()
	w, err := NewWheel(opts)
	require.NoError(t, err)
	return w
}

// checkInvariants walks every list of the wheel and verifies the structure:
// links, list labels, occupancy bits, and that each timer sits where its
// deadline says relative to the current tick.
func checkInvariants(t testing.TB, w *Wheel) {
	t.Helper()
	onLists := 0
	for l := range wheelLists {
		head := w.capacity + int32(l)
		count := 0
		for i := w.next[head]; i != head; i = w.next[i] {
			if i < 0 || i >= w.capacity {
				t.Fatalf("list %d links to %d", l, i)
			}
			if w.list[i] != int16(l) {
				t.Fatalf("timer %d is on list %d but labelled %d", i, l, w.list[i])
			}
			if w.prev[w.next[i]] != i {
				t.Fatalf("broken back link after timer %d", i)
			}
			d := w.deadline[i]
			switch {
			case l < wheelSlotLists:
				k, s := l/wheelSlots, uint64(l%wheelSlots)
				shift := uint(k * wheelSlotBits)
				switch {
				case d <= w.cur:
					t.Fatalf("timer %d (deadline %d) on level %d slot %d is already due at %d", i, d, k, s, w.cur)
				case (d>>shift)&(wheelSlots-1) != s:
					t.Fatalf("timer %d (deadline %d) filed in slot %d of level %d", i, d, s, k)
				case d>>(shift+wheelSlotBits) != w.cur>>(shift+wheelSlotBits):
					t.Fatalf("timer %d (deadline %d) filed at too low a level %d (cur %d)", i, d, k, w.cur)
				case s <= (w.cur>>shift)&(wheelSlots-1):
					t.Fatalf("timer %d in slot %d of level %d is behind the current tick %d", i, s, k, w.cur)
				}
			case l == listOverflow:
				if d>>WheelSpanBits <= w.cur>>WheelSpanBits {
					t.Fatalf("timer %d (deadline %d) is within the span of tick %d but on overflow", i, d, w.cur)
				}
			case l == listDue:
				if d > w.cur {
					t.Fatalf("timer %d (deadline %d) is on the due list at tick %d", i, d, w.cur)
				}
			default:
				t.Fatalf("timer %d left on list %d", i, l)
			}
			count++
			if count > int(w.capacity) {
				t.Fatalf("cycle in list %d", l)
			}
		}
		if l < wheelSlotLists {
			bit := w.occupied[l/wheelSlots]>>(l%wheelSlots)&1 == 1
			if bit != (count > 0) {
				t.Fatalf("occupancy bit of list %d is %v but it holds %d timers", l, bit, count)
			}
		}
		onLists += count
	}
	require.Equal(t, w.armed, onLists)
	free := 0
	for i := w.freeHead; i >= 0; i = w.next[i] {
		if w.list[i] != listFree {
			t.Fatalf("timer %d on the free stack is on list %d", i, w.list[i])
		}
		free++
		if free > int(w.capacity) {
			t.Fatal("cycle in the free stack")
		}
	}
	require.Equal(t, int(w.capacity)-w.armed, free)
}

type firing struct {
	id   TimerID
	data uint64
}

func collect(w *Wheel, now Time) []firing {
	var got []firing
	w.Advance(now, func(id TimerID, data uint64) { got = append(got, firing{id, data}) })
	return got
}

func TestNewWheelValidatesOptions(t *testing.T) {
	for _, tc := range []struct {
		opts WheelOptions
		want string
	}{
		{WheelOptions{Timers: 0}, "WheelOptions.Timers 0 is out of range"},
		{WheelOptions{Timers: -3}, "WheelOptions.Timers -3"},
		{WheelOptions{Timers: MaxWheelTimers + 1}, fmt.Sprintf("use 1..%d", MaxWheelTimers)},
		{WheelOptions{Timers: 8, Tick: -time.Microsecond}, "WheelOptions.Tick -1µs is negative"},
	} {
		_, err := NewWheel(tc.opts)
		require.ErrorContains(t, err, tc.want)
	}
	w := newTestWheel(t, WheelOptions{Timers: 8, Start: 77})
	require.Equal(t, DefaultWheelTick, w.Tick())
	require.Equal(t, Time(77), w.Now())
	require.Equal(t, 8, w.Cap())
	require.Equal(t, 0, w.Len())
	_, ok := w.NextDeadline()
	require.False(t, ok)
}

func TestWheelFiresInDeadlineOrder(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 16, Tick: tick})
	id3, err := w.Arm(Time(300*tick), 3)
	require.NoError(t, err)
	id1, err := w.Arm(Time(100*tick), 1)
	require.NoError(t, err)
	id2, err := w.Arm(Time(5000*tick), 2) // on level 1
	require.NoError(t, err)
	require.Equal(t, 3, w.Len())
	require.NotEqual(t, NoTimer, id1)

	require.Empty(t, collect(w, Time(99*tick)))
	require.Equal(t, []firing{{id1, 1}}, collect(w, Time(100*tick)))
	require.Equal(t, []firing{{id3, 3}, {id2, 2}}, collect(w, Time(10000*tick)))
	require.Equal(t, 0, w.Len())
	require.Equal(t, Time(10000*tick), w.Now())
	checkInvariants(t, w)
}

func TestWheelRoundsDeadlinesUpToATick(t *testing.T) {
	const tick = 10 * time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 4, Tick: tick, Start: 5})
	id, err := w.Arm(Time(5+tick+1), 7) // one nanosecond into the second tick
	require.NoError(t, err)
	at, ok := w.NextDeadline()
	require.True(t, ok)
	require.Equal(t, Time(5+2*tick), at, "the deadline rounds up to the next tick boundary")
	require.Empty(t, collect(w, Time(5+tick+1)), "a deadline inside a tick waits for the tick's end")
	require.Empty(t, collect(w, Time(5+2*tick-1)))
	require.Equal(t, []firing{{id, 7}}, collect(w, Time(5+2*tick)))
}

func TestWheelCancel(t *testing.T) {
	w := newTestWheel(t, WheelOptions{Timers: 4, Tick: time.Microsecond})
	a, err := w.Arm(Time(10*time.Microsecond), 1)
	require.NoError(t, err)
	b, err := w.Arm(Time(20*time.Microsecond), 2)
	require.NoError(t, err)

	require.True(t, w.Cancel(a))
	require.False(t, w.Cancel(a), "second cancel of the same timer")
	require.Equal(t, 1, w.Len())
	require.Equal(t, []firing{{b, 2}}, collect(w, Time(time.Millisecond)))
	require.False(t, w.Cancel(b), "cancel of a fired timer")
	require.False(t, w.Cancel(NoTimer))
	require.False(t, w.Cancel(TimerID(1<<timerIndexBits|3)), "index never armed")
	require.False(t, w.Cancel(TimerID(1<<timerIndexBits|1000)), "index beyond capacity")
	checkInvariants(t, w)
}

func TestWheelStaleIDCannotTouchReusedSlot(t *testing.T) {
	w := newTestWheel(t, WheelOptions{Timers: 1, Tick: time.Microsecond})
	old, err := w.Arm(Time(time.Microsecond), 1)
	require.NoError(t, err)
	require.Len(t, collect(w, Time(time.Microsecond)), 1)

	reused, err := w.Arm(Time(time.Millisecond), 2)
	require.NoError(t, err)
	require.Equal(t, old&timerIndexMask, reused&timerIndexMask, "capacity 1: the slot is reused")
	require.NotEqual(t, old, reused, "under a new generation")

	require.False(t, w.Cancel(old), "stale ID must not cancel the new timer")
	require.ErrorIs(t, w.Rearm(old, Time(5*time.Microsecond)), ErrNotArmed)
	require.Equal(t, 1, w.Len())
	require.True(t, w.Cancel(reused))

	// Generations wrap after 255 re-uses but never produce NoTimer.
	seen := map[TimerID]bool{}
	for range 600 {
		id, err := w.Arm(Time(time.Second), 0)
		require.NoError(t, err)
		require.NotEqual(t, NoTimer, id)
		seen[id] = true
		require.True(t, w.Cancel(id))
	}
	require.Len(t, seen, 255)
}

func TestWheelRearm(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 4, Tick: tick})
	a, err := w.Arm(Time(100*tick), 1)
	require.NoError(t, err)
	b, err := w.Arm(Time(200*tick), 2)
	require.NoError(t, err)

	require.NoError(t, w.Rearm(a, Time(300*tick))) // later
	require.NoError(t, w.Rearm(b, Time(50*tick)))  // earlier
	require.Empty(t, collect(w, Time(49*tick)))
	require.Equal(t, []firing{{b, 2}}, collect(w, Time(100*tick)))
	require.NoError(t, w.Rearm(a, Time(1<<20*tick)), "far, onto a coarser level")
	require.Empty(t, collect(w, Time(300*tick)))
	require.NoError(t, w.Rearm(a, Time(0)), "into the past: due on the next Advance")
	require.Equal(t, []firing{{a, 1}}, collect(w, Time(300*tick)))

	err = w.Rearm(a, Time(400*tick))
	require.ErrorIs(t, err, ErrNotArmed)
	checkInvariants(t, w)
}

func TestWheelFull(t *testing.T) {
	w := newTestWheel(t, WheelOptions{Timers: 3})
	var ids []TimerID
	for i := range 3 {
		id, err := w.Arm(Time(i+1)*Time(time.Millisecond), uint64(i))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	_, err := w.Arm(Time(time.Second), 9)
	require.True(t, errors.Is(err, ErrWheelFull), "got %v", err)
	require.Equal(t, 3, w.Len())

	require.True(t, w.Cancel(ids[1]))
	_, err = w.Arm(Time(time.Second), 9)
	require.NoError(t, err, "a cancelled timer frees room")
	checkInvariants(t, w)
}

func TestWheelDueTimersFireOnNextAdvance(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 4, Tick: tick})
	w.Advance(Time(1000*tick), func(TimerID, uint64) { t.Fatal("nothing armed") })
	a, err := w.Arm(Time(1000*tick), 1) // == now
	require.NoError(t, err)
	b, err := w.Arm(Time(3*tick), 2) // long past
	require.NoError(t, err)
	at, ok := w.NextDeadline()
	require.True(t, ok)
	require.Equal(t, w.Now(), at, "a due timer makes the next deadline now")
	checkInvariants(t, w)
	require.Equal(t, []firing{{a, 1}, {b, 2}}, collect(w, w.Now()), "due timers fire in arm order")
	require.Equal(t, 0, w.Len())
}

func TestWheelAdvanceBackwardsDoesNotMoveTime(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 4, Tick: tick})
	w.Advance(Time(500*tick), nil)
	id, err := w.Arm(Time(600*tick), 1)
	require.NoError(t, err)
	require.Equal(t, 0, w.Advance(Time(100*tick), func(TimerID, uint64) { t.Fatal("fired while going back") }))
	require.Equal(t, Time(500*tick), w.Now())
	require.Equal(t, []firing{{id, 1}}, collect(w, Time(600*tick)))
}

func TestWheelFireCallbackMayArm(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 1, Tick: tick})
	_, err := w.Arm(Time(10*tick), 0)
	require.NoError(t, err)

	// A chain: each firing re-arms 10 ticks later, reusing the only slot.
	var fired []uint64
	var chain func(id TimerID, data uint64)
	chain = func(id TimerID, data uint64) {
		fired = append(fired, data)
		require.False(t, w.Cancel(id), "the fired ID is already released")
		if data < 9 {
			_, err := w.Arm(Time(int64(data+2)*10)*Time(tick), data+1)
			require.NoError(t, err, "capacity 1: the fired timer's slot is free before fire runs")
		}
	}
	n := w.Advance(Time(1000*tick), chain)
	require.Equal(t, 10, n, "timers armed by fire for later ticks up to now fire in the same Advance")
	require.Equal(t, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, fired)

	// A callback that re-arms "now" forever fires once per Advance.
	_, err = w.Arm(Time(1001*tick), 0)
	require.NoError(t, err)
	again := func(TimerID, uint64) {
		_, err := w.Arm(w.Now(), 0)
		require.NoError(t, err)
	}
	require.Equal(t, 1, w.Advance(Time(1001*tick), again))
	require.Equal(t, 1, w.Len())
	require.Equal(t, 1, w.Advance(Time(1001*tick), again))
	checkInvariants(t, w)

	require.Panics(t, func() {
		w.Advance(Time(1002*tick), func(TimerID, uint64) { w.Advance(Time(1003*tick), nil) })
	})
	require.NotPanics(t, func() { w.Advance(Time(1004*tick), nil) }, "the wheel recovers after a panicking callback")
}

func TestWheelFireCallbackMayCancelSameTickTimer(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 4, Tick: tick})
	var ids [3]TimerID
	for i := range ids {
		var err error
		ids[i], err = w.Arm(Time(5*tick), uint64(i))
		require.NoError(t, err)
	}
	var got []uint64
	w.Advance(Time(5*tick), func(_ TimerID, data uint64) {
		got = append(got, data)
		if data == 0 {
			require.True(t, w.Cancel(ids[2]))
		}
	})
	require.Equal(t, []uint64{0, 1}, got)
	checkInvariants(t, w)
}

// TestWheelOneTickSteps drives the wheel one tick at a time and checks each
// timer fires no earlier than its deadline and less than a tick after it.
func TestWheelOneTickSteps(t *testing.T) {
	const tick = time.Microsecond
	const start = Time(123)
	rng := rand.New(rand.NewPCG(1, 2))
	w := newTestWheel(t, WheelOptions{Timers: 2000, Tick: tick, Start: start})
	deadlines := make([]Time, 2000)
	for i := range deadlines {
		deadlines[i] = start + Time(rng.Int64N(int64(5000*tick)))
		_, err := w.Arm(deadlines[i], uint64(i))
		require.NoError(t, err)
	}
	fired := make([]bool, len(deadlines))
	for k := Time(0); k <= 5000; k++ {
		now := start + k*Time(tick)
		w.Advance(now, func(_ TimerID, data uint64) {
			at := deadlines[data]
			require.False(t, fired[data], "timer %d fired twice", data)
			fired[data] = true
			require.LessOrEqual(t, at, now, "timer %d fired early", data)
			require.Less(t, now, at.Add(tick), "timer %d fired more than a tick late", data)
		})
	}
	require.Equal(t, 0, w.Len())
	require.NotContains(t, fired, false)
}

// TestWheelMatchesReference arms, re-arms and cancels timers at random
// deadlines spread over (and beyond) the wheel's span, advances by random steps
// large and small, and checks against a plain reference that every timer fires
// exactly once, never early, at the first Advance at which it is due, and in
// deadline order.
func TestWheelMatchesReference(t *testing.T) {
	for _, cfg := range []struct {
		name  string
		tick  time.Duration
		start Time
		seed  uint64
	}{
		{"1us", time.Microsecond, 987_654_321, 1},
		{"10ns_negative_start", 10 * time.Nanosecond, -5_000_000_007, 2},
		{"default_tick", 0, 0, 3},
	} {
		t.Run(cfg.name, func(t *testing.T) { runReference(t, cfg.tick, cfg.start, cfg.seed) })
	}
}

func runReference(t *testing.T, tick time.Duration, start Time, seed uint64) {
	const total = 12000   // timers armed over the run
	const capacity = 2048 // at most this many at once
	const fromFire = 1500 // of which armed by fire callbacks
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	w := newTestWheel(t, WheelOptions{Timers: capacity, Tick: tick, Start: start})
	tk := w.Tick()
	ceilTick := func(at Time) uint64 { return w.deadlineTicks(at) }

	type ref struct {
		id        TimerID
		at        Time
		armed     bool
		cancelled bool
		fired     bool
	}
	refs := make([]ref, 0, total)
	armedIdx := make([]int, 0, capacity) // indexes into refs of armed timers (unordered)
	pos := make(map[int]int)             // refs index -> position in armedIdx
	removeArmed := func(r int) {
		p := pos[r]
		last := armedIdx[len(armedIdx)-1]
		armedIdx[p] = last
		pos[last] = p
		armedIdx = armedIdx[:len(armedIdx)-1]
		delete(pos, r)
	}
	randomDeadline := func(now Time) Time {
		var ticks int64
		switch p := rng.IntN(100); {
		case p < 45:
			ticks = rng.Int64N(200)
		case p < 75:
			ticks = rng.Int64N(1 << 20)
		case p < 95:
			ticks = rng.Int64N(1 << 36)
		default: // beyond the span: overflow list
			ticks = 1<<WheelSpanBits + rng.Int64N(1<<44)
		}
		return now + Time(ticks)*Time(tk) + Time(1+rng.Int64N(int64(tk))) // strictly in the future
	}
	arm := func(now Time) {
		at := randomDeadline(now)
		r := len(refs)
		id, err := w.Arm(at, uint64(r))
		require.NoError(t, err)
		refs = append(refs, ref{id: id, at: at, armed: true})
		pos[r] = len(armedIdx)
		armedIdx = append(armedIdx, r)
	}

	var order []int // refs indexes in firing order
	prevNow := start
	armedByFire := 0
	steps := 0
	for len(refs) < total || len(armedIdx) > 0 {
		steps++
		require.Less(t, steps, 200000, "the run does not converge")
		now := w.Now()
		// Random operations between two Advances.
		for range rng.IntN(8) {
			switch op := rng.IntN(10); {
			case op < 6 && len(refs) < total-fromFire+armedByFire && len(armedIdx) < capacity:
				arm(now)
			case op < 8 && len(armedIdx) > 0:
				r := armedIdx[rng.IntN(len(armedIdx))]
				require.True(t, w.Cancel(refs[r].id))
				require.False(t, w.Cancel(refs[r].id))
				refs[r].armed, refs[r].cancelled = false, true
				removeArmed(r)
			case len(armedIdx) > 0:
				r := armedIdx[rng.IntN(len(armedIdx))]
				refs[r].at = randomDeadline(now)
				require.NoError(t, w.Rearm(refs[r].id, refs[r].at))
			}
		}
		if len(refs) >= total-fromFire+armedByFire && len(armedIdx) == 0 && len(refs) < total {
			arm(now) // keep the run going until every timer was armed
		}
		require.Equal(t, len(armedIdx), w.Len())
		if steps%64 == 0 {
			checkInvariants(t, w)
		}

		// Next time to advance to.
		switch p := rng.IntN(10); {
		case p < 4:
			if next, ok := w.NextDeadline(); ok {
				now = next
			}
		case p < 7:
			now += Time(rng.Int64N(300 * int64(tk)))
		case p < 9:
			now += Time(rng.Int64N(1 << 22 * int64(tk)))
		default:
			now += Time(rng.Int64N(1 << 36 * int64(tk)))
		}
		require.Less(t, now, Time(math.MaxInt64/2), "test time overflows: use a finer tick")
		if len(refs) == total && len(armedIdx) > 0 && rng.IntN(4) == 0 {
			// Finish quickly once everything is armed: jump to the next deadline.
			if next, ok := w.NextDeadline(); ok && next > now {
				now = next
			}
		}

		firstInThisAdvance := len(order)
		w.Advance(now, func(id TimerID, data uint64) {
			r := int(data)
			if r >= len(refs) || refs[r].id != id {
				t.Fatalf("fire(%#x, %d): no such timer", id, data)
			}
			x := &refs[r]
			switch {
			case !x.armed:
				t.Fatalf("timer %d fired but was not armed (cancelled %v, fired %v)", r, x.cancelled, x.fired)
			case x.at > now:
				t.Fatalf("timer %d (deadline %v) fired early, at %v", r, x.at, now)
			case ceilTick(x.at) <= w.floorTicks(prevNow):
				t.Fatalf("timer %d (deadline %v) was already due at the previous Advance (%v)", r, x.at, prevNow)
			}
			x.armed, x.fired = false, true
			removeArmed(r)
			order = append(order, r)
			if armedByFire < fromFire && len(refs) < total && rng.IntN(3) == 0 {
				armedByFire++
				// From the tick being fired: the new timer may fall due
				// within this Advance. (One armed for this very tick would
				// wait for the next Advance; TestWheelFireCallbackMayArm
				// covers that.)
				arm(w.tickTime(ceilTick(refs[r].at)))
			}
		})
		// Not late: nothing still armed is due.
		nowTick := w.floorTicks(now)
		for _, r := range armedIdx {
			if ceilTick(refs[r].at) <= nowTick {
				t.Fatalf("timer %d (deadline %v) is due at %v but did not fire", r, refs[r].at, now)
			}
		}
		// In deadline order within the Advance (at tick granularity).
		for i := firstInThisAdvance + 1; i < len(order); i++ {
			if ceilTick(refs[order[i-1]].at) > ceilTick(refs[order[i]].at) {
				t.Fatalf("timer %d (deadline %v) fired after timer %d (deadline %v)", order[i-1], refs[order[i-1]].at, order[i], refs[order[i]].at)
			}
		}
		prevNow = max(prevNow, now)
	}
	checkInvariants(t, w)

	// Against the sorted reference: every timer not cancelled fired exactly
	// once, and the firing sequence is the deadline-sorted sequence.
	var want []int
	for r, x := range refs {
		require.False(t, x.armed)
		require.NotEqual(t, x.cancelled, x.fired, "timer %d: cancelled %v fired %v", r, x.cancelled, x.fired)
		if x.fired {
			want = append(want, r)
		}
	}
	slices.SortStableFunc(want, func(a, b int) int {
		return cmp.Compare(ceilTick(refs[a].at), ceilTick(refs[b].at))
	})
	require.Len(t, order, len(want))
	gotTicks := make([]uint64, len(order))
	wantTicks := make([]uint64, len(want))
	for i := range order {
		gotTicks[i] = ceilTick(refs[order[i]].at)
		wantTicks[i] = ceilTick(refs[want[i]].at)
	}
	require.Equal(t, wantTicks, gotTicks)
	slices.Sort(want)
	slices.Sort(order)
	require.Equal(t, want, order)
	t.Logf("%d timers fired, %d cancelled, %d Advance calls", len(order), len(refs)-len(order), steps)
}

func TestWheelIdleGapIsCheap(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 128, Tick: tick})

	// Nothing armed: crossing 2^40 ticks visits no slot.
	w.Advance(Time(1<<40*tick), nil)
	require.Zero(t, w.slotVisits)

	// One timer 2^35+17 ticks out: at most one cascade per level on the way.
	base := w.Now()
	id, err := w.Arm(base+Time(1<<35+17)*Time(tick), 1)
	require.NoError(t, err)
	require.Zero(t, w.Advance(base+Time(1<<35+16)*Time(tick), nil))
	require.LessOrEqual(t, w.slotVisits, uint64(wheelLevels))
	require.Equal(t, []firing{{id, 1}}, collect(w, base+Time(1<<35+17)*Time(tick)))
	require.LessOrEqual(t, w.slotVisits, uint64(wheelLevels+1))
	checkInvariants(t, w)

	// 100 timers scattered over 2^36 ticks, one Advance over all of them:
	// visits are bounded by timers × levels, not by the 2^36 ticks crossed.
	w.slotVisits = 0
	rng := rand.New(rand.NewPCG(9, 9))
	base = w.Now()
	for i := range 100 {
		_, err := w.Arm(base+Time(rng.Int64N(1<<36)+1)*Time(tick), uint64(i))
		require.NoError(t, err)
	}
	require.Equal(t, 100, w.Advance(base+Time(1<<36+1)*Time(tick), func(TimerID, uint64) {}))
	require.LessOrEqual(t, w.slotVisits, uint64(100*wheelLevels+wheelLevels))
	t.Logf("100 timers over 2^36 ticks: %d slot visits", w.slotVisits)

	// Beyond the span: re-filed once per 2^42 ticks crossed.
	w.slotVisits = 0
	base = w.Now()
	id, err = w.Arm(base+Time(3<<WheelSpanBits)*Time(tick), 5)
	require.NoError(t, err)
	checkInvariants(t, w)
	require.Equal(t, []firing{{id, 5}}, collect(w, base+Time(3<<WheelSpanBits)*Time(tick)))
	require.LessOrEqual(t, w.slotVisits, uint64(4+wheelLevels))
}

// TestWheelNextDeadlineIsALowerBound checks, on random timers, that nothing
// fires before NextDeadline, that the bound never exceeds the earliest rounded
// deadline, and that jumping from one NextDeadline to the next fires every
// timer with few idle steps.
func TestWheelNextDeadlineIsALowerBound(t *testing.T) {
	const tick = time.Microsecond
	const n = 3000
	rng := rand.New(rand.NewPCG(4, 5))
	w := newTestWheel(t, WheelOptions{Timers: n, Tick: tick, Start: 1000})
	deadlines := make([]Time, n)
	armed := make(map[uint64]bool)
	for i := range deadlines {
		var span int64 = 1 << 12
		if i%3 == 0 {
			span = 1 << 38
		}
		deadlines[i] = 1000 + Time(rng.Int64N(span*int64(tick)))
		_, err := w.Arm(deadlines[i], uint64(i))
		require.NoError(t, err)
		armed[uint64(i)] = true
	}
	rounded := func(at Time) Time { return w.tickTime(w.deadlineTicks(at)) }
	byDeadline := make([]uint64, n) // the reference: timers sorted by rounded deadline
	for i := range byDeadline {
		byDeadline[i] = uint64(i)
	}
	slices.SortFunc(byDeadline, func(a, b uint64) int { return cmp.Compare(rounded(deadlines[a]), rounded(deadlines[b])) })
	steps, fired := 0, 0
	for {
		next, ok := w.NextDeadline()
		require.Equal(t, len(armed) > 0, ok)
		if !ok {
			break
		}
		for !armed[byDeadline[0]] {
			byDeadline = byDeadline[1:]
		}
		earliest := rounded(deadlines[byDeadline[0]])
		require.LessOrEqual(t, next, max(earliest, w.Now()))
		if next > w.Now() {
			require.Zero(t, w.Advance(next-1, func(TimerID, uint64) { t.Fatal("fired before NextDeadline") }))
		}
		visits := w.slotVisits
		got := w.Advance(next, func(_ TimerID, data uint64) {
			require.True(t, armed[data])
			require.LessOrEqual(t, deadlines[data], next)
			delete(armed, data)
		})
		require.True(t, got > 0 || w.slotVisits > visits, "Advance(NextDeadline) made no progress")
		fired += got
		steps++
	}
	require.Equal(t, n, fired)
	require.LessOrEqual(t, steps, n*wheelLevels)
	t.Logf("%d timers fired in %d NextDeadline steps", n, steps)
}

func TestWheelDoesNotAllocate(t *testing.T) {
	const tick = time.Microsecond
	w := newTestWheel(t, WheelOptions{Timers: 1024, Tick: tick})
	now := Time(0)
	fired := 0
	fire := func(TimerID, uint64) { fired++ }
	for i := range 512 { // background population across levels
		_, err := w.Arm(Time(i)*Time(1<<20*tick), uint64(i))
		require.NoError(t, err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		id, _ := w.Arm(now+Time(100*tick), 1)
		w.Cancel(id)
	})
	require.Zero(t, allocs, "Arm+Cancel")
	allocs = testing.AllocsPerRun(1000, func() {
		id, _ := w.Arm(now+Time(100*tick), 1)
		_ = w.Rearm(id, now+Time(5000*tick))
		w.Cancel(id)
	})
	require.Zero(t, allocs, "Arm+Rearm+Cancel")
	allocs = testing.AllocsPerRun(1000, func() {
		_, _ = w.Arm(now+Time(3*tick), 1)
		now += Time(4 * tick)
		w.Advance(now, fire)
		_, _ = w.NextDeadline()
	})
	require.Zero(t, allocs, "Arm+Advance")
	require.Greater(t, fired, 1000)
}

func BenchmarkWheelArmCancel(b *testing.B) {
	for _, background := range []int{0, 1024, 65536} {
		b.Run(fmt.Sprintf("armed=%d", background), func(b *testing.B) {
			const tick = time.Microsecond
			w := newTestWheel(b, WheelOptions{Timers: background + 1, Tick: tick})
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range background {
				_, err := w.Arm(Time(rng.Int64N(1<<30))*Time(tick), uint64(i))
				require.NoError(b, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				id, _ := w.Arm(Time(i&0xffff)*Time(tick)+1, 0)
				w.Cancel(id)
			}
		})
	}
}

// BenchmarkWheelArmFire arms burst timers per tick, a few hundred ticks ahead
// (as retransmit timers are), and advances one tick per iteration, so each
// timer is armed, cascaded as needed and fired once.
func BenchmarkWheelArmFire(b *testing.B) {
	for _, burst := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("burst=%d", burst), func(b *testing.B) {
			const tick = time.Microsecond
			const ahead = 300
			w := newTestWheel(b, WheelOptions{Timers: burst * (ahead + 2), Tick: tick})
			fired := 0
			fire := func(TimerID, uint64) { fired++ }
			now := Time(0)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for j := range burst {
					if _, err := w.Arm(now+Time(ahead*tick)+Time(j), 0); err != nil {
						b.Fatal(err)
					}
				}
				now += Time(tick)
				w.Advance(now, fire)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/timer")
			if b.N > ahead+1 && fired < (b.N-ahead-1)*burst {
				b.Fatalf("fired %d timers, want at least %d", fired, (b.N-ahead-1)*burst)
			}
		})
	}
}

// BenchmarkWheelAdvanceIdle is a busy poll loop's Advance: many calls per
// tick, a window of retransmit timers armed and none due (b.N stays
// below the six hundred million calls that would reach them).
func BenchmarkWheelAdvanceIdle(b *testing.B) {
	const tick = time.Microsecond
	w := newTestWheel(b, WheelOptions{Timers: 256, Tick: tick})
	for i := range 256 {
		_, err := w.Arm(Time(time.Minute)+Time(i)*Time(tick), 0)
		require.NoError(b, err)
	}
	fire := func(TimerID, uint64) { b.Fatal("a timer fired") }
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// Ten calls a tick, as a loop of 100 ns iterations makes.
		w.Advance(Time(i/10)*Time(tick), fire)
	}
}
