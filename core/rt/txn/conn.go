package txn

import (
	"time"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
)

// ConnOptions configure Open.
type ConnOptions struct {
	// Ordered connections deliver requests to the target ULP in request
	// order and completions to this side in posting order; unordered ones
	// deliver each as soon as it is complete.
	Ordered bool
	// Weight is the connection's share in the TX scheduler (default 1).
	Weight int
	// OpTimeout is the timeout of every operation posted on the
	// connection that does not set Op.Timeout (0: none). See Op.Timeout.
	OpTimeout time.Duration
	// IOI, when set, overrides Options.IOI for this connection.
	IOI *ioi.Config
	// Index is how this side's Sends tell the peer which receive WQE
	// they belong in (core/dix; send.go). The zero value is dix.None: no
	// index, the peer places in order (the baseline).
	Index dix.Config
	// Early opens the connection for 0-RTT (rt.Endpoint.OpenEarly):
	// operations posted at once are sent at once, right behind the
	// ConnOpen, without waiting a round trip for the target's
	// ConnAccept. sched/mcsq's DC SQs connect this way. See "Early data"
	// in core/rt/dcconnect.go for how a lost or refused connect is
	// recovered. Every other option means the same either way.
	Early bool
}

// Conn is a connection as the ULP sees it. It belongs to the endpoint's
// goroutine.
type Conn struct {
	e   *Endpoint
	idx int32
	gen uint32
}

func (h *Conn) live() *conn {
	if h == nil {
		return nil
	}
	c := &h.e.conns[h.idx]
	if !c.live || c.gen != h.gen {
		return nil
	}
	return c
}

// Transport returns the transport connection below (nil once closed).
func (h *Conn) Transport() *rt.Conn {
	if c := h.live(); c != nil {
		return c.rc
	}
	return nil
}

// Ordered reports whether the connection orders requests and completions
// (on the target: whether the peer asked for order).
func (h *Conn) Ordered() bool {
	c := h.live()
	return c != nil && (c.ordered || c.peerOrdered)
}

// Live reports whether the connection still carries operations.
func (h *Conn) Live() bool { c := h.live(); return c != nil && !c.closing }

// Close closes the connection once every operation on it has completed;
// posting on it is refused from now on.
func (h *Conn) Close() error {
	h.e.unpublished = true
	c := h.live()
	if c == nil {
		return ErrClosed
	}
	c.closing = true
	h.e.maybeClose(h.idx)
	return nil
}

func (h *Conn) String() string {
	if c := h.live(); c != nil {
		return c.rc.String()
	}
	return "txn conn (closed)"
}

// conn is the transaction state of one transport connection.
type conn struct {
	live      bool
	gen       uint32
	rc        *rt.Conn
	cid       uint32
	handle    *Conn
	swift     *swift.Controller
	ordered   bool // this side asked for order
	closing   bool
	closeSent bool
	aborting  bool // Abort runs: the teardown flushes (StatusFlushed)
	// awaiting mirrors rc.SetAwaiting: on while the connection holds a
	// transaction and nothing of ours is pending there (await.go).
	awaiting  bool
	quiet     bool // Open failed: its teardown is not announced
	givingUp  bool // an abort notice ran out of its budget: fails after this Poll
	opTimeout time.Duration
	blocked   bool // a scheduler class waits for an ACK to reopen the window

	// Initiator.
	nextRSN   uint32
	nextSSN   uint32
	doneBase  uint32 // next RSN to complete
	grantBase uint32 // next SSN whose grant releases data
	// Ordered: completions that came in their turn while an earlier
	// operation's abort notice is unacknowledged (noticesOwed of them)
	// wait here, in posting order (linked through xact.deferNext;
	// context index + 1, 0: none): the target releases nothing behind
	// that operation until the notice reaches it (cq.go).
	noticesOwed          int
	deferHead, deferTail int32

	// Target.
	peerOrdered bool
	reqBase     uint32 // next peer RSN to deliver to the ULP
	ssnBase     uint32 // next peer SSN to queue for a grant
	// Solicited pushes waiting for a grant, in SSN order (linked through
	// xact.grantNext), and whether the connection is in the grant round.
	grantHead, grantTail int32
	inGrantRound         bool

	// Every transaction of the connection, both roles, oldest first.
	head, tail int32
	count      int

	ioi ioiConn // IOI threshold and configuration (ioi.go)
}

// ring is a fixed FIFO of cookies.
type ring struct {
	buf        []uint64
	head, size int
}

func newRing(n int) ring { return ring{buf: make([]uint64, n)} }

func (r *ring) push(v uint64) bool {
	if r.size == len(r.buf) {
		return false
	}
	r.buf[(r.head+r.size)%len(r.buf)] = v
	r.size++
	return true
}

func (r *ring) peek() (uint64, bool) {
	if r.size == 0 {
		return 0, false
	}
	return r.buf[r.head], true
}

// remove deletes every v from the ring, keeping the order of the rest.
func (r *ring) remove(v uint64) {
	kept := 0
	for i := range r.size {
		w := r.buf[(r.head+i)%len(r.buf)]
		if w != v {
			r.buf[(r.head+kept)%len(r.buf)] = w
			kept++
		}
	}
	r.size = kept
}

func (r *ring) pop() {
	r.head = (r.head + 1) % len(r.buf)
	r.size--
}
