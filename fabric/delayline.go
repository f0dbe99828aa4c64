package fabric

import (
	"math/bits"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// heldFrame is a frame waiting for its release time. seq numbers the frames
// of a direction in the order they were admitted; it breaks ties between
// equal release times, so frames due at the same instant leave in arrival
// order and the output is a pure function of the input.
type heldFrame struct {
	at  clock.Time
	seq uint64
	h   mbuf.Handle
}

// before orders frames by (release time, admission order).
func (f *heldFrame) before(g *heldFrame) bool {
	return f.at < g.at || f.at == g.at && f.seq < g.seq
}

// delayLine holds up to limit frames until their release times and hands
// them out in (release time, admission order) order.
//
// Most frames arrive in release order on their path (a constant delay per
// path; OrderFIFO clamps jitter to keep it so), so each path keeps a FIFO
// list, O(1) per frame. A frame that would go before its path's tail (jitter
// under OrderFree, or a reordered frame) goes to a binary heap instead. The
// next frame out is the least of the path heads and the heap's top. All
// storage is allocated by newDelayLine: the FIFO lists are threaded through
// one slot array shared by the paths, and the heap has room for limit
// frames, so nothing is allocated per frame.
type delayLine struct {
	slots    []heldFrame
	next     []int32 // FIFO link of each slot, or the free list's
	free     int32   // head of the free slot list, -1 when empty
	head     []int32 // per path: oldest slot, -1 when empty
	tail     []int32 // per path: newest slot
	nonEmpty uint64  // bit p set: path p's list is not empty
	heap     []heldFrame
	n, limit int
}

// newDelayLine makes a line for limit frames and up to MaxPaths paths (a
// profile changed at run time may add paths).
func newDelayLine(limit int) *delayLine {
	return newDelayLineCap(limit, limit)
}

// newDelayLineCap makes a line that refuses frames past limit (full) but
// has room for capacity >= limit of them.
func newDelayLineCap(limit, capacity int) *delayLine {
	d := &delayLine{
		slots: make([]heldFrame, capacity),
		next:  make([]int32, capacity),
		head:  make([]int32, MaxPaths),
		tail:  make([]int32, MaxPaths),
		heap:  make([]heldFrame, 0, capacity),
		limit: limit,
	}
	d.reset()
	return d
}

// resize returns a line of a new limit holding d's frames, in the same
// (release time, admission order) order. When d holds more than limit
// frames the new line has room for all of them and is full until enough
// leave.
func (d *delayLine) resize(limit int) *delayLine {
	nd := newDelayLineCap(limit, max(limit, d.n))
	for {
		f, from, ok := d.peek()
		if !ok {
			break
		}
		g := *f
		d.pop(from)
		// Frames leave in order, so the heap takes them as a sorted run.
		nd.n++
		nd.heapPush(g)
	}
	return nd
}

// reset forgets every frame (the caller has freed them).
func (d *delayLine) reset() {
	for i := range d.next {
		d.next[i] = int32(i + 1)
	}
	d.next[len(d.next)-1] = -1
	d.free = 0
	for p := range d.head {
		d.head[p], d.tail[p] = -1, -1
	}
	d.nonEmpty = 0
	d.heap = d.heap[:0]
	d.n = 0
}

func (d *delayLine) len() int   { return d.n }
func (d *delayLine) full() bool { return d.n >= d.limit }

// push adds a frame; the caller has checked full. fifo false sends it to
// the heap even when it would fit its path's list (reordered frames: they
// must not hold up the frames behind them).
func (d *delayLine) push(f heldFrame, path int, fifo bool) {
	d.n++
	if fifo {
		t := d.tail[path]
		if t < 0 || !f.before(&d.slots[t]) {
			s := d.free
			d.free = d.next[s]
			d.slots[s] = f
			d.next[s] = -1
			if t < 0 {
				d.head[path] = s
				d.nonEmpty |= 1 << uint(path)
			} else {
				d.next[t] = s
			}
			d.tail[path] = s
			return
		}
	}
	d.heapPush(f)
}

// peek returns the next frame out and where it is: a path index, or -1 for
// the heap. ok is false when the line is empty.
func (d *delayLine) peek() (f *heldFrame, from int, ok bool) {
	from = -1
	if len(d.heap) > 0 {
		f = &d.heap[0]
	}
	for m := d.nonEmpty; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		g := &d.slots[d.head[p]]
		if f == nil || g.before(f) {
			f, from = g, p
		}
	}
	return f, from, f != nil
}

// pop removes the frame peek found at from and returns its handle.
func (d *delayLine) pop(from int) mbuf.Handle {
	d.n--
	if from < 0 {
		return d.heapPop()
	}
	s := d.head[from]
	h := d.slots[s].h
	d.head[from] = d.next[s]
	if d.head[from] < 0 {
		d.tail[from] = -1
		d.nonEmpty &^= 1 << uint(from)
	}
	d.next[s] = d.free
	d.free = s
	return h
}

func (d *delayLine) heapPush(f heldFrame) {
	h := append(d.heap, f)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].before(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	d.heap = h
}

func (d *delayLine) heapPop() mbuf.Handle {
	h := d.heap
	top := h[0].h
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		least := l
		if r := l + 1; r < len(h) && h[r].before(&h[l]) {
			least = r
		}
		if !h[least].before(&h[i]) {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	d.heap = h
	return top
}
