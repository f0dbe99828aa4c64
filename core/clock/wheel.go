package clock

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// TimerID names one armed timer of a Wheel.
//
// The low 24 bits are the timer's slot index in the wheel, the high 8 bits a
// generation that changes every time the slot is released (fired or
// cancelled). An ID kept after its timer fired therefore no longer matches the
// slot once the slot is re-armed, so Cancel or Rearm through a stale ID is
// refused instead of hitting somebody else's timer. Generations run 1..255 and
// wrap, so an ID goes stale reliably only for its slot's next 254 re-uses:
// holders should drop an ID when its timer fires, and not keep it for ages.
//
// The zero TimerID (NoTimer) is never issued; use it for "no timer armed".
type TimerID uint32

// NoTimer is never a valid TimerID.
const NoTimer TimerID = 0

const (
	timerIndexBits = 24
	timerIndexMask = 1<<timerIndexBits - 1

	// MaxWheelTimers is the largest WheelOptions.Timers: the index part of a
	// TimerID has 24 bits.
	MaxWheelTimers = 1 << timerIndexBits

	// DefaultWheelTick is the tick used when WheelOptions.Tick is 0.
	DefaultWheelTick = 10 * time.Microsecond

	wheelSlotBits = 6
	wheelSlots    = 1 << wheelSlotBits // slots per level, one bit each in a uint64
	wheelLevels   = 7
	// WheelSpanBits: the levels together cover 2^42 ticks (about 51 days at a
	// 1µs tick, 1.4 years at 10µs). Timers further out wait in an overflow list
	// (see Wheel).
	WheelSpanBits = wheelSlotBits * wheelLevels

	// List numbers: one list per slot of every level, then three special ones.
	wheelSlotLists = wheelLevels * wheelSlots
	listOverflow   = wheelSlotLists     // deadline beyond the top level's current rotation
	listDue        = wheelSlotLists + 1 // armed with a deadline already reached; fires on the next Advance
	listRefile     = wheelSlotLists + 2 // scratch: the overflow list while it is re-filed
	wheelLists     = wheelSlotLists + 3
	listFree       = -1 // the timer is not armed
)

var (
	// ErrWheelFull is returned by Arm when every timer of the wheel is armed.
	ErrWheelFull = errors.New("clock: timer wheel full (raise WheelOptions.Timers)")
	// ErrNotArmed is returned by Rearm when the TimerID does not name an armed
	// timer: it already fired, was cancelled, or is stale.
	ErrNotArmed = errors.New("clock: timer not armed")
)

// WheelOptions configures a Wheel.
type WheelOptions struct {
	// Tick is the wheel's resolution. Deadlines are rounded up to a whole
	// tick: a timer fires in the first Advance whose now has reached its
	// deadline's tick boundary, so never early, and less than one tick late
	// when Advance is called at least once a tick. 0 selects
	// DefaultWheelTick (10µs).
	Tick time.Duration
	// Timers is the capacity: how many timers may be armed at once. All
	// memory is allocated by NewWheel. Required, 1..MaxWheelTimers.
	Timers int
	// Start is the wheel's current time at creation; deadlines are counted
	// in ticks from it.
	Start Time
}

// Wheel is a hierarchical timer wheel of fixed capacity for one goroutine.
//
// # Structure
//
// Time is counted in ticks since WheelOptions.Start. There are 7 levels of 64
// slots; a slot of level k spans 64^k ticks. A timer with deadline tick d is
// kept at the level of the highest 6-bit digit in which d differs from the
// current tick, in the slot named by d's digit at that level. When the current
// tick reaches the start of an occupied slot of level k>0, its timers are
// re-filed ("cascaded") into lower levels; level 0 slots fire. Each level keeps
// a uint64 bitmap of occupied slots, so the next slot to visit is found with
// one TrailingZeros per level. The timers of a slot form an intrusive doubly
// linked list threaded through preallocated next/prev index arrays: Arm,
// Rearm and Cancel are O(1) and allocation free.
//
// # Span
//
// The levels cover 2^42 ticks (WheelSpanBits). A deadline outside the top
// level's current rotation is parked in an overflow list, which is re-filed
// each time the current tick crosses a 2^42-tick boundary; such a timer still
// fires at its exact tick, it just costs one extra cascade per 2^42 ticks of
// distance.
//
// # Cost
//
// Advance visits only occupied slots: its work is proportional to the timers
// fired and cascaded, plus a constant per level, however much time passed.
type Wheel struct {
	tick  uint64 // nanoseconds per tick
	start Time
	now   Time   // the latest time given to Advance (or Start)
	cur   uint64 // ticks since start; the tick containing now, except mid-Advance

	// next and prev hold the list links: entries [0, capacity) are timers,
	// entry capacity+l is the sentinel head of list l.
	next, prev []int32
	list       []int16 // list a timer is on, or listFree
	gen        []uint8
	deadline   []uint64 // deadline, in ticks since start
	data       []uint64
	occupied   [wheelLevels]uint64 // bit s of occupied[k]: slot s of level k is non-empty

	capacity  int32
	freeHead  int32 // free timers form a stack linked through next
	armed     int
	advancing bool

	slotVisits uint64 // slots fired or cascaded; tests use it to bound Advance's work
}

// NewWheel returns an empty wheel with room for opts.Timers timers.
func NewWheel(opts WheelOptions) (*Wheel, error) {
	if opts.Tick < 0 {
		return nil, fmt.Errorf("clock: WheelOptions.Tick %v is negative (use a positive resolution such as 10µs, or 0 for the default)", opts.Tick)
	}
	if opts.Tick == 0 {
		opts.Tick = DefaultWheelTick
	}
	if opts.Timers <= 0 || opts.Timers > MaxWheelTimers {
		return nil, fmt.Errorf("clock: WheelOptions.Timers %d is out of range (use 1..%d, the most timers armed at once)", opts.Timers, MaxWheelTimers)
	}
	n := int32(opts.Timers)
	w := &Wheel{
		tick:     uint64(opts.Tick),
		start:    opts.Start,
		now:      opts.Start,
		next:     make([]int32, int(n)+wheelLists),
		prev:     make([]int32, int(n)+wheelLists),
		list:     make([]int16, n),
		gen:      make([]uint8, n),
		deadline: make([]uint64, n),
		data:     make([]uint64, n),
		capacity: n,
	}
	for l := range int32(wheelLists) {
		h := n + l
		w.next[h], w.prev[h] = h, h
	}
	for i := range n {
		w.list[i] = listFree
		w.gen[i] = 1
		w.next[i] = i + 1
	}
	w.next[n-1] = -1
	return w, nil
}

// Arm arms a timer for deadline at, carrying data to the fire callback. A
// deadline at or before the wheel's current tick fires on the next Advance.
// When every timer is armed, Arm returns ErrWheelFull.
func (w *Wheel) Arm(at Time, data uint64) (TimerID, error) {
	i := w.freeHead
	if i < 0 {
		return NoTimer, ErrWheelFull
	}
	w.freeHead = w.next[i]
	w.armed++
	w.deadline[i] = w.deadlineTicks(at)
	w.data[i] = data
	w.file(i, listDue)
	return TimerID(uint32(w.gen[i])<<timerIndexBits | uint32(i)), nil
}

// Rearm moves an armed timer to deadline at, keeping its ID and data. It is
// cheaper than Cancel followed by Arm. It returns ErrNotArmed if id does not
// name an armed timer.
func (w *Wheel) Rearm(id TimerID, at Time) error {
	i, ok := w.lookup(id)
	if !ok {
		return ErrNotArmed
	}
	w.unlink(i)
	w.deadline[i] = w.deadlineTicks(at)
	w.file(i, listDue)
	return nil
}

// Cancel disarms the timer and reports whether it was armed. It returns false
// for a timer that already fired or was cancelled, and for a stale ID.
func (w *Wheel) Cancel(id TimerID) bool {
	i, ok := w.lookup(id)
	if !ok {
		return false
	}
	w.unlink(i)
	w.release(i)
	return true
}

// Advance moves the wheel's time to now and fires every timer whose deadline
// is at or before now, calling fire(id, data) for each; it returns how many
// fired. Timers fire in deadline order at tick granularity; timers sharing a
// tick fire in no particular order, and timers armed with a deadline already
// reached fire first. A now earlier than Now() fires only those already-due
// timers and does not move the wheel's time.
//
// A fired timer's ID is released before fire is called, so fire may Arm
// (possibly reusing the slot under a new generation), Rearm or Cancel other
// timers. A timer fire arms for a tick after the one being fired may fire in
// this same Advance if its deadline is at or before now; one armed for the
// tick being fired or earlier fires on the next Advance, so a callback that
// keeps re-arming itself "now" cannot loop forever. fire must not call Advance.
func (w *Wheel) Advance(now Time, fire func(id TimerID, data uint64)) int {
	if w.advancing {
		panic("clock: Wheel.Advance called from its own fire callback")
	}
	if now > w.now {
		w.now = now
	}
	target := w.floorTicks(w.now)
	dueHead := w.capacity + listDue
	// Still in the tick the last Advance reached, with nothing armed due
	// since: every other timer's tick is later, so nothing can fire. A
	// busy poll loop calls Advance many times a tick; this is most calls.
	if target <= w.cur && w.next[dueHead] == dueHead {
		return 0
	}
	w.advancing = true
	defer func() { w.advancing = false }()

	// Timers armed already due join the current tick's level-0 slot, which
	// the loop below visits first.
	for w.next[dueHead] != dueHead {
		i := w.next[dueHead]
		w.unlink(i)
		w.link(i, int(w.cur&(wheelSlots-1)))
	}

	fired := 0
	for {
		l, at, ok := w.nextEvent()
		if !ok || at > target {
			break
		}
		w.cur = at
		w.slotVisits++
		head := w.capacity + int32(l)
		if l < wheelSlots { // level 0: this slot's deadline is now
			// Callbacks cannot add to this slot: anything they arm is
			// either due (filed on listDue) or for a later tick.
			for w.next[head] != head {
				i := w.next[head]
				w.unlink(i)
				id, data := w.idOf(i), w.data[i]
				w.release(i)
				fired++
				fire(id, data)
			}
			continue
		}
		if l == listOverflow {
			// Far timers may go straight back on the overflow list: re-file
			// from a detached copy so the loop ends.
			scratch := w.capacity + listRefile
			w.spliceAll(head, scratch)
			head = scratch
		}
		for w.next[head] != head {
			i := w.next[head]
			w.unlink(i)
			w.file(i, int(w.cur&(wheelSlots-1)))
		}
	}
	if target > w.cur {
		w.cur = target
	}
	return fired
}

// Len returns the number of armed timers.
func (w *Wheel) Len() int { return w.armed }

// Cap returns the wheel's capacity (WheelOptions.Timers).
func (w *Wheel) Cap() int { return int(w.capacity) }

// Now returns the latest time given to Advance, or WheelOptions.Start.
func (w *Wheel) Now() Time { return w.now }

// Tick returns the wheel's resolution.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tick) }

// NextDeadline returns a time t before which Advance has nothing to do: no
// armed timer's deadline, rounded up to the tick, is earlier than t, and
// Advance(u) for u < t fires nothing. When the earliest timer sits in the
// wheel's finest level, t is exactly its tick; otherwise t is the start of the
// coarser slot holding it, and Advance(t) re-files that slot so that the next
// call comes closer. If a timer is already due, t is Now(). ok is false when
// no timer is armed. A simulation can jump its virtual clock to t instead of
// stepping through idle time.
func (w *Wheel) NextDeadline() (t Time, ok bool) {
	if w.armed == 0 {
		return 0, false
	}
	dueHead := w.capacity + listDue
	if w.next[dueHead] != dueHead {
		return w.now, true
	}
	_, at, ok := w.nextEvent()
	if !ok {
		return 0, false
	}
	t = w.tickTime(at)
	if t < w.now {
		t = w.now
	}
	return t, true
}

// nextEvent finds the first slot Advance must visit and the tick at which it
// falls due. Levels are checked finest first: every occupied slot of level k
// starts after all of level k-1's slots, so the first level with an occupied
// slot at or after the current digit holds the next event.
func (w *Wheel) nextEvent() (list int, at uint64, ok bool) {
	for k := range wheelLevels {
		occ := w.occupied[k]
		if occ == 0 {
			continue
		}
		shift := uint(k * wheelSlotBits)
		digit := (w.cur >> shift) & (wheelSlots - 1)
		occ &= ^uint64(0) << digit
		if occ == 0 {
			continue
		}
		s := uint64(bits.TrailingZeros64(occ))
		rotation := uint64(1)<<(shift+wheelSlotBits) - 1
		return k*wheelSlots + int(s), w.cur&^rotation | s<<shift, true
	}
	head := w.capacity + listOverflow
	if w.next[head] != head {
		const span = uint64(1) << WheelSpanBits
		return listOverflow, w.cur&^(span-1) + span, true
	}
	return 0, 0, false
}

// file puts timer i on the list its deadline calls for, relative to the
// current tick; a deadline already reached goes on list due.
func (w *Wheel) file(i int32, due int) {
	d := w.deadline[i]
	if d <= w.cur {
		w.link(i, due)
		return
	}
	level := (63 - bits.LeadingZeros64(d^w.cur)) / wheelSlotBits
	if level >= wheelLevels {
		w.link(i, listOverflow)
		return
	}
	slot := int(d>>(uint(level)*wheelSlotBits)) & (wheelSlots - 1)
	w.link(i, level*wheelSlots+slot)
}

// link appends timer i to list l.
func (w *Wheel) link(i int32, l int) {
	head := w.capacity + int32(l)
	tail := w.prev[head]
	w.next[tail], w.prev[i] = i, tail
	w.next[i], w.prev[head] = head, i
	w.list[i] = int16(l)
	if l < wheelSlotLists {
		w.occupied[l/wheelSlots] |= 1 << (l % wheelSlots)
	}
}

// spliceAll moves every timer of the list headed by from onto the empty list
// headed by to, in O(1). The moved timers keep their old list label, so this is
// only for lists without an occupancy bit, emptied again before anyone else
// can unlink from them.
func (w *Wheel) spliceAll(from, to int32) {
	first, last := w.next[from], w.prev[from]
	if first == from {
		return
	}
	w.next[to], w.prev[to] = first, last
	w.prev[first], w.next[last] = to, to
	w.next[from], w.prev[from] = from, from
}

// unlink takes timer i off its list.
func (w *Wheel) unlink(i int32) {
	l := int(w.list[i])
	n, p := w.next[i], w.prev[i]
	w.next[p], w.prev[n] = n, p
	if l < wheelSlotLists {
		head := w.capacity + int32(l)
		if w.next[head] == head {
			w.occupied[l/wheelSlots] &^= 1 << (l % wheelSlots)
		}
	}
}

// release returns an unlinked timer to the free stack under a new generation.
func (w *Wheel) release(i int32) {
	w.list[i] = listFree
	g := w.gen[i] + 1
	if g == 0 { // generation 0 is skipped so that no ID is ever NoTimer
		g = 1
	}
	w.gen[i] = g
	w.next[i] = w.freeHead
	w.freeHead = i
	w.armed--
}

func (w *Wheel) idOf(i int32) TimerID {
	return TimerID(uint32(w.gen[i])<<timerIndexBits | uint32(i))
}

func (w *Wheel) lookup(id TimerID) (int32, bool) {
	i := int32(id & timerIndexMask)
	if i >= w.capacity || w.list[i] == listFree || w.gen[i] != uint8(id>>timerIndexBits) {
		return 0, false
	}
	return i, true
}

// deadlineTicks converts a deadline to ticks since start, rounding up so that
// a timer never fires before its deadline.
func (w *Wheel) deadlineTicks(at Time) uint64 {
	if at <= w.start {
		return 0
	}
	ns := uint64(at) - uint64(w.start) // exact even when at-start overflows int64
	q := ns / w.tick
	if ns-q*w.tick != 0 {
		q++
	}
	return q
}

// floorTicks converts a time at or after start to the tick containing it.
func (w *Wheel) floorTicks(t Time) uint64 {
	if t <= w.start {
		return 0
	}
	return (uint64(t) - uint64(w.start)) / w.tick
}

// tickTime converts ticks since start back to a Time, saturating at the
// largest Time for ticks too far out to represent.
func (w *Wheel) tickTime(ticks uint64) Time {
	hi, ns := bits.Mul64(ticks, w.tick)
	if hi != 0 || ns > math.MaxInt64 {
		return math.MaxInt64
	}
	t := w.start + Time(ns)
	if t < w.start {
		return math.MaxInt64
	}
	return t
}
