package peregrine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/rings"
)

var contextBackground = context.Background()

// opKind is what an op does.
type opKind uint8

const (
	opSend opKind = iota + 1
	opRecv
	opPush
	opPull
	opDial
	opListen
	opUnlisten
	opClose
	opRegister
	opDeregister
)

func (k opKind) String() string {
	switch k {
	case opSend:
		return "send"
	case opRecv:
		return "recv"
	case opPush:
		return "push"
	case opPull:
		return "pull"
	case opDial:
		return "dial"
	case opListen, opUnlisten:
		return "listen"
	case opClose:
		return "close"
	case opRegister:
		return "register"
	case opDeregister:
		return "deregister"
	}
	return "op"
}

// An op's life: idle (never started) → posted (the endpoint's) → done (the
// caller's again), and posted again by the next start.
const (
	stateIdle uint32 = iota
	statePosted
	stateDone
)

// opState is an Op's hidden part. The caller writes the request fields
// before the start publishes the op through the submission ring; the loop
// writes the results before the state's store publishes them back.
type opState struct {
	state atomic.Uint32
	gen   atomic.Uint32
	e     *engine               // the endpoint of the latest start (in-process)
	sc    *sidecarEP            // or (through the sidecar)
	cause atomic.Pointer[error] // why it was cancelled (the context's cause)
	done  chan struct{}         // one token per completion

	// The request.
	kind   opKind
	c      *conn
	buf    []byte
	region *Region
	off    int
	n      int
	remote RemoteAddr
	peer   Addr
	copts  ConnOptions
	access Access
	lst    *listener

	// The loop's, while posted.
	next  *Op        // a connection's waiting Recvs
	due   clock.Time // a waiting Recv's deadline (ConnOptions.Timeout)
	rsn   uint32
	tag   int32
	inTxn bool
	tmp   uint32 // the region key of a Send's buffer
	// borrow: a blocking Recv takes its message's slot rather than a copy
	// (lent, the slot's index in slot), and copies it out itself.
	borrow bool
	lent   bool
	slot   int

	// Through the sidecar: the descriptor's cookie, and a Send's or a
	// Recv's run of channel buffers (nrun of them from run).
	cookie uint64
	run    uint32
	nrun   int

	// The results.
	res    *Conn
	status Status
	err    error
}

// causeOf returns the error the canceller gave (nil for Op.Cancel).
func (o *opState) causeOf() error {
	if p := o.cause.Load(); p != nil {
		return *p
	}
	return nil
}

// check validates a data op's arguments on the caller's goroutine.
func (cn *conn) check(kind opKind, buf []byte, r *Region, off int, remote RemoteAddr) error {
	if end := cn.ended.Load(); end != nil && kind != opRecv { // a Recv may still find a message
		return &Error{Op: kind.String(), Status: end.Status, Cause: end.Cause}
	}
	switch kind {
	case opSend:
		if len(buf) > txn.MaxMessage {
			return &Error{Op: "send", Status: StatusRemoteInvalid, Cause: fmt.Errorf("%w: %d bytes, more than the %d a message may hold", ErrTooLarge, len(buf), txn.MaxMessage)}
		}
	case opPush, opPull:
		if r == nil || r.r.e != cn.e {
			return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("the local region is not registered with this connection's endpoint")}
		}
		if off < 0 || remote.n < 0 || off > len(r.r.mem) || remote.n > len(r.r.mem)-off {
			return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("span [%d, +%d) is outside the %d-byte local region", off, remote.n, len(r.r.mem))}
		}
	}
	return nil
}

func (cn *conn) fill(op *Op, kind opKind, buf []byte, r *Region, off int, remote RemoteAddr) {
	o := &op.o
	o.kind, o.c, o.buf, o.region, o.off, o.remote = kind, cn, buf, r, off, remote
	o.n = remote.n
	if kind == opSend {
		o.n = len(buf)
	}
}

// blocking runs a data op with one of the endpoint's spare ops and waits.
func (cn *conn) blocking(ctx context.Context, kind opKind, buf []byte, r *Region, off int, remote RemoteAddr) (int, error) {
	if cn.sc != nil {
		return cn.sc.blocking(ctx, kind, buf, r, off, remote)
	}
	if err := cn.check(kind, buf, r, off, remote); err != nil {
		return 0, err
	}
	e := cn.e
	op := e.takeOp()
	cn.fill(op, kind, buf, r, off, remote)
	op.o.borrow = kind == opRecv
	if err := e.launch(op); err != nil {
		e.putOp(op)
		return 0, err
	}
	n, err := op.wait(ctx)
	if o := &op.o; o.lent {
		// The loop lent a Recv's slot instead of copying out of it on the
		// loop: the copy runs here, on the caller's goroutine, and the
		// slot goes back to be posted again.
		copy(buf, cn.slotMem[o.slot*cn.size:o.slot*cn.size+n])
		o.lent = false
		e.submit(entry{repost: cn, slot: int32(o.slot)})
	}
	e.putOp(op)
	return n, err
}

// start begins an asynchronous data op.
func (cn *conn) start(op *Op, kind opKind, buf []byte, r *Region, off int, remote RemoteAddr) error {
	if op == nil {
		return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("op is nil")}
	}
	if op.o.state.Load() == statePosted {
		return &Error{Op: kind.String(), Status: StatusBusy, Cause: errors.New("the op is in flight (start it again once it completed)")}
	}
	if cn.sc != nil {
		return cn.sc.start(nil, op, kind, buf, r, off, remote)
	}
	if err := cn.check(kind, buf, r, off, remote); err != nil {
		return err
	}
	cn.fill(op, kind, buf, r, off, remote)
	return cn.e.launch(op)
}

// launch publishes op to the loop.
func (e *engine) launch(op *Op) error {
	o := &op.o
	o.e, o.sc = e, nil
	if err := op.prepare(); err != nil {
		return err
	}
	gen := o.gen.Load()
	o.state.Store(statePosted)
	if !e.submit(entry{op: op, gen: gen}) {
		if q := op.CQ; q != nil {
			q.q.unreserve()
		}
		o.status = StatusClosed
		o.err = &Error{Op: o.kind.String(), Status: StatusClosed, Cause: errors.New("the endpoint is closed")}
		o.state.Store(stateDone)
		return o.err
	}
	return nil
}

// prepare readies op for a start (of either door): its wake-up channel
// empty, its completion queue's slot reserved, its results cleared, a new
// generation. The caller then publishes it posted.
func (op *Op) prepare() error {
	o := &op.o
	if o.done == nil {
		o.done = make(chan struct{}, 1) // once per Op: reused by every start
	}
	select {
	case <-o.done: // the token of an earlier completion nobody took
	default:
	}
	if q := op.CQ; q != nil && !q.q.reserve() {
		return &Error{Op: o.kind.String(), Status: StatusBusy, Cause: fmt.Errorf("the completion queue holds %d ops in flight already", q.q.size)}
	}
	o.cause.Store(nil)
	o.res, o.err, o.status = nil, nil, StatusOK
	o.gen.Add(1)
	return nil
}

// complete publishes op's result: results first, then the state (a
// release store the waiter's acquire load pairs with), then the wake-ups.
func (op *Op) complete(n int, st Status, why error) {
	o := &op.o
	o.n, o.status = n, st
	o.err = nil
	if st != StatusOK {
		o.err = statusErr(o.kind.String(), st, why)
	}
	q := op.CQ
	o.state.Store(stateDone)
	if q != nil {
		q.q.push(op)
	}
	select {
	case o.done <- struct{}{}:
	default:
	}
}

// spareOps are an endpoint's ops for its blocking calls, made once (each
// with its wake-up channel) and reused, so that a blocking call allocates
// nothing.
type spareOps struct{ r *rings.MPMC[*Op] }

func newSpareOps(n int) (spareOps, error) {
	r, err := rings.NewMPMC[*Op](ceilPow2(n))
	if err != nil {
		return spareOps{}, err
	}
	for range n {
		op := &Op{}
		op.o.done = make(chan struct{}, 1)
		r.EnqueueBulk([]*Op{op})
	}
	return spareOps{r}, nil
}

// take returns a spare op, or a new one when all are in use.
func (s spareOps) take() *Op {
	var one [1]*Op
	if s.r.DequeueBulk(one[:]) == 1 {
		return one[0]
	}
	op := &Op{}
	op.o.done = make(chan struct{}, 1)
	return op
}

func (s spareOps) put(op *Op) {
	op.o.reset()
	op.CQ, op.Tag = nil, 0
	one := [1]*Op{op}
	s.r.EnqueueBulk(one[:])
}

// reset clears a spare op of a blocking call for its next use.
func (o *opState) reset() {
	o.buf, o.region, o.c, o.res, o.err, o.lst = nil, nil, nil, nil, nil, nil
	o.borrow, o.lent = false, false
	o.nrun = 0
	o.cause.Store(nil)
}

// spinChecks is how many times a waiter looks at the op's state (yielding
// between looks) before it parks on the channel: a round trip in memory
// ends within them, and parking costs a wake-up by the loop.
const spinChecks = 64

func (op *Op) wait(ctx context.Context) (int, error) {
	o := &op.o
	switch o.state.Load() {
	case stateIdle:
		return 0, &Error{Op: "wait", Status: StatusInvalid, Cause: invalidf("the op was never started")}
	case stateDone:
		return op.result()
	}
	for range spinChecks {
		if o.state.Load() == stateDone {
			return op.result()
		}
		runtime.Gosched()
	}
	select {
	case <-o.done:
	case <-ctx.Done():
		op.cancelWith(ctx)
		<-o.done
	}
	return op.result()
}

func (op *Op) result() (int, error) {
	o := &op.o
	if o.state.Load() != stateDone {
		return 0, &Error{Op: "result", Status: StatusBusy, Cause: errors.New("the op has not completed")}
	}
	return o.n, o.err
}

func (op *Op) cancel() { op.cancelWith(nil) }

// cancelWith sends the loop a cancel request for the op's current run.
func (op *Op) cancelWith(ctx context.Context) {
	o := &op.o
	if o.state.Load() != statePosted {
		return
	}
	var cause error = errors.New("cancelled by Op.Cancel")
	if ctx != nil {
		cause = context.Cause(ctx)
	}
	o.cause.Store(&cause)
	if o.sc != nil {
		o.sc.cancel(op)
		return
	}
	e := o.engine()
	if e == nil || !e.submit(entry{op: op, gen: o.gen.Load(), cancel: true}) {
		return // the endpoint is closing: the op completes with ErrClosed
	}
}

// engine is the endpoint the op was started on.
func (o *opState) engine() *engine { return o.e }

// region is a Region's state, written once at registration: by the loop
// (in-process), or by Register (through the sidecar, where mem is the
// shared mapping).
type region struct {
	e   *engine
	ep  *Endpoint
	sc  *sidecarRegion
	key uint32
	mem []byte
}

// cqueue is a CompletionQueue's state: an MPSC ring of ops, the loops of
// any endpoints producing, one reaper consuming.
type cqueue struct {
	ring     *rings.MPSC[*Op]
	wake     chan struct{}
	size     int
	inflight atomic.Int64
}

func newCQ(size int) (*CompletionQueue, error) {
	if size < 2 || size&(size-1) != 0 || size > rings.MaxCapacity {
		return nil, &Error{Op: "completion queue", Status: StatusInvalid, Cause: invalidf("size %d must be a power of two from 2 to %d", size, rings.MaxCapacity)}
	}
	r, err := rings.NewMPSC[*Op](size)
	if err != nil {
		return nil, &Error{Op: "completion queue", Status: StatusInvalid, Cause: err}
	}
	return &CompletionQueue{q: cqueue{ring: r, wake: make(chan struct{}, 1), size: size}}, nil
}

func (q *cqueue) reserve() bool {
	if q.inflight.Add(1) > int64(q.size) {
		q.inflight.Add(-1)
		return false
	}
	return true
}

func (q *cqueue) unreserve() { q.inflight.Add(-1) }

// push is called by a loop; a slot was reserved at the start.
func (q *cqueue) push(op *Op) {
	one := [1]*Op{op}
	q.ring.EnqueueBulk(one[:])
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *cqueue) poll(out []*Op) int {
	n := q.ring.DequeueBurst(out)
	q.inflight.Add(int64(-n))
	return n
}

func (q *cqueue) wait(ctx context.Context, out []*Op) (int, error) {
	for {
		if n := q.poll(out); n > 0 || len(out) == 0 {
			return n, nil
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return 0, cancelled("completion queue wait", ctx)
		}
	}
}

// fifo is a growable ring queue, preallocated to the size it needs in
// steady state.
type fifo[T any] struct {
	buf     []T
	head, n int
}

func newFifo[T any](capacity int) fifo[T] { return fifo[T]{buf: make([]T, max(capacity, 1))} }

func (f *fifo[T]) len() int { return f.n }

func (f *fifo[T]) push(v T) {
	if f.n == len(f.buf) {
		grown := make([]T, 2*max(len(f.buf), 1))
		for i := range f.n {
			grown[i] = f.buf[(f.head+i)%len(f.buf)]
		}
		f.buf, f.head = grown, 0
	}
	f.buf[(f.head+f.n)%len(f.buf)] = v
	f.n++
}

func (f *fifo[T]) peek() T { return f.buf[f.head] }

func (f *fifo[T]) at(i int) T { return f.buf[(f.head+i)%len(f.buf)] }

func (f *fifo[T]) pop() T {
	var zero T
	v := f.buf[f.head]
	f.buf[f.head] = zero
	f.head = (f.head + 1) % len(f.buf)
	f.n--
	return v
}
