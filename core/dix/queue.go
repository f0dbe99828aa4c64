package dix

import "fmt"

// Window is the sender's view of one connection's Sends: the next number
// to assign and the base (the oldest not yet acknowledged, or not yet
// known to be aborted at the receiver). Done marks any number in the
// window, in any order; the base advances over the done ones.
type Window struct {
	base, next uint32
	limit      uint32
	done       []uint64 // bit per number, ring of len(done)*64 ≥ limit
	dmask      uint32
}

// NewWindow returns a window that allows limit numbers outstanding
// (1..MaxOutstanding), starting at start.
func NewWindow(limit int, start uint32) (*Window, error) {
	if limit < 1 || limit > MaxOutstanding {
		return nil, fmt.Errorf("%w: window %d outside 1..%d", ErrConfig, limit, MaxOutstanding)
	}
	n := 1
	for n*64 < limit {
		n <<= 1
	}
	return &Window{base: start, next: start, limit: uint32(limit), done: make([]uint64, n), dmask: uint32(n*64 - 1)}, nil
}

// Reset empties the window and restarts it at start with limit (at most
// the limit it was made with).
func (w *Window) Reset(limit int, start uint32) {
	clear(w.done)
	w.base, w.next = start, start
	w.limit = min(uint32(limit), uint32(len(w.done)*64))
}

// Cap returns the largest limit Reset accepts.
func (w *Window) Cap() int { return len(w.done) * 64 }

// Base returns the oldest number not done.
func (w *Window) Base() uint32 { return w.base }

// Next returns the next number to assign.
func (w *Window) Next() uint32 { return w.next }

// Outstanding returns how many numbers are assigned and not done.
func (w *Window) Outstanding() int { return int(w.next - w.base) }

// Room reports whether a number can be assigned.
func (w *Window) Room() bool { return w.next-w.base < w.limit }

// Take assigns the next number; ok is false when the window is full.
func (w *Window) Take() (k uint32, ok bool) {
	if !w.Room() {
		return 0, false
	}
	k = w.next
	w.next++
	return k, true
}

// Done marks number k done and advances the base over every done number.
// It ignores a number outside [base, next) (already done, or never
// assigned).
func (w *Window) Done(k uint32) {
	if !seqLT(k, w.next) || seqLT(k, w.base) {
		return
	}
	i := k & w.dmask
	w.done[i>>6] |= 1 << (i & 63)
	for w.base != w.next {
		j := w.base & w.dmask
		if w.done[j>>6]&(1<<(j&63)) == 0 {
			break
		}
		w.done[j>>6] &^= 1 << (j & 63)
		w.base++
	}
}

// Slot states of a Queue.
const (
	slotFree    uint8 = iota // not posted, not marked
	slotPosted               // posted, no transaction bound to it yet
	slotDirect               // bound to the expected transaction
	slotElement              // bound through an element (out of order)
	slotDone                 // completed (or failed); freed when the head passes
	slotAborted              // the sender gave up before it was posted: consumed when posted
)

// Verdict is what Queue.Arrive decided for a packet of Send k.
type Verdict uint8

const (
	// Placed: the transaction is bound to WQE k already; place the packet.
	Placed Verdict = iota
	// BoundDirect: k is the expected transaction; it is now bound to WQE
	// k directly. Place the packet.
	BoundDirect
	// BoundElement: k arrived out of order; an element binds it to WQE k.
	// Place the packet.
	BoundElement
	// Hold: in-order mode only: WQE k waits for the transactions before
	// it; the caller holds the packet outside the WQEs.
	Hold
	// NotPosted: WQE k is not posted yet: refuse for now (RNR).
	NotPosted
	// Stale: WQE k was consumed already (completed or aborted), or the
	// index is forged: drop and count.
	Stale
	// Beyond: k lies beyond the queue (more than Depth past the oldest
	// WQE): it cannot be posted now; refuse for now and count.
	Beyond
	// Full: the element table is full: refuse for now (backpressure).
	Full
)

var verdictNames = [...]string{"placed", "bound-direct", "bound-element", "hold", "not-posted", "stale", "beyond", "full"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Queue is the receiver's bookkeeping of one connection's receive queue:
// which WQE numbers are posted (below Posted), the head (the oldest WQE
// neither completed nor aborted), the consumer pointer (the transaction
// expected next, which jumps past the highest number bound), and the
// special receive queue elements (transactions bound out of order). The
// WQEs' buffers are the caller's: Queue only numbers them, slot
// k mod Depth holding number k.
type Queue struct {
	mask                uint32
	posted, head, cons  uint32
	state               []uint8
	elems, maxElems     int
	peak                int
	direct, viaElements uint64
}

// NewQueue returns a queue of depth slots (a power of two) whose element
// table holds elements entries, starting at number start.
func NewQueue(depth, elements int, start uint32) (*Queue, error) {
	if depth < 2 || depth&(depth-1) != 0 || depth > 1<<24 {
		return nil, fmt.Errorf("%w: receive queue depth %d must be a power of two from 2 to 2^24", ErrConfig, depth)
	}
	if elements < 0 {
		return nil, fmt.Errorf("%w: element table size %d must not be negative", ErrConfig, elements)
	}
	q := &Queue{mask: uint32(depth - 1), state: make([]uint8, depth), maxElems: elements}
	q.Reset(start)
	return q, nil
}

// Reset empties the queue and restarts its numbers at start.
func (q *Queue) Reset(start uint32) {
	clear(q.state)
	q.posted, q.head, q.cons = start, start, start
	q.elems = 0
}

// Depth returns the number of slots.
func (q *Queue) Depth() int { return len(q.state) }

// Posted returns the next number Post assigns.
func (q *Queue) Posted() uint32 { return q.posted }

// Head returns the oldest number neither completed nor aborted.
func (q *Queue) Head() uint32 { return q.head }

// Consumer returns the consumer pointer: the transaction expected next.
func (q *Queue) Consumer() uint32 {
	if seqLT(q.cons, q.head) {
		return q.head
	}
	return q.cons
}

// Elements returns the elements in use; PeakElements the most at once.
func (q *Queue) Elements() int     { return q.elems }
func (q *Queue) PeakElements() int { return q.peak }

// low is the oldest number that occupies a slot.
func (q *Queue) low() uint32 {
	if seqLT(q.posted, q.head) {
		return q.posted
	}
	return q.head
}

// CanPost reports whether a WQE can be posted now.
func (q *Queue) CanPost() bool { return q.posted-q.low() < uint32(len(q.state)) }

// Pending returns the WQEs posted and not yet completed (nor aborted).
func (q *Queue) Pending() int {
	if seqLT(q.posted, q.head) {
		return 0
	}
	return int(q.posted - q.head)
}

// Post numbers the next posted WQE. aborted says the sender gave up on
// that Send already: the caller completes the WQE at once, in error. ok
// is false when every slot is in use.
func (q *Queue) Post() (k uint32, aborted, ok bool) {
	if !q.CanPost() {
		return 0, false, false
	}
	k = q.posted
	q.posted++
	s := &q.state[k&q.mask]
	if *s == slotAborted {
		*s = slotDone
		if seqLT(k, q.head) {
			*s = slotFree // the head passed its mark already
		}
		q.advance()
		return k, true, true
	}
	*s = slotPosted
	return k, false, true
}

// classify says where number k stands without changing anything.
func (q *Queue) classify(k uint32) (Verdict, uint8) {
	if seqLT(k, q.head) {
		return Stale, 0
	}
	if k-q.low() >= uint32(len(q.state)) {
		return Beyond, 0
	}
	s := q.state[k&q.mask]
	switch {
	case !seqLT(k, q.posted):
		if s == slotAborted {
			return Stale, s
		}
		return NotPosted, s
	case s == slotDirect || s == slotElement:
		return Placed, s
	case s == slotPosted:
		return BoundDirect, s
	}
	return Stale, s
}

// Arrive is the first decision for a packet of Send k. A transaction
// bound already is Placed. Otherwise, with inOrder false (the index),
// the expected one binds directly and any other through a new element
// (Full when none is free); with inOrder true (the baseline) only the
// head binds, and every later posted WQE answers Hold.
func (q *Queue) Arrive(k uint32, inOrder bool) Verdict {
	v, _ := q.classify(k)
	if v != BoundDirect {
		return v
	}
	s := &q.state[k&q.mask]
	if inOrder {
		if k != q.head {
			return Hold
		}
		*s = slotDirect
		q.direct++
		q.cons = k + 1
		return BoundDirect
	}
	if k != q.Consumer() {
		if q.elems >= q.maxElems {
			return Full
		}
		*s = slotElement
		q.elems++
		q.peak = max(q.peak, q.elems)
		q.viaElements++
		if !seqLT(k, q.cons) {
			q.cons = k + 1 // the consumer pointer jumps past the highest bound
		}
		return BoundElement
	}
	*s = slotDirect
	q.direct++
	q.cons = k + 1
	return BoundDirect
}

// Bound reports whether Send k is bound to its WQE (and through an
// element).
func (q *Queue) Bound(k uint32) (bound, element bool) {
	v, s := q.classify(k)
	return v == Placed, s == slotElement
}

// Complete ends WQE k (its transaction placed whole, or failed): its
// element, if any, is removed, and the head moves past every finished
// WQE. It reports false if WQE k is not posted and unfinished.
func (q *Queue) Complete(k uint32) bool {
	if seqLT(k, q.head) || !seqLT(k, q.posted) {
		return false
	}
	s := &q.state[k&q.mask]
	switch *s {
	case slotElement:
		q.elems--
	case slotPosted, slotDirect:
	default:
		return false
	}
	*s = slotDone
	q.advance()
	return true
}

// Abort records that the sender gave up on Send k. A posted WQE is left
// to the caller, who completes it (in error) with Complete: the answer is
// Placed (bound) or BoundDirect (posted, unbound). A WQE not yet posted is
// marked, so Post consumes it at once: the answer is NotPosted. Stale and
// Beyond mean nothing was changed.
func (q *Queue) Abort(k uint32) Verdict {
	v, _ := q.classify(k)
	if v == NotPosted {
		q.state[k&q.mask] = slotAborted
		q.advance()
	}
	return v
}

// advance moves the head past finished numbers: completed WQEs (their
// slots are free again) and aborted ones not yet posted (their marks stay
// until Post consumes them).
func (q *Queue) advance() {
	for {
		if !seqLT(q.head, q.posted) && q.head-q.posted >= uint32(len(q.state)) {
			return // every slot past the posted ones is an abort mark
		}
		s := &q.state[q.head&q.mask]
		switch {
		case *s == slotDone && seqLT(q.head, q.posted):
			*s = slotFree
		case *s == slotAborted && !seqLT(q.head, q.posted):
		default:
			return
		}
		q.head++
	}
}

// Counts returns the transactions bound directly and through elements.
func (q *Queue) Counts() (direct, viaElements uint64) { return q.direct, q.viaElements }
