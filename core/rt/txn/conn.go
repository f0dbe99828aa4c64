package txn

import (
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
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

// role says which side of a transaction an xact holds.
type role uint8

const (
	roleInitiator role = iota + 1
	roleTarget
)

// xact is the context of one transaction on either side: fixed size, in a
// preallocated array; indexes travel as scheduler items and in cookies.
type xact struct {
	live      bool
	gen       uint32
	role      role
	kind      OpKind
	solicited bool
	conn      int32
	prev      int32
	next      int32

	rsn, ssn uint32
	length   uint32
	mem      []byte         // initiator: the local span; target: the region span
	remote   wire.RegionRef // the remote (initiator) or named (target) region
	tag      uint64
	posted   clock.Time

	pkts       uint32 // data packets the message needs (at least 1)
	sentPkts   uint32 // data packets handed to the transport
	reqSent    bool   // the request packet (pull or push request) went out
	unresolved int32  // packets sent and not yet acknowledged or refused
	received   uint32 // bytes placed (target push, initiator pull)
	gotData    bool
	granted    bool // initiator: may send solicited data; target: grant issued
	grantLeft  uint32
	inSched    bool    // an item of it is queued in the scheduler
	stop       bool    // initiator: failed, send nothing more
	done       bool    // initiator: completion decided, waiting for its turn
	failed     bool    // target: the request was refused
	why        Refusal // target: why
	grantNext  int32   // target: next in the connection's grant queue
	ssnHeld    bool    // an entry in an SSN space is still registered
	rsnHeld    bool    // an entry in an RSN space is still registered
	status     Status
	refusal    Refusal // StatusRemoteAccess: what the target said

	timer  clock.TimerID // initiator: the operation's timeout
	notice noticeState   // the abort notice owed to the peer
	// noticeResends: times the notice was abandoned and sent again; past
	// RetryLimit the connection gives up (giveUpConn).
	noticeResends uint8
	noticeSince   clock.Time  // when the notice was first abandoned
	noticePSN     uint32      // the notice's PSN while it is out
	noticeWin     wire.Window // and its window
	completed     bool        // initiator: completion posted, the context stays for its notice
	aborted       bool        // target: the initiator gave up on it (abort notice), tell OnAborted
	placeheld     bool        // target: a placeholder that only takes the request's turn
	grantQ        bool        // target: linked in its connection's grant queue
	ioi           ioiXact     // IOI sender or receiver state (ioi.go)
	snd           sendX       // a Send's state (send.go)
	owesTurn      bool        // initiator, ordered: completed, counted in its connection's noticesOwed
	deferred      bool        // initiator, ordered: completion waits in its connection's deferred list
	deferNext     int32       // the next in that list (context index + 1, 0: none)
	expired       bool        // initiator, deferred: its deadline passed; it ends once those before it do
	// givenUp: initiator: stopped (timeout, cancel) with packets still
	// unresolved, which the transport turned into resyncs (rt.Conn.Abandon):
	// it no longer references the buffer, so the operation completes; the
	// context stays until those resyncs resolve (and then its notice).
	givenUp bool
}

func (x *xact) cookie(idx int32) uint64 { return uint64(x.gen)<<32 | uint64(uint32(idx)) }

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
