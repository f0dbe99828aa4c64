package peregrine

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// sendIndex is how a dialled connection's Sends name their receive slot at
// the peer: a 16-bit free-running delivery index in every packet, so the
// peer places each packet on arrival, in any order.
var sendIndex = dix.Config{Kind: dix.FreeRunning, Width: 16}

// conn is a Conn's state. The first block is fixed at creation and read by
// any goroutine; ended is the callers' quick check; the rest is the loop's.
type conn struct {
	e       *engine
	sc      *sidecarConn // through the sidecar: the rest but pub, peer and ordered unused
	pub     *Conn
	peer    Addr
	ordered bool
	opts    ConnOptions
	ended   atomic.Pointer[Error] // why the connection stopped carrying operations

	// loop-owned
	tc       *txn.Conn
	st       Status // StatusOK while the connection carries operations
	why      error
	released bool
	dialOp   *Op
	zero     [1]byte // the source of an empty message
	// Receive slots: one region of nslots × size bytes, each slot a
	// posted receive WQE (WRID = its index) until its message is taken.
	slotKey  uint32
	slotMem  []byte
	size     int
	nslots   int
	ready    fifo[message] // received, not yet taken by a Recv
	toPost   []int32       // slots to post again
	inRepost bool          // listed in engine.reposts
	inTimed  bool          // listed in engine.timed
	recvHead *Op           // Recvs waiting, in call order (linked by opState.next)
	recvTail *Op
}

// message is a received message waiting in its slot.
type message struct {
	slot int32
	n    int
}

func checkConnOptions(o *ConnOptions) error {
	if o.RecvSlots == 0 {
		o.RecvSlots = defaultRecvSlots
	}
	if o.MaxMessage == 0 {
		o.MaxMessage = defaultMaxMessage
	}
	if o.RecvSlots < 1 || o.RecvSlots > maxRecvSlots {
		return invalidf("ConnOptions.RecvSlots %d out of range (use 1..%d)", o.RecvSlots, maxRecvSlots)
	}
	if o.MaxMessage < 1 || o.MaxMessage > txn.MaxMessage {
		return invalidf("ConnOptions.MaxMessage %d out of range (use 1..%d)", o.MaxMessage, txn.MaxMessage)
	}
	if o.Timeout < 0 {
		return invalidf("ConnOptions.Timeout %v must not be negative", o.Timeout)
	}
	return nil
}

// newConn makes the state of a transport connection (on the loop).
func (e *engine) newConn(tc *txn.Conn, opts ConnOptions, accepted bool) *conn {
	pub := &Conn{}
	cn := &pub.c
	cn.e, cn.pub, cn.tc, cn.opts = e, pub, tc, opts
	cn.ordered = opts.Ordered && !accepted
	if accepted {
		if rc := tc.Transport(); rc != nil {
			p := rc.Peer()
			cn.peer = Addr{IP: p.IP, MAC: p.MAC}
		}
	}
	e.conns[tc] = cn
	return cn
}

// setupSlots registers the receive slots and posts every one of them.
func (cn *conn) setupSlots() error {
	cn.size, cn.nslots = cn.opts.MaxMessage, cn.opts.RecvSlots
	cn.slotMem = make([]byte, cn.size*cn.nslots)
	r, err := cn.e.tx.Register(cn.slotMem, 0)
	if err != nil {
		return err
	}
	cn.slotKey = r.Key
	cn.ready = newFifo[message](cn.nslots)
	cn.toPost = make([]int32, 0, cn.nslots)
	for i := range cn.nslots {
		cn.toPost = append(cn.toPost, int32(i))
	}
	if !cn.postSlots() {
		cn.listRepost()
	}
	return nil
}

// postSlots posts the free slots as receive WQEs; false when some wait for
// room in the completion queue.
func (cn *conn) postSlots() bool {
	if cn.released || cn.st != StatusOK && cn.st != StatusClosed {
		cn.toPost = cn.toPost[:0]
		return true
	}
	for len(cn.toPost) > 0 {
		s := cn.toPost[0]
		_, err := cn.tc.PostRecv(txn.RecvWR{Local: txn.Region{Key: cn.slotKey, Len: len(cn.slotMem)},
			LocalAddr: uint64(int(s) * cn.size), Len: cn.size, WRID: uint64(s)})
		if err != nil {
			if errors.Is(err, txn.ErrBusy) {
				return false
			}
			cn.toPost = cn.toPost[:0] // the connection is going
			return true
		}
		copy(cn.toPost, cn.toPost[1:])
		cn.toPost = cn.toPost[:len(cn.toPost)-1]
	}
	return true
}

func (cn *conn) listRepost() {
	if !cn.inRepost {
		cn.inRepost = true
		cn.e.reposts = append(cn.e.reposts, cn)
	}
}

// repost gives a slot back to the transport.
func (cn *conn) repost(slot int32) {
	if cn.released {
		return // the connection's slots are gone
	}
	cn.toPost = append(cn.toPost, slot)
	if !cn.postSlots() {
		cn.listRepost()
	}
}

// arrived takes a receive completion: a message whole in its slot.
func (cn *conn) arrived(c *txn.Completion) {
	slot := int32(c.Tag)
	if cn.released || int(slot) >= cn.nslots {
		return
	}
	switch c.Status {
	case txn.StatusOK:
		cn.ready.push(message{slot: slot, n: c.Bytes})
		cn.match()
	case txn.StatusLocalLength, txn.StatusRemoteAbandoned:
		// The sender's message did not fit, or it gave up on it: it
		// fails there; the slot goes back.
		cn.repost(slot)
	}
}

// match hands ready messages to waiting Recvs, in order. The copy out of
// the slot runs here, on the loop: the slot is posted again at once.
func (cn *conn) match() {
	for cn.recvHead != nil && cn.ready.len() > 0 {
		op := cn.recvHead
		m := cn.ready.peek()
		cn.unlinkRecv(op)
		if len(op.o.buf) < m.n {
			cn.e.finish(op, 0, StatusLocalLength, fmt.Errorf("%w: a %d-byte message for a %d-byte buffer (it stays queued)", ErrTooLarge, m.n, len(op.o.buf)))
			continue
		}
		cn.ready.pop()
		if op.o.borrow {
			// A blocking Recv copies on its own goroutine, off the loop,
			// and gives the slot back.
			op.o.lent, op.o.slot = true, int(m.slot)
			cn.e.finish(op, m.n, StatusOK, nil)
			continue
		}
		off := int(m.slot) * cn.size
		copy(op.o.buf, cn.slotMem[off:off+m.n])
		cn.e.finish(op, m.n, StatusOK, nil)
		cn.repost(m.slot)
	}
}

// recvQueued is a blocking Recv's way under PollCaller when its message is
// in already (a request-response caller's usual case: the response came
// with the ACK its Send waited for): with the token free, it takes the
// submissions first, so that a Recv submitted before it is matched first,
// and then copies the oldest queued message into buf and posts its slot
// again, with no op and no trip through the submission ring. false: it
// took nothing (the token held elsewhere, no message queued, a Recv
// waiting ahead, buf too short for the message), and the Recv goes the
// usual way, which also reports a short buf.
func (cn *conn) recvQueued(buf []byte) (n int, took bool) {
	cn.e.intakeThen(func() {
		if cn.recvHead == nil && cn.ready.len() > 0 && len(buf) >= cn.ready.peek().n {
			m := cn.ready.pop()
			off := int(m.slot) * cn.size
			n = copy(buf, cn.slotMem[off:off+m.n])
			cn.repost(m.slot)
			took = true
		}
	})
	return n, took
}

// recvPosted queues a Recv.
func (cn *conn) recvPosted(op *Op) {
	op.o.next = nil
	if cn.recvTail == nil {
		cn.recvHead = op
	} else {
		cn.recvTail.o.next = op
	}
	cn.recvTail = op
	if cn.opts.Timeout > 0 {
		op.o.due = cn.e.host.h.clock.Now().Add(cn.opts.Timeout)
	}
	cn.match()
	if cn.st != StatusOK && cn.unlinkRecv(op) {
		cn.e.finish(op, 0, cn.st, cn.why)
	}
	if cn.recvHead != nil && cn.opts.Timeout > 0 && !cn.inTimed {
		cn.inTimed = true
		cn.e.timed = append(cn.e.timed, cn)
	}
}

// expireRecvs ends the Recvs no message matched within their connection's
// Timeout. A connection's Recvs wait in call order under one timeout, so
// their deadlines are in order too: only the first can be due.
func (cn *conn) expireRecvs(now clock.Time) int {
	n := 0
	for op := cn.recvHead; op != nil && op.o.due <= now; op = cn.recvHead {
		cn.unlinkRecv(op)
		cn.e.finish(op, 0, StatusTimeout, fmt.Errorf("no message within the connection's %v timeout", cn.opts.Timeout))
		n++
	}
	return n
}

// unlinkRecv removes a waiting Recv; false if it is not waiting.
func (cn *conn) unlinkRecv(op *Op) bool {
	var prev *Op
	for p := cn.recvHead; p != nil; prev, p = p, p.o.next {
		if p != op {
			continue
		}
		if prev == nil {
			cn.recvHead = p.o.next
		} else {
			prev.o.next = p.o.next
		}
		if cn.recvTail == p {
			cn.recvTail = prev
		}
		p.o.next = nil
		return true
	}
	return false
}

// usable says whether operations may be posted, and if not why.
func (cn *conn) usable() (Status, error) { return cn.st, cn.why }

// endStatus is what an operation the transport failed with the connection
// ends with.
func (cn *conn) endStatus() (Status, error) {
	if cn.e.stopping {
		return StatusClosed, errors.New("the endpoint closed")
	}
	if cn.st == StatusOK {
		return StatusPeerGone, nil
	}
	return cn.st, cn.why
}

// established: a dialled connection is up.
func (cn *conn) established() {
	if op := cn.dialOp; op != nil {
		cn.dialOp = nil
		op.o.res = cn.pub
		cn.e.finish(op, 0, StatusOK, nil)
	}
}

// end records why the connection stopped carrying operations and ends
// what waits on it: a Dial, the Recvs (once no message is left for them).
func (cn *conn) end(st Status, why error) {
	if cn.st == StatusOK {
		cn.st, cn.why = st, why
		cn.ended.Store(&Error{Status: st, Cause: why})
	}
	if op := cn.dialOp; op != nil {
		cn.dialOp = nil
		cn.e.finish(op, 0, cn.st, cn.why)
	}
	for cn.recvHead != nil {
		op := cn.recvHead
		cn.unlinkRecv(op)
		cn.e.finish(op, 0, cn.st, cn.why)
	}
}

// release gives the receive slots' registration back once the transport
// ended the connection (its WQEs completed first). Messages that arrived
// whole stay queued for the Recvs still to come: the slot memory is the
// conn's own, and the end of the connection does not unsay them.
func (cn *conn) release() {
	if cn.released {
		return
	}
	cn.released = true
	if cn.slotKey != 0 {
		_ = cn.e.tx.Deregister(txn.Region{Key: cn.slotKey})
		cn.slotKey = 0
	}
	cn.toPost = nil
}

// doClose runs Conn.Close on the loop.
func (cn *conn) doClose(op *Op) {
	if cn.st == StatusOK {
		_ = cn.tc.Close() // graceful: after every posted operation
		cn.end(StatusClosed, errors.New("closed by this side"))
	}
	cn.e.finish(op, 0, StatusOK, nil)
}

// close is Conn.Close.
func (cn *conn) close() error {
	if cn.sc != nil {
		return cn.sc.close()
	}
	e := cn.e
	op := e.takeOp()
	op.o.kind, op.o.c = opClose, cn
	_, err := e.control(contextBackground, op)
	e.putOp(op)
	if errors.Is(err, ErrClosed) {
		return nil // the endpoint closed: so did the connection
	}
	return err
}
