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
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/rings"
)

// engine is an endpoint: the transaction layer and its port, fed through a
// lock-free ring and polled by the holder of its poll token. Under PollLoop
// the lcore loop's goroutine is the only holder; under PollCaller a caller
// waiting for its op takes the token (a CAS) and polls itself, and the loop
// — idling with the sleep policy — polls only while no caller does. Fields
// below "owned by the token holder" are touched by one goroutine at a time:
// the holder, whose CAS and release order its writes before the next
// holder's reads (and by Close once the loop exited: Stop keeps the token).
type engine struct {
	host *Host
	pub  *Endpoint
	name string
	addr Addr
	opts Options
	port port.Port
	tx   *txn.Endpoint
	loop *lcore.Loop
	mq   *mqEngine // Options.MCSQ: the send queues' engine, polled in place of tx
	// A shard of a sharded endpoint (nil, 0 otherwise): shards.go.
	grp   *group
	shard int

	// sub carries ops (and cancel requests) from any goroutine to the loop:
	// the only hand-off on the way in. Callers take a ref in users before
	// they enqueue, so Close can wait for the last one.
	sub   *rings.MPSC[entry]
	spare spareOps // ops of the blocking calls
	users atomic.Int64
	dead  atomic.Bool   // no more submissions
	gone  chan struct{} // closed once the loop has ended everything

	closeOnce sync.Once
	closeErr  error

	// The poll token (PollCaller): held by whoever runs poll. parked counts
	// callers waiting for it, woken through tokenFree when it is released;
	// stopping tells callers to leave it to Stop.
	caller bool
	token  atomic.Bool
	// callerAt is when a caller last polled (PollCaller): the loop keeps
	// off while callers poll, within callersActive of it.
	callerAt atomic.Int64
	// yieldGap is the idle polls its callers run between yields (idleYield).
	yieldGap atomic.Int32
	// panicOnPoll makes the next poll panic: tests of what a panic in the
	// engine leaves behind.
	panicOnPoll atomic.Bool
	parked      atomic.Int32
	tokenFree   chan struct{}
	closing     atomic.Bool

	// Work others run on the loop after its own poll (inloop.go): the
	// sidecar server's. loopRuns counts the loop's polls, loopEnded is
	// set once it ran its last.
	pollMu    sync.Mutex
	pollers   atomic.Pointer[[]*poller]
	loopRuns  atomic.Uint64
	loopEnded atomic.Bool

	// owned by the token holder
	pinned   bool // the loop runs on a thread of its own, pinned to a CPU (Options.Pin)
	stopping bool
	woke     bool // a caller was handed its op this poll
	idle     uint32
	backlog  fifo[entry] // taken, not yet accepted by the transport (busy)
	tags     []*Op       // txn Op.Tag -> op
	freeTags []int32
	conns    map[*txn.Conn]*conn
	fresh    []*conn // accepted, to set up after the transport's poll
	reposts  []*conn // connections with receive slots to post again
	timed    []*conn // connections with Recvs waiting under a Timeout
	lst      *listener
	cq       []txn.Completion
	burst    []entry
}

// entry is one submission: an op to start, or a request to cancel the op
// started as generation gen.
type entry struct {
	op     *Op
	gen    uint32
	cancel bool
	// repost: a blocking Recv gives back the slot it copied out of.
	repost *conn
	slot   int32
}

var (
	_ lcore.Stage   = (*engine)(nil)
	_ lcore.Stopper = (*engine)(nil)
)

// Name names the stage.
func (e *engine) Name() string { return "peregrine:" + e.name }

// callersActive is how long after a caller's last poll the loop of a
// PollCaller endpoint keeps off the engine.
const callersActive = time.Millisecond

// Poll is one round of the loop. Under PollCaller it runs only when no
// caller holds the token: the loop keeps timers, accepts and closes going
// between calls.
func (e *engine) Poll(now clock.Time) int {
	if e.caller {
		n := e.runPollers()
		if now.Sub(clock.Time(e.callerAt.Load())) < callersActive {
			// The callers are polling: the loop leaves the engine to
			// them and goes on backing off (work here would reset its
			// sleep, and each short sleep of a pinned loop wakes a thread).
			return n
		}
		if e.closing.Load() || !e.token.CompareAndSwap(false, true) {
			return n
		}
		n += e.pollHolding(now)
		e.release() // a caller parked for the token takes over
		return n
	}
	n := e.poll(now) + e.runPollers()
	if n == 0 {
		e.idle++
	}
	if e.pinned {
		// A pinned loop is locked to its thread (lcore): a yield would
		// hand the thread's processor to another thread and wake this one
		// again through futexes, tens of microseconds on a virtual
		// machine. It never yields here: a caller it woke is taken by
		// another processor (the process needs more processors than
		// pinned loops), and its idle policy yields when it is idle.
		e.woke = false
		return n
	}
	if e.woke || e.idle&31 == 31 {
		// An unpinned loop is an ordinary goroutine sharing processors
		// with the callers, and a caller it just woke waits in this
		// loop's run queue: a poll that woke one (and every 32nd idle
		// poll, for the others) lets them run now rather than at the
		// scheduler's next preemption. A goroutine switch, no thread's.
		e.woke = false
		runtime.Gosched()
	}
	return n
}

// WakeFDs implements lcore.Waker: the port queue's descriptor, when it
// has one — but not under PollCaller, whose loop keeps off the engine
// while callers poll it: the frames it would wake for are theirs to take,
// and its descriptor stays readable until they do, so each sleep ended at
// once and the loop spun in poll(2) beside the callers (a PollCaller echo
// server over AF_XDP answered at p99 in 1.4 ms, not 11 µs). Its sleeps
// end on their timer, as the callers' absence is measured in time.
func (e *engine) WakeFDs(fds []int) []int {
	if e.caller {
		return fds
	}
	return e.tx.WakeFDs(fds)
}

// TakeBell implements lcore.BellTaker: a mem port's peer rings the loop
// when it sends.
func (e *engine) TakeBell(ring func()) { e.tx.TakeBell(ring) }

// NextDeadline implements lcore.Deadliner for a loop that owns the engine
// (PollLoop): the transport's timers. Under PollCaller the loop does not
// hold the token between polls and reads nothing.
func (e *engine) NextDeadline() (clock.Time, bool) {
	if e.caller {
		return 0, false
	}
	return e.tx.NextDeadline()
}

// poll takes what callers submitted, retries what the transport refused
// for now, runs the transport and hands its completions back. The caller
// holds the token.
func (e *engine) poll(now clock.Time) int {
	if e.panicOnPoll.Load() && e.panicOnPoll.CompareAndSwap(true, false) {
		panic("peregrine: the poll panics (a test asked for it)")
	}
	n := e.retryBacklog()
	n += e.intake()
	if e.mq != nil {
		n += e.mq.poll(now) // polls tx; hands its other completions to completed
	} else {
		n += e.tx.Poll(now)
	}
	n += e.reap()
	e.setupFresh()
	e.postSlots()
	return n
}

// tryPoll runs one poll on the caller's goroutine if the token is free;
// false: another goroutine holds it, or the endpoint is closing.
func (e *engine) tryPoll() (n int, ok bool) {
	if e.closing.Load() || !e.token.CompareAndSwap(false, true) {
		return 0, false
	}
	now := e.host.h.clock.Now()
	e.callerAt.Store(int64(now))
	n = e.pollHolding(now)
	e.woke = false
	e.release()
	return n, true
}

// tryIntake takes the submissions on the caller's goroutine if the token
// is free, without polling the transport: what the engine can answer at
// once (a Recv of a queued message) completes; a Send waits in the
// transport for the next poll to schedule it. false: not taken.
func (e *engine) tryIntake() bool { return e.intakeThen(nil) }

// intakeThen is tryIntake, and then, still holding the token, runs then
// (when not nil). A panic under the token marks the endpoint closing, as
// pollHolding says.
func (e *engine) intakeThen(then func()) bool {
	if e.closing.Load() || !e.token.CompareAndSwap(false, true) {
		return false
	}
	ok := false
	defer func() {
		if !ok {
			e.closing.Store(true)
		}
		e.woke = false
		e.release()
	}()
	e.retryBacklog()
	e.intake()
	e.postSlots()
	if then != nil {
		then()
	}
	ok = true
	return true
}

// pollHolding is poll for a holder of the token that must not keep it
// past a panic: a panic in poll (on a caller's goroutine, or on the loop,
// whose lcore recovers it and runs Stop) marks the endpoint closing — its
// state is not to be trusted, so no one polls it again — and gives the
// token back before the panic goes on, so that Stop and Close can take it
// and end every op rather than wait for it forever.
func (e *engine) pollHolding(now clock.Time) int {
	ok := false
	defer func() {
		if !ok {
			e.closing.Store(true)
			e.release()
		}
	}()
	n := e.poll(now)
	ok = true
	return n
}

// release gives the token back and wakes a caller parked for it.
func (e *engine) release() {
	e.token.Store(false)
	if e.parked.Load() > 0 {
		select {
		case e.tokenFree <- struct{}{}:
		default:
		}
	}
}

// intake takes a burst of submissions.
func (e *engine) intake() int {
	n := e.sub.DequeueBurst(e.burst)
	for i := range n {
		en := e.burst[i]
		e.burst[i] = entry{}
		if en.repost != nil {
			en.repost.repost(en.slot)
			continue
		}
		if en.cancel {
			e.cancelOp(en.op, en.gen)
			continue
		}
		if e.backlog.len() > 0 {
			// Keep the posting order: nothing overtakes a refused op.
			e.backlog.push(en)
			continue
		}
		if !e.run(en.op) {
			e.backlog.push(en)
		}
	}
	return n
}

func (e *engine) retryBacklog() int {
	n := 0
	for e.backlog.len() > 0 {
		en := e.backlog.peek()
		if en.op.o.state.Load() != statePosted || en.op.o.gen.Load() != en.gen {
			e.backlog.pop() // cancelled while waiting
			continue
		}
		if !e.run(en.op) {
			break
		}
		e.backlog.pop()
		n++
	}
	return n
}

// run starts op on the loop; false: the transport is busy, retry later.
func (e *engine) run(op *Op) bool {
	o := &op.o
	if e.stopping {
		e.finish(op, 0, StatusClosed, nil)
		return true
	}
	switch o.kind {
	case opSend, opPush, opPull:
		return e.post(op)
	case opRecv:
		o.c.recvPosted(op)
	case opDial:
		e.doDial(op)
	case opListen:
		e.doListen(op)
	case opUnlisten:
		e.lst = nil
		e.finish(op, 0, StatusOK, nil)
	case opClose:
		o.c.doClose(op)
	case opRegister:
		if e.grp != nil {
			e.registerShard(op)
			return true
		}
		r, err := e.tx.Register(o.buf, txn.Access(o.access))
		if err != nil {
			e.finish(op, 0, statusOf(err), err)
			return true
		}
		o.region.r = region{key: r.Key, mem: o.buf, e: e, ep: e.pub}
		e.finish(op, 0, StatusOK, nil)
	case opDeregister:
		if e.grp != nil {
			e.deregisterShard(op)
			return true
		}
		err := e.tx.Deregister(txn.Region{Key: o.region.r.key})
		e.finish(op, 0, statusOf(err), err)
	case opCall:
		st, err := o.call()
		o.call = nil
		e.finish(op, 0, st, err)
	}
	return true
}

// post hands a send, push or pull to the transport.
func (e *engine) post(op *Op) bool {
	o := &op.o
	c := o.c
	if st, why := c.usable(); st != StatusOK {
		e.finish(op, 0, st, why)
		return true
	}
	if len(e.freeTags) == 0 {
		return false
	}
	tag := e.freeTags[len(e.freeTags)-1]
	t := txn.Op{Tag: uint64(tag), Len: o.n, Timeout: c.opts.Timeout}
	var err error
	switch o.kind {
	case opSend:
		// The caller's buffer becomes a local-only region for the life of
		// the op: the transport reads it as packets go out, no copy.
		if len(o.buf) == 0 {
			o.buf = c.zero[:]
		}
		r, rerr := e.tx.Register(o.buf, 0)
		if rerr != nil {
			return false // every region slot is in use: retry
		}
		o.tmp = r.Key
		t.Local = r // t.Len is the message's length: 0 for an empty one
		o.rsn, err = c.tc.Send(t)
	case opPush, opPull:
		t.Local = txn.Region{Key: o.region.r.key, Len: len(o.region.r.mem)}
		t.LocalAddr = uint64(o.off)
		t.Remote.Key, t.Remote.Addr = o.remote.Key, o.remote.Addr
		if o.kind == opPush {
			o.rsn, err = c.tc.Push(t)
		} else {
			o.rsn, err = c.tc.Pull(t)
		}
	}
	if err != nil {
		e.dropTmp(o)
		if errors.Is(err, txn.ErrBusy) {
			return false
		}
		e.finish(op, 0, statusOf(err), err)
		return true
	}
	e.freeTags = e.freeTags[:len(e.freeTags)-1]
	e.tags[tag] = op
	o.tag, o.inTxn = tag, true
	return true
}

func (e *engine) dropTmp(o *opState) {
	if o.tmp != 0 {
		_ = e.tx.Deregister(txn.Region{Key: o.tmp})
		o.tmp = 0
	}
}

// expireRecvs ends the Recvs that waited past their connection's Timeout;
// a connection leaves the list once no Recv waits on it. The clock is read
// only while a Recv is timed: a poll without one costs a length test.
func (e *engine) expireRecvs() int {
	if len(e.timed) == 0 {
		return 0
	}
	now := e.host.h.clock.Now()
	n, keep := 0, e.timed[:0]
	for _, cn := range e.timed {
		n += cn.expireRecvs(now)
		if cn.recvHead != nil {
			keep = append(keep, cn)
		} else {
			cn.inTimed = false
		}
	}
	clear(e.timed[len(keep):])
	e.timed = keep
	return n
}

// reap turns the transport's completions into ops' results, and ends
// the Recvs whose timeout passed.
func (e *engine) reap() int {
	total := 0
	for {
		n := e.tx.Completions(e.cq)
		for i := range n {
			e.completed(&e.cq[i])
			e.cq[i] = txn.Completion{}
		}
		total += n
		if n < len(e.cq) {
			// After the completions: a message that arrived this poll is
			// its Recv's, however late.
			return total + e.expireRecvs()
		}
	}
}

func (e *engine) completed(c *txn.Completion) {
	if c.Kind == txn.OpRecv {
		if cn := e.conns[c.Conn]; cn != nil {
			cn.arrived(c)
		}
		return
	}
	op := e.tags[c.Tag]
	if op == nil {
		return
	}
	e.tags[c.Tag] = nil
	e.freeTags = append(e.freeTags, int32(c.Tag))
	o := &op.o
	o.inTxn = false
	e.dropTmp(o)
	st := Status(c.Status)
	var why error
	switch st {
	case StatusOK:
		e.finish(op, c.Bytes, StatusOK, nil)
		return
	case StatusConnFailed:
		st, why = o.c.endStatus()
	case StatusCancelled:
		why = o.causeOf()
	case StatusRemoteAccess, StatusRemoteInvalid:
		why = fmt.Errorf("the peer refused: %v", c.Refusal)
		if c.Refusal == txn.RefusalRecvTooSmall {
			why = fmt.Errorf("the peer's receive slots are smaller than this %d-byte message (raise its ConnOptions.MaxMessage)", o.n)
		}
	}
	e.finish(op, 0, st, why)
}

// finish completes op on the loop.
func (e *engine) finish(op *Op, n int, st Status, why error) {
	if op.complete(n, st, why) {
		e.woke = true
	}
}

// cancelOp stops op if it is still the generation the canceller saw.
func (e *engine) cancelOp(op *Op, gen uint32) {
	o := &op.o
	// The state first: a start stores the new generation before it
	// stores statePosted, so an op seen posted here shows its current
	// generation, and a stale request (the op since completed and started
	// again, perhaps by another caller) is told apart.
	if o.state.Load() != statePosted || o.gen.Load() != gen {
		return
	}
	if o.mq != nil {
		o.mq.cancel(op)
		return
	}
	switch {
	case o.inTxn:
		if o.c.tc.Cancel(o.rsn) != nil {
			return // completing already; its completion comes
		}
	case o.kind == opRecv && o.c.unlinkRecv(op):
		e.finish(op, 0, StatusCancelled, o.causeOf())
	case o.kind == opDial && o.c != nil && o.c.dialOp == op:
		o.c.dialOp = nil
		_ = o.c.tc.Abort()
		o.c.end(StatusClosed, o.causeOf())
		e.finish(op, 0, StatusCancelled, o.causeOf())
	default:
		// Waiting in the backlog: it is dropped there when its turn comes
		// (retryBacklog skips ops that are no longer posted).
		if e.inBacklog(op) {
			e.finish(op, 0, StatusCancelled, o.causeOf())
		}
	}
}

func (e *engine) inBacklog(op *Op) bool {
	for i := range e.backlog.len() {
		if e.backlog.at(i).op == op {
			return true
		}
	}
	return false
}

// Stop runs once as the loop ends (Close): the transport stops, every
// operation completes with ErrClosed, whatever is still submitted too.
func (e *engine) Stop(now clock.Time) {
	// The loop runs no poller from here on.
	e.loopEnded.Store(true)
	// Close set this already; a loop that ends otherwise (a stage panic)
	// refuses new submissions from here on too, and the last submitter is
	// waited for, so that nothing enqueued is left unanswered.
	e.dead.Store(true)
	for e.users.Load() != 0 {
		runtime.Gosched()
	}
	if e.caller {
		// Stop keeps the token: callers polling leave it (closing is set)
		// and wait for their ops, which end here.
		e.closing.Store(true)
		for !e.token.CompareAndSwap(false, true) {
			runtime.Gosched()
		}
	}
	e.stopping = true
	if e.mq != nil {
		e.mq.stop(now) // stops tx too; every WR ends
	} else {
		e.tx.Stop(now)
	}
	e.reap()
	for tc, cn := range e.conns {
		cn.end(StatusClosed, errors.New("the endpoint closed"))
		cn.release()
		delete(e.conns, tc)
	}
	for e.backlog.len() > 0 {
		en := e.backlog.pop()
		if en.op.o.state.Load() == statePosted && en.op.o.gen.Load() == en.gen {
			e.finish(en.op, 0, StatusClosed, nil)
		}
	}
	e.drainSubmissions()
	if e.lst != nil {
		e.lst = nil
	}
}

// drainSubmissions fails whatever is in the submission ring (Close has
// waited for the last submitter).
func (e *engine) drainSubmissions() {
	for {
		n := e.sub.DequeueBurst(e.burst)
		for i := range n {
			en := e.burst[i]
			e.burst[i] = entry{}
			if en.op != nil && !en.cancel && en.op.o.state.Load() == statePosted {
				e.finish(en.op, 0, StatusClosed, nil)
			}
		}
		if n == 0 {
			return
		}
	}
}

func (e *engine) close() error {
	e.closeOnce.Do(func() {
		e.dead.Store(true)
		e.closing.Store(true)
		for e.users.Load() != 0 {
			runtime.Gosched() // a submitter between its check and its enqueue
		}
		e.loop.Stop()
		err := e.loop.Wait()
		close(e.gone)
		e.closeErr = errors.Join(err, e.tx.Close(), e.port.Close())
		if e.grp != nil {
			return // the group closes the device and counts the endpoint once
		}
		h := &e.host.h
		h.mu.Lock()
		h.open--
		h.mu.Unlock()
	})
	return e.closeErr
}

// submit hands op to the loop; false once the endpoint is closing.
func (e *engine) submit(en entry) bool {
	e.users.Add(1)
	defer e.users.Add(-1)
	if e.dead.Load() {
		return false
	}
	one := [1]entry{en}
	for e.sub.EnqueueBulk(one[:]) == 0 {
		if e.dead.Load() {
			return false
		}
		runtime.Gosched() // the ring is full: the loop is draining it
	}
	if !e.caller && e.loop != nil {
		e.loop.Ring() // a sleeping loop takes the op now
	}
	return true
}

// acceptPeer is the transport's accept policy: a peer's ConnOpen is taken
// only while a listener is up.
func (e *engine) acceptPeer(rt.PeerAddr) bool { return e.lst != nil }

// onConnEvent follows the transaction layer's connection events (on the
// loop, inside the transport's poll).
func (e *engine) onConnEvent(ev txn.ConnEvent) {
	cn := e.conns[ev.Conn]
	switch ev.Kind {
	case txn.ConnEstablished:
		if cn != nil {
			cn.established()
			return
		}
		if e.mq != nil && e.mq.eng.Holds(ev.Conn) {
			return // a send queue's own connection, not a peer's
		}
		if e.lst == nil {
			_ = ev.Conn.Abort()
			return
		}
		// Set up after the poll: the event handler must not post on the
		// connection it reports.
		cn = e.newConn(ev.Conn, e.lst.opts, true)
		e.fresh = append(e.fresh, cn)
	case txn.ConnFailed:
		if cn != nil {
			st := statusOf(ev.Err)
			if st == StatusInvalid {
				st = StatusPeerGone
			}
			cn.end(st, ev.Err)
			cn.release()
			delete(e.conns, ev.Conn)
		}
	case txn.ConnClosed:
		if cn != nil {
			cn.end(StatusClosed, errors.New("the connection was closed"))
			cn.release()
			delete(e.conns, ev.Conn)
		}
	}
}

func (e *engine) setupFresh() {
	for i, cn := range e.fresh {
		e.fresh[i] = nil
		if err := errors.Join(cn.tc.SetIndex(sendIndex), cn.setupSlots()); err != nil {
			_ = cn.tc.Abort()
			continue
		}
		if e.lst == nil || !e.lst.offer(cn) {
			_ = cn.tc.Abort()
		}
	}
	e.fresh = e.fresh[:0]
}

func (e *engine) postSlots() {
	if len(e.reposts) == 0 {
		return
	}
	kept := e.reposts[:0]
	for _, cn := range e.reposts {
		if !cn.postSlots() {
			kept = append(kept, cn)
		} else {
			cn.inRepost = false // off the list: the next listRepost lists it again
		}
	}
	clear(e.reposts[len(kept):])
	e.reposts = kept
}

// Dial.
func (e *engine) dial(ctx context.Context, peer Addr, opts ConnOptions) (*Conn, error) {
	if err := checkConnOptions(&opts); err != nil {
		return nil, &Error{Op: "dial", Status: StatusInvalid, Cause: err}
	}
	if !peer.IP.IsValid() {
		return nil, &Error{Op: "dial", Status: StatusInvalid, Cause: invalidf("the peer's IP is required")}
	}
	op := e.takeOp()
	o := &op.o
	o.kind, o.peer, o.copts = opDial, peer, opts
	_, err := e.control(ctx, op)
	cn := o.res
	o.res = nil
	e.putOp(op)
	if err != nil {
		return nil, err
	}
	return cn, nil
}

func (e *engine) doDial(op *Op) {
	o := &op.o
	tc, err := e.tx.Open(rt.PeerAddr{MAC: o.peer.MAC, IP: o.peer.IP}, txn.ConnOptions{Ordered: o.copts.Ordered, Index: sendIndex})
	if err != nil {
		e.finish(op, 0, statusOf(err), err)
		return
	}
	cn := e.newConn(tc, o.copts, false)
	cn.peer = o.peer
	if err := cn.setupSlots(); err != nil {
		_ = tc.Abort()
		delete(e.conns, tc)
		e.finish(op, 0, statusOf(err), err)
		return
	}
	cn.dialOp = op
	o.c = &cn.pub.c
}

func (e *engine) register(mem []byte, access Access) (*Region, error) {
	if len(mem) == 0 || access&^(RemoteWrite|RemoteRead) != 0 {
		return nil, &Error{Op: "register", Status: StatusInvalid, Cause: invalidf("give a non-empty buffer and RemoteWrite, RemoteRead or 0 (%d bytes, access %#x)", len(mem), uint8(access))}
	}
	r := &Region{}
	op := e.takeOp()
	op.o.kind, op.o.buf, op.o.access, op.o.region = opRegister, mem, access, r
	_, err := e.control(context.Background(), op)
	op.o.buf, op.o.region = nil, nil
	e.putOp(op)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (e *engine) deregister(r *Region) error {
	if r == nil || r.r.e != e {
		return &Error{Op: "deregister", Status: StatusInvalid, Cause: invalidf("the region is not this endpoint's")}
	}
	op := e.takeOp()
	op.o.kind, op.o.region = opDeregister, r
	_, err := e.control(context.Background(), op)
	op.o.region = nil
	e.putOp(op)
	return err
}

// control runs a control op and waits for it.
func (e *engine) control(ctx context.Context, op *Op) (int, error) {
	if err := e.launch(op); err != nil {
		return 0, err
	}
	return op.wait(ctx)
}

// takeOp and putOp lend an op to a blocking call.
func (e *engine) takeOp() *Op  { return e.spare.take() }
func (e *engine) putOp(op *Op) { e.spare.put(op) }

// listener is a Listener's state.
// offer queues an accepted connection (on the loop).
