package sched

import (
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/core/clock"
)

// Class selects one of a flow's two queues. See the package documentation
// for which transactions go in which class and why ClassData goes first.
type Class uint8

const (
	// ClassData holds grants, pull data and solicited data (data window).
	// It is served before ClassRequest within a flow.
	ClassData Class = 0
	// ClassRequest holds new requests and unsolicited data (request window).
	ClassRequest Class = 1

	numClasses = 2
)

// String returns "data" or "request".
func (c Class) String() string {
	switch c {
	case ClassData:
		return "data"
	case ClassRequest:
		return "request"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Limits on Options and arguments.
const (
	// DefaultQuantum is the per-turn credit in bytes at weight 1 when
	// Options.Quantum is 0: large enough for a 4 KiB MTU frame in one turn.
	DefaultQuantum = 4096
	// MaxQuantum bounds Options.Quantum.
	MaxQuantum = 1 << 30
	// MaxWeight bounds SetWeight's weight.
	MaxWeight = 1 << 16
	// MaxFlows bounds Options.Flows (flow indexes are stored in 32 bits).
	MaxFlows = 1 << 24
	// MaxItems bounds Options.Items (slot indexes are 32 bits with one
	// value reserved for "none").
	MaxItems = 1 << 31
	// MaxItemBytes bounds the size given with an item.
	MaxItemBytes = 1 << 30
)

// Sentinel errors; test with errors.Is.
var (
	// ErrFull: Enqueue or Requeue found all Options.Items slots in use. The
	// scheduler is unchanged and the caller still holds the item.
	ErrFull = errors.New("sched: item store full")
	// ErrInvalid: an option or argument is out of range; the wrapping error
	// names it and says how to fix it.
	ErrInvalid = errors.New("sched: invalid argument")
)

// Options configures a Scheduler. Flows and Items are required.
type Options struct {
	// Flows is the number of flows (connections); flow indexes are
	// [0, Flows). 1 ≤ Flows ≤ MaxFlows.
	Flows int
	// Items is the number of queue slots shared by all flows and classes:
	// the most items that can be queued at once. 1 ≤ Items ≤ MaxItems.
	Items int
	// Quantum is the credit in bytes a flow of weight 1 earns per turn.
	// 0 selects DefaultQuantum. Ignored with RoundRobin.
	Quantum int
	// RoundRobin makes every item cost 1 regardless of its size, so a flow
	// of weight w sends w items per turn.
	RoundRobin bool
}

// Stats are cumulative counters since New.
type Stats struct {
	Enqueued uint64 // items accepted by Enqueue
	Requeued uint64 // items accepted by Requeue
	Dequeued uint64 // items returned by Next
	Dropped  uint64 // items removed by Drop or Reset
	Full     uint64 // Enqueue and Requeue calls refused with ErrFull
	// BlockedSkips counts Next calls that returned nothing although items
	// were queued in blocked classes of unpaced flows.
	BlockedSkips uint64
	// PacedSkips counts Next calls that returned nothing although paced
	// flows had items queued.
	PacedSkips uint64
}

const (
	noSlot = ^uint32(0)
	noFlow = int32(-1)

	flagBlockedData    = 1 << ClassData
	flagBlockedRequest = 1 << ClassRequest
	flagActive         = 1 << 2 // on the active list
	flagInTurn         = 1 << 3 // has earned this turn's quantum
)

// slot is one queued item. cost is its size in bytes, or 1 under
// RoundRobin, so the pick loop has one rule for both modes.
type slot struct {
	item uint32
	cost uint32
	next uint32
}

type fifo struct {
	head, tail uint32
	n          uint32
}

type flowState struct {
	q         [numClasses]fifo
	deficit   int64 // credit left in this turn (bytes, or items under RoundRobin)
	quantum   int64 // credit earned per turn: unit quantum × weight
	paceUntil clock.Time
	prev      int32 // active list links
	next      int32
	heapPos   int32 // index in Scheduler.paced, -1 when not paced
	flags     uint8
}

func (f *flowState) sendable(c Class) bool {
	return f.q[c].n != 0 && f.flags&(1<<c) == 0
}

func (f *flowState) eligible() bool {
	return f.heapPos < 0 && (f.sendable(ClassData) || f.sendable(ClassRequest))
}

func (f *flowState) items() int { return int(f.q[ClassData].n + f.q[ClassRequest].n) }

// Scheduler orders queued items across flows. Create it with New; it
// belongs to one goroutine.
type Scheduler struct {
	slots    []slot
	freeSlot uint32
	flows    []flowState
	// paced is a binary min-heap of flow indexes ordered by (paceUntil,
	// flow index), so that equal deadlines re-admit in a fixed order.
	paced      []int32
	activeHead int32
	activeTail int32

	queued      int // items queued in all flows
	pacedItems  int // of which in paced flows
	unitQuantum int64
	roundRobin  bool
	stats       Stats
}

// New validates opts and allocates everything the scheduler will ever use.
func New(opts Options) (*Scheduler, error) {
	if opts.Flows < 1 || opts.Flows > MaxFlows {
		return nil, fmt.Errorf("sched: Flows %d must be in [1, %d] (set Options.Flows to the number of connections): %w",
			opts.Flows, MaxFlows, ErrInvalid)
	}
	if opts.Items < 1 || opts.Items > MaxItems {
		return nil, fmt.Errorf("sched: Items %d must be in [1, %d] (set Options.Items to the most items queued at once): %w",
			opts.Items, MaxItems, ErrInvalid)
	}
	if opts.Quantum < 0 || opts.Quantum > MaxQuantum {
		return nil, fmt.Errorf("sched: Quantum %d must be in [0, %d] (0 selects %d bytes): %w",
			opts.Quantum, MaxQuantum, DefaultQuantum, ErrInvalid)
	}
	s := &Scheduler{
		slots:       make([]slot, opts.Items),
		flows:       make([]flowState, opts.Flows),
		paced:       make([]int32, 0, opts.Flows),
		activeHead:  noFlow,
		activeTail:  noFlow,
		unitQuantum: int64(opts.Quantum),
		roundRobin:  opts.RoundRobin,
	}
	if s.unitQuantum == 0 {
		s.unitQuantum = DefaultQuantum
	}
	if s.roundRobin {
		s.unitQuantum = 1
	}
	for i := range s.slots {
		s.slots[i].next = uint32(i + 1)
	}
	s.slots[len(s.slots)-1].next = noSlot
	for i := range s.flows {
		s.flows[i] = flowState{
			q:       [numClasses]fifo{{noSlot, noSlot, 0}, {noSlot, noSlot, 0}},
			quantum: s.unitQuantum,
			prev:    noFlow,
			next:    noFlow,
			heapPos: -1,
		}
	}
	return s, nil
}

// Len returns the number of items queued in all flows.
func (s *Scheduler) Len() int { return s.queued }

// Cap returns Options.Items, the most items that can be queued at once.
func (s *Scheduler) Cap() int { return len(s.slots) }

// Flows returns Options.Flows.
func (s *Scheduler) Flows() int { return len(s.flows) }

// FlowLen returns the number of items queued in one class of one flow.
func (s *Scheduler) FlowLen(flow int, c Class) int {
	return int(s.flow(flow).q[checkClass(c)].n)
}

// Stats returns the cumulative counters.
func (s *Scheduler) Stats() Stats { return s.stats }

// Weight returns the flow's weight (1 unless SetWeight changed it).
func (s *Scheduler) Weight(flow int) int { return int(s.flow(flow).quantum / s.unitQuantum) }

// SetWeight sets the flow's share: per turn it earns Quantum × w bytes
// (w items under RoundRobin). It takes effect from the flow's next turn.
func (s *Scheduler) SetWeight(flow int, w int) error {
	if uint(flow) >= uint(len(s.flows)) {
		return s.errFlow(flow)
	}
	if w < 1 || w > MaxWeight {
		return fmt.Errorf("sched: weight %d for flow %d must be in [1, %d]: %w", w, flow, MaxWeight, ErrInvalid)
	}
	s.flows[flow].quantum = s.unitQuantum * int64(w)
	return nil
}

// Enqueue appends item to the tail of the flow's class queue. bytes is the
// size the item will occupy on the wire, 1 ≤ bytes ≤ MaxItemBytes; it is
// what the flow is charged when the item is sent. When all slots are in use
// it returns ErrFull and changes nothing.
func (s *Scheduler) Enqueue(flow int, c Class, item uint32, bytes int) error {
	if err := s.checkArgs(flow, c, bytes); err != nil {
		return err
	}
	n, ok := s.takeSlot(item, bytes)
	if !ok {
		return ErrFull
	}
	f := &s.flows[flow]
	q := &f.q[c]
	if q.n == 0 {
		q.head = n
	} else {
		s.slots[q.tail].next = n
	}
	q.tail = n
	q.n++
	s.noteAdded(f)
	s.stats.Enqueued++
	if f.flags&flagActive == 0 && f.eligible() {
		s.linkTail(int32(flow))
	}
	return nil
}

// Requeue puts back an item that Next returned and the caller could not
// send (the TX ring was full, no buffer was free): the item goes to the head
// of its class queue, its cost is credited back to the flow, and the flow
// moves to the front of the round, so the next Next returns it again and the
// failed attempt costs the flow nothing. Give back several items in the
// reverse of the order Next returned them. When the class is blocked or the
// flow is paced the item only goes to the head of its queue. Requeue returns
// ErrFull, changing nothing, only if items were enqueued since the Next.
func (s *Scheduler) Requeue(flow int, c Class, item uint32, bytes int) error {
	if err := s.checkArgs(flow, c, bytes); err != nil {
		return err
	}
	n, ok := s.takeSlot(item, bytes)
	if !ok {
		return ErrFull
	}
	f := &s.flows[flow]
	q := &f.q[c]
	if q.n == 0 {
		q.tail = n
	}
	s.slots[n].next = q.head
	q.head = n
	q.n++
	s.noteAdded(f)
	s.stats.Requeued++
	if f.heapPos < 0 && f.sendable(c) {
		if f.flags&flagActive != 0 {
			s.unlink(int32(flow))
		}
		s.linkHead(int32(flow))
		// The credit belongs to the turn the item was picked in, which
		// continues now; a fresh quantum on top would be a free turn.
		f.flags |= flagInTurn
		f.deficit += int64(s.slots[n].cost)
	}
	return nil
}

// Next removes and returns the item that should be sent now: the head of the
// flow whose turn it is, ClassData before ClassRequest. Flows whose pacing
// time is at or before now rejoin the round first. ok is false when no item
// is sendable (nothing queued, or everything queued is blocked or paced);
// then flow is -1.
func (s *Scheduler) Next(now clock.Time) (flow int, c Class, item uint32, ok bool) {
	fi, c, ok := s.pick(now)
	if !ok {
		return -1, 0, 0, false
	}
	f := &s.flows[fi]
	q := &f.q[c]
	n := q.head
	sl := s.slots[n]
	q.head = sl.next
	q.n--
	if q.n == 0 {
		q.tail = noSlot
	}
	s.slots[n].next = s.freeSlot
	s.freeSlot = n
	s.queued--
	s.stats.Dequeued++
	f.deficit -= int64(sl.cost)
	if q.n == 0 && !f.eligible() {
		s.deactivate(fi)
	}
	return int(fi), c, sl.item, true
}

// Peek returns what Next(now) would return without removing it; a Next
// with the same now right after returns the same item. Peek may advance the
// round (re-admit paced flows, end turns), exactly as Next would.
func (s *Scheduler) Peek(now clock.Time) (flow int, c Class, item uint32, ok bool) {
	fi, c, ok := s.pick(now)
	if !ok {
		return -1, 0, 0, false
	}
	return int(fi), c, s.slots[s.flows[fi].q[c].head].item, true
}

// pick advances the round until the flow at the head of the active list
// can afford its head item, and returns that flow and class. It leaves the
// choice in place, so calling it again returns the same answer.
func (s *Scheduler) pick(now clock.Time) (int32, Class, bool) {
	if len(s.paced) > 0 && s.flows[s.paced[0]].paceUntil <= now {
		s.admit(now)
	}
	for {
		fi := s.activeHead
		if fi == noFlow {
			s.countSkip()
			return noFlow, 0, false
		}
		f := &s.flows[fi]
		c := ClassData
		if !f.sendable(ClassData) {
			c = ClassRequest
		}
		if f.flags&flagInTurn == 0 {
			f.deficit += f.quantum
			f.flags |= flagInTurn
		}
		cost := int64(s.slots[f.q[c].head].cost)
		if cost <= f.deficit {
			return fi, c, true
		}
		if s.activeTail == fi {
			// Alone in the round: the turns it would go around for on its
			// own, granted at once.
			turns := (cost - f.deficit + f.quantum - 1) / f.quantum
			f.deficit += turns * f.quantum
			return fi, c, true
		}
		f.flags &^= flagInTurn
		s.unlink(fi)
		s.linkTail(fi)
	}
}

func (s *Scheduler) countSkip() {
	if s.queued == 0 {
		return
	}
	if s.pacedItems > 0 {
		s.stats.PacedSkips++
	}
	if s.queued > s.pacedItems {
		s.stats.BlockedSkips++
	}
}

// SetBlocked blocks or unblocks one class of a flow. A blocked class keeps
// its items in order but is not served; if no other class of the flow is
// sendable the flow leaves the round and forfeits its credit. When
// unblocked, a flow that was out of the round rejoins at its tail.
func (s *Scheduler) SetBlocked(flow int, c Class, blocked bool) {
	f := s.flow(flow)
	bit := uint8(1) << checkClass(c)
	if blocked == (f.flags&bit != 0) {
		return
	}
	if blocked {
		f.flags |= bit
		if f.flags&flagActive != 0 && !f.eligible() {
			s.deactivate(int32(flow))
		}
		return
	}
	f.flags &^= bit
	if f.flags&flagActive == 0 && f.eligible() {
		s.linkTail(int32(flow))
	}
}

// Blocked reports whether one class of a flow is blocked.
func (s *Scheduler) Blocked(flow int, c Class) bool {
	return s.flow(flow).flags&(1<<checkClass(c)) != 0
}

// PaceUntil takes the flow out of the round until t: the first Next(now)
// with now ≥ t puts it back at the tail of the round. The flow forfeits its
// credit. Calling it again for a paced flow replaces the time, earlier or
// later. Items may still be enqueued meanwhile.
func (s *Scheduler) PaceUntil(flow int, t clock.Time) {
	f := s.flow(flow)
	f.paceUntil = t
	if f.heapPos >= 0 {
		s.heapFix(int(f.heapPos))
		return
	}
	if f.flags&flagActive != 0 {
		s.deactivate(int32(flow))
	}
	s.pacedItems += f.items()
	s.heapPush(int32(flow))
}

// Unpace ends the flow's pacing now instead of at its time; a flow with
// sendable items rejoins at the tail of the round. It does nothing to a
// flow that is not paced.
func (s *Scheduler) Unpace(flow int) {
	f := s.flow(flow)
	if f.heapPos < 0 {
		return
	}
	s.heapRemove(int(f.heapPos))
	s.afterUnpace(int32(flow))
}

// Paced returns the time the flow is paced until, and false if it is not
// paced.
func (s *Scheduler) Paced(flow int) (clock.Time, bool) {
	f := s.flow(flow)
	return f.paceUntil, f.heapPos >= 0
}

// NextDeadline returns the earliest time at which a paced flow rejoins the
// round, and false if no flow is paced. A poll loop with nothing else to do
// may sleep until then. The flow may have nothing queued by then; waking for
// it costs one empty Next.
func (s *Scheduler) NextDeadline() (clock.Time, bool) {
	if len(s.paced) == 0 {
		return 0, false
	}
	return s.flows[s.paced[0]].paceUntil, true
}

// Drop removes every item of the flow, ClassData first then ClassRequest,
// each in queue order, calling fn (if not nil) with each so the caller can
// release the context; it returns how many it removed. The flow's weight,
// blocks and pacing stay as they are (see Reset). fn runs after the flow is
// emptied and may call the scheduler, including Enqueue on the same flow.
func (s *Scheduler) Drop(flow int, fn func(c Class, item uint32)) int {
	f := s.flow(flow)
	if f.flags&flagActive != 0 {
		s.deactivate(int32(flow))
	}
	heads := [numClasses]uint32{f.q[ClassData].head, f.q[ClassRequest].head}
	total := f.items()
	f.q = [numClasses]fifo{{noSlot, noSlot, 0}, {noSlot, noSlot, 0}}
	s.queued -= total
	if f.heapPos >= 0 {
		s.pacedItems -= total
	}
	s.stats.Dropped += uint64(total)
	for c := range Class(numClasses) {
		for n := heads[c]; n != noSlot; {
			sl := s.slots[n]
			s.slots[n].next = s.freeSlot
			s.freeSlot = n
			if fn != nil {
				fn(c, sl.item)
			}
			n = sl.next
		}
	}
	return total
}

// Reset returns the flow to its state after New: Drop(flow, fn), then
// weight 1, both classes unblocked, not paced. Use it when a flow index is
// reused for a new connection.
func (s *Scheduler) Reset(flow int, fn func(c Class, item uint32)) int {
	n := s.Drop(flow, fn)
	f := &s.flows[flow]
	// fn may have queued items again; clear gating and pacing, then make
	// the flow's list membership match.
	f.flags &^= flagBlockedData | flagBlockedRequest
	f.quantum = s.unitQuantum
	if f.heapPos >= 0 {
		s.heapRemove(int(f.heapPos))
		s.afterUnpace(int32(flow))
	} else if f.flags&flagActive == 0 && f.eligible() {
		s.linkTail(int32(flow))
	}
	return n
}

// admit re-admits every paced flow whose time is at or before now, earliest
// first.
func (s *Scheduler) admit(now clock.Time) {
	for len(s.paced) > 0 {
		fi := s.paced[0]
		if s.flows[fi].paceUntil > now {
			return
		}
		s.heapRemove(0)
		s.afterUnpace(fi)
	}
}

func (s *Scheduler) afterUnpace(fi int32) {
	f := &s.flows[fi]
	s.pacedItems -= f.items()
	if f.eligible() {
		s.linkTail(fi)
	}
}

func (s *Scheduler) takeSlot(item uint32, bytes int) (uint32, bool) {
	n := s.freeSlot
	if n == noSlot {
		s.stats.Full++
		return noSlot, false
	}
	cost := uint32(bytes)
	if s.roundRobin {
		cost = 1
	}
	s.freeSlot = s.slots[n].next
	s.slots[n] = slot{item: item, cost: cost, next: noSlot}
	return n, true
}

func (s *Scheduler) noteAdded(f *flowState) {
	s.queued++
	if f.heapPos >= 0 {
		s.pacedItems++
	}
}

// deactivate takes a flow off the active list; it forfeits its credit.
func (s *Scheduler) deactivate(fi int32) {
	s.unlink(fi)
	f := &s.flows[fi]
	f.deficit = 0
	f.flags &^= flagInTurn
}

func (s *Scheduler) linkTail(fi int32) {
	f := &s.flows[fi]
	f.flags |= flagActive
	f.next = noFlow
	f.prev = s.activeTail
	if s.activeTail == noFlow {
		s.activeHead = fi
	} else {
		s.flows[s.activeTail].next = fi
	}
	s.activeTail = fi
}

func (s *Scheduler) linkHead(fi int32) {
	f := &s.flows[fi]
	f.flags |= flagActive
	f.prev = noFlow
	f.next = s.activeHead
	if s.activeHead == noFlow {
		s.activeTail = fi
	} else {
		s.flows[s.activeHead].prev = fi
	}
	s.activeHead = fi
}

func (s *Scheduler) unlink(fi int32) {
	f := &s.flows[fi]
	if f.prev == noFlow {
		s.activeHead = f.next
	} else {
		s.flows[f.prev].next = f.next
	}
	if f.next == noFlow {
		s.activeTail = f.prev
	} else {
		s.flows[f.next].prev = f.prev
	}
	f.prev, f.next = noFlow, noFlow
	f.flags &^= flagActive
}

func (s *Scheduler) heapLess(i, j int) bool {
	a, b := s.paced[i], s.paced[j]
	ta, tb := s.flows[a].paceUntil, s.flows[b].paceUntil
	return ta < tb || (ta == tb && a < b)
}

func (s *Scheduler) heapSwap(i, j int) {
	h := s.paced
	h[i], h[j] = h[j], h[i]
	s.flows[h[i]].heapPos = int32(i)
	s.flows[h[j]].heapPos = int32(j)
}

func (s *Scheduler) heapUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.heapLess(i, p) {
			return
		}
		s.heapSwap(i, p)
		i = p
	}
}

func (s *Scheduler) heapDown(i int) bool {
	moved := false
	for {
		l := 2*i + 1
		if l >= len(s.paced) {
			return moved
		}
		m := l
		if r := l + 1; r < len(s.paced) && s.heapLess(r, l) {
			m = r
		}
		if !s.heapLess(m, i) {
			return moved
		}
		s.heapSwap(i, m)
		i, moved = m, true
	}
}

func (s *Scheduler) heapFix(i int) {
	if !s.heapDown(i) {
		s.heapUp(i)
	}
}

func (s *Scheduler) heapPush(fi int32) {
	// Capacity is Flows and a flow is in the heap at most once, so this
	// append never grows the slice.
	s.paced = append(s.paced, fi)
	i := len(s.paced) - 1
	s.flows[fi].heapPos = int32(i)
	s.heapUp(i)
}

func (s *Scheduler) heapRemove(i int) {
	last := len(s.paced) - 1
	fi := s.paced[i]
	if i != last {
		s.heapSwap(i, last)
	}
	s.paced = s.paced[:last]
	s.flows[fi].heapPos = -1
	if i != last {
		s.heapFix(i)
	}
}

func (s *Scheduler) flow(flow int) *flowState {
	if uint(flow) >= uint(len(s.flows)) {
		panic(s.errFlow(flow))
	}
	return &s.flows[flow]
}

func checkClass(c Class) Class {
	if c >= numClasses {
		panic(errClass(c))
	}
	return c
}

func (s *Scheduler) checkArgs(flow int, c Class, bytes int) error {
	if uint(flow) >= uint(len(s.flows)) {
		return s.errFlow(flow)
	}
	if c >= numClasses {
		return errClass(c)
	}
	if bytes < 1 || bytes > MaxItemBytes {
		return fmt.Errorf("sched: item size %d bytes must be in [1, %d] (pass the item's wire size): %w",
			bytes, MaxItemBytes, ErrInvalid)
	}
	return nil
}

func (s *Scheduler) errFlow(flow int) error {
	return fmt.Errorf("sched: flow %d out of range [0, %d) (raise Options.Flows): %w", flow, len(s.flows), ErrInvalid)
}

func errClass(c Class) error {
	return fmt.Errorf("sched: class %d is neither ClassData nor ClassRequest: %w", uint8(c), ErrInvalid)
}
