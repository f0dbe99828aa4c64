package peregrine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

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
	opCall // a function of the loop's (a send queue's setup)
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
	case opCall:
		return "send queue"
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
	// parked: a goroutine may be waiting on done (Op.Done handed it out,
	// or a waiter parks), so the loop that completes the op lets it run;
	// a waiter that spins is left to find the state itself.
	parked  atomic.Bool
	watched atomic.Bool // Op.Done handed the channel out

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
	// A Recv posted ahead of its call (sidecarConn.postAhead): its
	// connection and size; its completion keeps the run for the Recv
	// that takes it. counted: whether the client counts it in flight
	// (uncounted, counted, ended), so that exactly one End answers a
	// Begin whoever ends it.
	ahead    *sidecarConn
	aheadLen int
	counted  atomic.Int32

	// A send queue's: the queue a WR of the op went to (its slot in
	// slot), or what an opCall runs on the loop.
	mq   *sendQueue
	call func() (Status, error)

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
		if r == nil || !cn.e.owns(r) {
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
	if kind == opRecv && e.caller {
		if n, ok := cn.recvQueued(buf); ok {
			return n, nil
		}
	}
	op := e.takeOp()
	cn.fill(op, kind, buf, r, off, remote)
	// A Recv borrows its message's slot and copies on this goroutine, off
	// the loop. Under PollCaller whoever polls is a caller already: the
	// copy runs in the poll that matches the message and the slot is
	// posted again there, with no hand-back through the submission ring
	// on the round trip's path.
	op.o.borrow = kind == opRecv && !e.caller
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
		return cn.sc.start(nil, op, kind, buf, r, off, remote, false)
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
	if q := op.CQ; q != nil && e.caller {
		q.q.drives(e)
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
	if len(o.done) > 0 {
		select {
		case <-o.done: // the token of an earlier completion nobody took
		default:
		}
	}
	if q := op.CQ; q != nil && !q.q.reserve() {
		return &Error{Op: o.kind.String(), Status: StatusBusy, Cause: fmt.Errorf("the completion queue holds %d ops in flight already", q.q.size)}
	}
	o.cause.Store(nil)
	o.res, o.err, o.status = nil, nil, StatusOK
	o.mq = nil
	o.gen.Add(1)
	return nil
}

// complete publishes op's result: results first, then the state (a
// release store the waiter's acquire load pairs with), then the wake-ups.
// It reports whether a goroutine may have been woken: one parked on the
// op or on its completion queue.
func (op *Op) complete(n int, st Status, why error) (woke bool) {
	o := &op.o
	o.n, o.status = n, st
	o.err = nil
	if st != StatusOK {
		o.err = statusErr(o.kind.String(), st, why)
	}
	q := op.CQ
	o.state.Store(stateDone)
	if q != nil {
		woke = q.q.push(op)
	}
	// The channel's token only for whoever may wait on it (a channel
	// operation takes its lock: two a round trip for the spinning waiters
	// that never look at it). After the state's store: a waiter marks
	// itself parked before its last look at the state, and Done marks the
	// op watched before its look, so one of the two sees the other.
	if o.parked.Load() || o.watched.Load() {
		select {
		case o.done <- struct{}{}:
		default:
		}
		return true
	}
	return woke
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
	o.ahead, o.aheadLen = nil, 0
	o.cause.Store(nil)
}

// spinChecks is how many times a caller that finds the poll token taken
// looks at its op's state (yielding between looks) before it parks.
const spinChecks = 64

// waitSpin is how long a waiter looks at its op's state (yielding between
// looks) before it parks on the op's channel: longer than a round trip over
// a veth pair, because a parked waiter costs a thread's wake-up to wake
// (tens of microseconds on a virtual machine) and a spinning one nothing.
const waitSpin = 200 * time.Microsecond

// spinDone yields until the op is done (true) or waitSpin passed; it
// reads the clock every few looks only.
func (o *opState) spinDone() bool {
	var start time.Time
	for i := 0; ; i++ {
		if o.state.Load() == stateDone {
			return true
		}
		if i&15 == 0 {
			if i == 0 {
				start = time.Now()
			} else if time.Since(start) > waitSpin {
				return false
			}
		}
		runtime.Gosched()
	}
}

func (op *Op) wait(ctx context.Context) (int, error) {
	o := &op.o
	switch o.state.Load() {
	case stateIdle:
		return 0, &Error{Op: "wait", Status: StatusInvalid, Cause: invalidf("the op was never started")}
	case stateDone:
		return op.result()
	}
	if e := o.e; e != nil && e.caller {
		return op.drive(ctx, e)
	}
	if s := o.sc; s != nil {
		return s.wait(ctx, op, false)
	}
	o.spinDone()
	o.parked.Store(true)
	if o.state.Load() != stateDone {
		select {
		case <-o.done:
		case <-ctx.Done():
			op.cancelWith(ctx)
			<-o.done
		}
	}
	o.parked.Store(false)
	return op.result()
}

// idlePolls is how many polls in a row that find nothing a caller runs
// (yielding after each) before it stops polling and leaves its op to the
// endpoint's loop: a long wait (a Recv with no sender) does not keep a CPU.
const idlePolls = 4096

// maxYieldGap bounds idleYield's gap: the longest a goroutine sharing the
// processor with a polling caller waits for its turn is this many idle
// polls (a few microseconds), once, before the gap is back to 1.
const maxYieldGap = 16

// yieldedAlone is how short a yield is when it ran no other goroutine:
// measured on the machine the benchmarks run on, a yield with nothing else
// runnable took 100-150 ns and one that ran another goroutine's poll and
// yield 400 ns or more.
const yieldedAlone = 250 * time.Nanosecond

// idleYield yields the processor after an idle poll, every gap-th one.
// The goroutine a caller's op waits for (the peer's, the client's) may
// share its processor, and then its turn is the round trip's critical
// path: yielding only every 32nd poll doubled the sidecar's round trip on
// two CPUs. With a processor to itself, though, each yield is a trip
// through the scheduler that delays the next poll, and so the reaction to
// the packet it waits for (a fifth of the caller's CPU time in the
// in-process echo, two callers on two processors). So the gap doubles
// after each yield that ran nothing else, up to maxYieldGap, and is 1
// again after one that did. The gap is the engine's (or the completion
// queue's), so that the next wait starts from what the last one learned.
func idleYield(yieldGap *atomic.Int32, since *int) {
	gap := max(1, int(yieldGap.Load()))
	if *since++; *since < gap {
		return
	}
	*since = 0
	start := time.Now()
	runtime.Gosched()
	if time.Since(start) < yieldedAlone {
		if gap < maxYieldGap {
			yieldGap.Store(int32(2 * gap))
		}
	} else if gap > 1 {
		yieldGap.Store(1)
	}
}

// drive waits for op under PollCaller: it polls the engine itself while it
// holds the token; while another goroutine holds it, it looks at the op
// (yielding) and then parks until the op completes or the token is free.
func (op *Op) drive(ctx context.Context, e *engine) (int, error) {
	o := &op.o
	done := ctx.Done()
	misses, idle, sinceYield := 0, 0, 0
	// A first look that leaves the transport alone: a Recv whose message
	// is queued ends at once and needs no transport poll, the costliest
	// part of a round trip's polls. Any other op goes out on a poll, whose
	// intake takes it (a look first would cost a token's round trip).
	if o.kind == opRecv && e.tryIntake() && o.state.Load() == stateDone {
		return op.result()
	}
	for i := 0; o.state.Load() != stateDone; i++ {
		if i&7 == 0 {
			// Every few polls: a poll is short, a channel look is not.
			select {
			case <-done:
				op.cancelWith(ctx)
				done = nil // the op ends Cancelled, or as it was ending
			default:
			}
		}
		if n, ok := e.tryPoll(); ok {
			misses = 0
			if n != 0 {
				idle = 0
				continue
			}
			if idle++; idle >= idlePolls {
				if op.park(ctx, done, nil) {
					done = nil
				}
				idle = 0
				continue
			}
			idleYield(&e.yieldGap, &sinceYield)
			continue
		}
		if misses++; misses < spinChecks {
			runtime.Gosched()
			continue
		}
		misses = 0
		// Announce the park before the last look at the token: a holder
		// that releases it after the look sees parked and wakes a parker.
		e.parked.Add(1)
		if !e.token.Load() && !e.closing.Load() {
			e.parked.Add(-1)
			continue
		}
		if op.park(ctx, done, e.tokenFree) {
			done = nil
		}
		e.parked.Add(-1)
	}
	if e.parked.Load() > 0 && !e.token.Load() {
		// A parker woken for a token it did not use passes the wake on.
		select {
		case e.tokenFree <- struct{}{}:
		default:
		}
	}
	return op.result()
}

// park waits for the op's completion, the token (free != nil) or the
// context (done != nil): true when it cancelled the op for the context.
func (op *Op) park(ctx context.Context, done, free <-chan struct{}) bool {
	o := &op.o
	o.parked.Store(true)
	defer o.parked.Store(false)
	if o.state.Load() == stateDone {
		return false
	}
	select {
	case <-o.done:
		// Put the token back for Op.Done's readers: the op stays done.
		select {
		case o.done <- struct{}{}:
		default:
		}
	case <-free:
	case <-done:
		op.cancelWith(ctx)
		return true
	}
	return false
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
	// A sharded endpoint's region: its group and user slot (shards.go).
	g    *group
	slot int
}

// cqueue is a CompletionQueue's state: an MPSC ring of ops, the loops of
// any endpoints producing, one reaper consuming.
type cqueue struct {
	ring     *rings.MPSC[*Op]
	wake     chan struct{}
	parked   atomic.Int32 // reapers waiting on wake
	size     int
	inflight atomic.Int64
	yieldGap atomic.Int32 // Wait's idle polls between yields (idleYield)

	// The PollCaller endpoints whose ops it has taken: Wait polls them.
	mu      sync.Mutex
	last    atomic.Pointer[engine]
	engines atomic.Pointer[[]*engine]
	// The attached endpoints whose ops it has taken: Wait reaps their
	// completion rings.
	lastSC   atomic.Pointer[sidecarEP]
	sidecars atomic.Pointer[[]*sidecarEP]
}

// drives notes that ops of e complete here.
func (q *cqueue) drives(e *engine) { noteOnce(&q.mu, &q.last, &q.engines, e) }

// reaps notes that ops of s complete here.
func (q *cqueue) reaps(s *sidecarEP) { noteOnce(&q.mu, &q.lastSC, &q.sidecars, s) }

// noteOnce adds x to list unless it is there (once per endpoint; the
// common case, the same endpoint as the last start, is one atomic load).
func noteOnce[T any](mu *sync.Mutex, last *atomic.Pointer[T], list *atomic.Pointer[[]*T], x *T) {
	if last.Load() == x {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	last.Store(x)
	var l []*T
	if p := list.Load(); p != nil {
		l = *p
	}
	for _, y := range l {
		if y == x {
			return
		}
	}
	grown := append(append(make([]*T, 0, len(l)+1), l...), x)
	list.Store(&grown)
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

// push is called by a loop; a slot was reserved at the start. It reports
// whether a reaper may be waiting.
func (q *cqueue) push(op *Op) bool {
	one := [1]*Op{op}
	q.ring.EnqueueBulk(one[:])
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return q.parked.Load() > 0
}

func (q *cqueue) poll(out []*Op) int {
	n := q.ring.DequeueBurst(out)
	q.inflight.Add(int64(-n))
	return n
}

func (q *cqueue) wait(ctx context.Context, out []*Op) (int, error) {
	idle, sinceYield := 0, 0
	// The attached endpoints this wait watches (Client.Watch) while it
	// reaps their rings.
	var watched *[]*sidecarEP
	for {
		if n := q.poll(out); n > 0 || len(out) == 0 {
			unwatch(&watched)
			return n, nil
		}
		p, sp := q.engines.Load(), q.sidecars.Load()
		if (p != nil || sp != nil) && idle < idlePolls {
			// PollCaller endpoints: poll them here, as Op.Wait does, and
			// attached ones: reap their rings, until a while of finding
			// nothing; then the loops' pace (the completion goroutines').
			if err := ctx.Err(); err != nil {
				unwatch(&watched)
				return 0, cancelled("completion queue wait", ctx)
			}
			work := 0
			if p != nil {
				for _, e := range *p {
					n, _ := e.tryPoll()
					work += n
				}
			}
			if sp != nil {
				if watched != sp {
					unwatch(&watched)
					watched = sp
					for _, s := range *sp {
						s.cl.Watch()
					}
				}
				for _, s := range *sp {
					n, _ := s.cl.TryReap()
					work += n
				}
			}
			if idle++; work != 0 {
				idle = 0
			} else if p != nil {
				idleYield(&q.yieldGap, &sinceYield) // as drive does
			} else if idle&31 == 31 {
				// A ring's reap is short: a yield after every 32nd.
				runtime.Gosched()
			}
			continue
		}
		unwatch(&watched)
		idle = 0
		q.parked.Add(1)
		if n := q.poll(out); n > 0 {
			q.parked.Add(-1)
			return n, nil
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			q.parked.Add(-1)
			return 0, cancelled("completion queue wait", ctx)
		}
		q.parked.Add(-1)
	}
}

// unwatch ends a completion queue wait's watches, if any.
func unwatch(l **[]*sidecarEP) {
	if *l != nil {
		for _, s := range **l {
			s.cl.Unwatch()
		}
		*l = nil
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
