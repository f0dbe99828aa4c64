package txnload

import (
	"errors"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// SendOptions configure NewSends: two-sided Sends (docs/sends.md) on unordered
// connections, placed by the target into the receive WQEs it keeps posted.
type SendOptions struct {
	// Target, when in the same process, gets a RecvPoster (Recv) that
	// posts its WQEs and checks them; without it, run NewRecvPoster at
	// the target.
	Initiator, Target *txn.Endpoint
	Peer              rt.PeerAddr
	// Conns unordered connections carry the Sends (default 1).
	Conns int
	// Window is the most Sends outstanding at once on all of them
	// (default 16); Depth the WQEs the target keeps posted on each
	// connection (default 32, at most the target's Options.RecvDepth).
	Window, Depth int
	// Sizes are the message sizes, used in turn (default 4 KiB, 64 KiB).
	Sizes []int
	// Index is the connections' delivery index (default a 16-bit
	// free-running index in the header).
	Index dix.Config
}

// SendStats are a Send load's counters, readable from any goroutine.
type SendStats struct {
	Posted, Completed, Failed, Busy uint64 // initiator: Sends
	Received, RecvFailed            uint64 // target: receive completions OK / in error (not counting flushes)
	Flushed                         uint64 // target: WQEs flushed when their connection closed
	BadData                         uint64 // target: a WQE whose bytes or length are not its Send's
	Bytes                           uint64 // bytes received OK
}

// SendLoad is the initiator's stage: it keeps Window Sends outstanding,
// Send k of a connection filled with content derived from (k, length).
type SendLoad struct {
	opts    SendOptions
	conns   []*txn.Conn
	next    []uint32 // per connection: the next Send's number
	slot    int
	src     []byte
	rSrc    txn.Region
	free    []int
	slots   []sendSlot
	stopped atomic.Bool
	cnt     [5]atomic.Uint64
	// Recv is the target's stage (run it on the target's loop, and give
	// the target Recv.OnConnEvent as its Options.OnConnEvent).
	Recv *RecvPoster
}

type sendSlot struct{ busy bool }

// NewSends registers the memory and opens the connections.
func NewSends(opts SendOptions) (*SendLoad, error) {
	if opts.Initiator == nil {
		return nil, errors.New("txnload: SendOptions.Initiator is required")
	}
	if opts.Conns == 0 {
		opts.Conns = 1
	}
	if opts.Window == 0 {
		opts.Window = 16
	}
	if opts.Depth == 0 {
		opts.Depth = 32
	}
	if len(opts.Sizes) == 0 {
		opts.Sizes = []int{4 << 10, 64 << 10}
	}
	if opts.Index == (dix.Config{}) {
		opts.Index = dix.Config{Kind: dix.FreeRunning, Width: 16}
	}
	l := &SendLoad{opts: opts, slot: slotSize(opts.Sizes)}
	l.src = make([]byte, opts.Window*l.slot)
	var err error
	if l.rSrc, err = opts.Initiator.Register(l.src, 0); err != nil {
		return nil, err
	}
	l.slots = make([]sendSlot, opts.Window)
	for i := opts.Window - 1; i >= 0; i-- {
		l.free = append(l.free, i)
	}
	if opts.Target != nil {
		l.Recv = NewRecvPoster(opts.Target, opts.Sizes, opts.Depth)
	}
	for range opts.Conns {
		c, err := opts.Initiator.Open(opts.Peer, txn.ConnOptions{Index: opts.Index})
		if err != nil {
			return nil, err
		}
		l.conns = append(l.conns, c)
		l.next = append(l.next, 0)
	}
	return l, nil
}

// Name names the stage.
func (l *SendLoad) Name() string { return "sendload" }

// Stop stops posting.
func (l *SendLoad) Stop() { l.stopped.Store(true) }

// Idle reports whether Stop was called and every Send completed at both
// ends.
func (l *SendLoad) Idle() bool {
	s := l.Stats()
	return l.stopped.Load() && s.Posted == s.Completed+s.Failed && (l.Recv == nil || s.Received+s.RecvFailed >= s.Completed)
}

// Stats returns the counters.
func (l *SendLoad) Stats() SendStats {
	var s SendStats
	if l.Recv != nil {
		s = l.Recv.Stats()
	}
	s.Posted, s.Completed, s.Failed, s.Busy = l.cnt[0].Load(), l.cnt[1].Load(), l.cnt[2].Load(), l.cnt[3].Load()
	return s
}

// sendSize is Send k's length.
func (l *SendLoad) sendSize(k uint32) int { return sendSize(l.opts.Sizes, k) }

func sendSize(sizes []int, k uint32) int { return sizes[int(k)%len(sizes)] }

// sendByte is byte i of Send k (of connection-independent content: the
// target checks WQE k against it).
func sendByte(k uint32, i int) byte { return byte(uint32(i)*7 + uint32(i>>8) + k*131) }

// Poll completes what finished and posts up to the window.
func (l *SendLoad) Poll(now clock.Time) int {
	work := 0
	for !l.stopped.Load() && len(l.free) > 0 {
		s := l.free[len(l.free)-1]
		ci := int(l.cnt[0].Load() % uint64(len(l.conns)))
		k := l.next[ci]
		size := l.sendSize(k)
		b := l.src[s*l.slot : s*l.slot+size]
		for i := range b {
			b[i] = sendByte(k, i)
		}
		if _, err := l.conns[ci].Send(txn.Op{Local: l.rSrc, LocalAddr: uint64(s * l.slot), Len: size, Tag: uint64(s)}); err != nil {
			l.cnt[3].Add(1)
			break
		}
		l.free = l.free[:len(l.free)-1]
		l.slots[s].busy = true
		l.next[ci]++
		l.cnt[0].Add(1)
		work++
	}
	return work
}

// Complete takes an initiator completion of a Send: the Load that drains
// the initiator's completion queue hands them over (Load.Sends).
func (l *SendLoad) Complete(c *txn.Completion) {
	s := int(c.Tag)
	if c.Status == txn.StatusOK {
		l.cnt[1].Add(1)
	} else {
		l.cnt[2].Add(1)
	}
	l.slots[s].busy = false
	l.free = append(l.free, s)
}

// RecvPoster is the target's stage: it keeps Depth WQEs posted on every
// connection the target accepts, drains the target's completion queue
// and checks that WQE k holds Send k, byte for byte.
type RecvPoster struct {
	sizes  []int
	slot   int
	depth  int
	target *txn.Endpoint
	conns  []*recvConn
	cq     []txn.Completion
	cnt    [5]atomic.Uint64
}

// NewRecvPoster makes the target's stage for Sends of the given sizes
// (Send k is sizes[k mod len]), keeping depth WQEs posted per connection.
// A target in another process than its Send load uses it alone.
func NewRecvPoster(target *txn.Endpoint, sizes []int, depth int) *RecvPoster {
	return &RecvPoster{sizes: sizes, slot: slotSize(sizes), depth: depth, target: target, cq: make([]txn.Completion, 64)}
}

// Stats returns the target-side counters (the Received, RecvFailed,
// Flushed, BadData and Bytes fields).
func (r *RecvPoster) Stats() SendStats {
	return SendStats{Received: r.cnt[0].Load(), RecvFailed: r.cnt[1].Load(), Flushed: r.cnt[2].Load(), BadData: r.cnt[3].Load(), Bytes: r.cnt[4].Load()}
}

// recvConn is one connection's WQE buffers. WQEs complete out of order
// (a short Send overtakes a long one), so a buffer is posted again only
// when the WQE that held it completed: free, not the posting count,
// says which are.
type recvConn struct {
	c      *txn.Conn
	mem    []byte
	region txn.Region
	free   []int // buffers (of slot bytes) not held by a posted WQE
	// first is the number of the connection's first WQE (the transport's
	// InitialSeq): WQE first+k holds Send k.
	first  uint32
	posted int
	done   int
	open   bool
}

// OnConnEvent is the target's connection-event handler (its
// Options.OnConnEvent): a new connection gets its WQE buffers.
func (r *RecvPoster) OnConnEvent(ev txn.ConnEvent) {
	if ev.Kind != txn.ConnEstablished {
		for _, rc := range r.conns {
			if rc.c == ev.Conn {
				rc.open = false
			}
		}
		return
	}
	rc := &recvConn{c: ev.Conn, mem: make([]byte, r.depth*r.slot), free: make([]int, r.depth), open: true}
	for i := range rc.free {
		rc.free[i] = r.depth - 1 - i
	}
	var err error
	if rc.region, err = r.target.Register(rc.mem, txn.RemoteWrite); err != nil {
		return
	}
	r.conns = append(r.conns, rc)
}

// Name names the stage.
func (r *RecvPoster) Name() string { return "recvposter" }

// Poll posts WQEs and checks receive completions.
func (r *RecvPoster) Poll(now clock.Time) int {
	work := 0
	slot := r.slot
	for _, rc := range r.conns {
		for rc.open && len(rc.free) > 0 {
			i := rc.free[len(rc.free)-1]
			k, err := rc.c.PostRecv(txn.RecvWR{Local: rc.region, LocalAddr: uint64(i * slot), Len: slot, WRID: uint64(i)})
			if err != nil {
				break
			}
			if rc.posted == 0 {
				rc.first = k
			}
			rc.free = rc.free[:len(rc.free)-1]
			rc.posted++
			work++
		}
	}
	for n := r.target.Completions(r.cq); n > 0; n = r.target.Completions(r.cq) {
		for i := range r.cq[:n] {
			r.complete(&r.cq[i])
		}
		work += n
	}
	// A closed connection's WQEs were all flushed: forget it and its
	// buffers.
	kept := r.conns[:0]
	for _, rc := range r.conns {
		if !rc.open && rc.done >= rc.posted {
			_ = r.target.Deregister(rc.region)
			continue
		}
		kept = append(kept, rc)
	}
	clear(r.conns[len(kept):])
	r.conns = kept
	return work
}

func (r *RecvPoster) complete(c *txn.Completion) {
	if c.Kind != txn.OpRecv {
		return
	}
	var rc *recvConn
	for _, x := range r.conns {
		if x.c == c.Conn {
			rc = x
		}
	}
	if rc == nil {
		return
	}
	rc.done++
	// Checked (below) before the next Poll posts the buffer again.
	rc.free = append(rc.free, int(c.Tag))
	switch c.Status {
	case txn.StatusOK:
	case txn.StatusConnFailed, txn.StatusFlushed:
		r.cnt[2].Add(1)
		return
	default:
		r.cnt[1].Add(1)
		return
	}
	r.cnt[0].Add(1)
	k := c.WQE - rc.first
	want := sendSize(r.sizes, k)
	off := int(c.Tag) * r.slot
	b := rc.mem[off : off+c.Bytes]
	ok := c.Bytes == want
	for i := 0; ok && i < len(b); i++ {
		ok = b[i] == sendByte(k, i)
	}
	if !ok {
		r.cnt[3].Add(1)
		return
	}
	r.cnt[4].Add(uint64(c.Bytes))
}
