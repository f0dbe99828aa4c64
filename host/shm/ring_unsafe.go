package shm

import (
	"sync/atomic"
	"unsafe"
)

// Desc is one submission: what the application asks of the appliance. Its
// layout is the wire format of the submit ring (48 bytes, little-endian on
// the machine both sides run on).
type Desc struct {
	Op    uint8
	Flags uint8 // FlagAhead; the appliance ignores bits it does not know
	_     [2]uint8
	Conn  uint32 // the connection's id, as the control socket gave it
	// Buf is the first buffer of the span (OpSend, OpRecv: the span may run
	// on over the following buffers of the pool) or the region's id
	// (OpPush, OpPull: as the control socket gave it).
	Buf uint32
	Off uint32 // offset in the buffer, or in the region
	Len uint32 // bytes from Off
	// Key and Addr name the peer's memory of a push or a pull: its
	// region's key and an offset in it.
	Key    uint32
	Addr   uint64
	Cookie uint64 // the application's, returned in the Comp
	_      uint64
}

// Comp is one completion (16 bytes).
type Comp struct {
	Cookie uint64
	Status uint32
	Len    uint32
}

var (
	_ [descSize - unsafe.Sizeof(Desc{})]byte
	_ [unsafe.Sizeof(Desc{}) - descSize]byte
	_ [compSize - unsafe.Sizeof(Comp{})]byte
	_ [unsafe.Sizeof(Comp{}) - compSize]byte
)

// ring is one SPSC ring in the mapping. The side that owns an index keeps
// its own copy (mine) and publishes it; the other side's index (theirs) is
// only ever read, and clamped.
type ring[T any] struct {
	prod, cons *atomic.Uint64
	slots      []T
	mask       uint64
}

func newRing[T any](mem []byte, off, n int) ring[T] {
	base := unsafe.Pointer(&mem[off])
	return ring[T]{
		prod:  (*atomic.Uint64)(base),
		cons:  (*atomic.Uint64)(unsafe.Add(base, line)),
		slots: unsafe.Slice((*T)(unsafe.Add(base, 2*line)), n),
		mask:  uint64(n - 1),
	}
}

// Producer is the producing end of a ring.
type Producer[T any] struct {
	r    ring[T]
	head uint64 // mine: what I published
}

// Consumer is the consuming end of a ring.
type Consumer[T any] struct {
	r    ring[T]
	tail uint64 // mine: what I consumed
}

// Enqueue copies as many of src as fit and publishes them; it returns how
// many, and bad when the consumer's published index was impossible (ahead
// of the producer, or more than a ring behind), in which case the ring is
// treated as full.
func (p *Producer[T]) Enqueue(src []T) (n int, bad bool) {
	cons := p.r.cons.Load()
	used := p.head - cons
	size := uint64(len(p.r.slots))
	if used > size {
		return 0, true
	}
	free := size - used
	if uint64(len(src)) < free {
		free = uint64(len(src))
	}
	for i := uint64(0); i < free; i++ {
		p.r.slots[(p.head+i)&p.r.mask] = src[i]
	}
	p.head += free
	p.r.prod.Store(p.head)
	return int(free), false
}

// Published counts the items the producer has published, ever.
func (p *Producer[T]) Published() uint64 { return p.head }

// Consumed reports whether the consumer has taken the first n items
// published (by the index it publishes).
func (p *Producer[T]) Consumed(n uint64) bool { return p.r.cons.Load() >= n }

// Free returns how many descriptors Enqueue would take now (0 when the
// consumer's index is impossible).
func (p *Producer[T]) Free() int {
	used := p.head - p.r.cons.Load()
	if size := uint64(len(p.r.slots)); used <= size {
		return int(size - used)
	}
	return 0
}

// Dequeue copies up to len(dst) published items into dst and consumes
// them; bad reports a producer index more than a ring ahead (the items
// read are then whatever the slots hold: the caller checks each).
func (c *Consumer[T]) Dequeue(dst []T) (n int, bad bool) {
	avail := c.r.prod.Load() - c.tail
	if size := uint64(len(c.r.slots)); avail > size {
		avail, bad = size, true
	}
	if uint64(len(dst)) < avail {
		avail = uint64(len(dst))
	}
	for i := uint64(0); i < avail; i++ {
		dst[i] = c.r.slots[(c.tail+i)&c.r.mask]
	}
	c.tail += avail
	c.r.cons.Store(c.tail)
	return int(avail), bad
}

// Len returns how many items wait (clamped to the ring's size).
func (c *Consumer[T]) Len() int {
	avail := c.r.prod.Load() - c.tail
	return int(min(avail, uint64(len(c.r.slots))))
}

// The four ends of a channel: the application produces submissions and
// consumes completions, the appliance the reverse. Each end must be made
// once per mapping and used by one goroutine at a time. An end starts from
// the indexes the ring holds now (zero for a new channel).

// SubmitProducer is the application's end of the submit ring.
func (c *Channel) SubmitProducer() *Producer[Desc] {
	r := newRing[Desc](c.mem, c.Layout.submitOff(), c.Layout.RingSize)
	return &Producer[Desc]{r: r, head: r.prod.Load()}
}

// SubmitConsumer is the appliance's end of the submit ring.
func (c *Channel) SubmitConsumer() *Consumer[Desc] {
	r := newRing[Desc](c.mem, c.Layout.submitOff(), c.Layout.RingSize)
	return &Consumer[Desc]{r: r, tail: r.cons.Load()}
}

// CompleteProducer is the appliance's end of the completion ring.
func (c *Channel) CompleteProducer() *Producer[Comp] {
	r := newRing[Comp](c.mem, c.Layout.completeOff(), c.Layout.RingSize)
	return &Producer[Comp]{r: r, head: r.prod.Load()}
}

// CompleteConsumer is the application's end of the completion ring.
func (c *Channel) CompleteConsumer() *Consumer[Comp] {
	r := newRing[Comp](c.mem, c.Layout.completeOff(), c.Layout.RingSize)
	return &Consumer[Comp]{r: r, tail: r.cons.Load()}
}

// Raw returns the channel's whole mapping, for tests that play a hostile
// application and scribble on the rings.
func (c *Channel) Raw() []byte { return c.mem }

// asleepOff is where the header holds the appliance's "asleep" word, on a
// cache line of its own: the appliance writes it, the application reads it.
const asleepOff = line

func (c *Channel) asleepWord() *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&c.mem[asleepOff]))
}

// SetAsleep is the appliance's: it says whether the loop that polls the
// channel sleeps (or is about to), before that loop looks at the submit
// ring once more. An application that reads it set after publishing a
// descriptor writes the channel's bell (see the package doc). The store is
// sequentially consistent, as the ring's indexes are.
func (c *Channel) SetAsleep(v bool) {
	var w uint32
	if v {
		w = 1
	}
	c.asleepWord().Store(w)
}

// Asleep is the application's read of SetAsleep's word. What it holds is
// a hint the appliance never reads back.
func (c *Channel) Asleep() bool { return c.asleepWord().Load() != 0 }
