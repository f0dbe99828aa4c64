package peregrine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/rings"
	"github.com/peregrine-net/peregrine/sched/mcsq"
)

// The send queue: the multi-channel send queue (sched/mcsq) behind the
// package's calls. One queue takes pushes and pulls for any number of
// peers; the endpoint's poll runs the mcsq engine, which spreads them over
// a small pool of connections (SQs) and reports each one's end, and the
// same poll turns those ends into the ops' completions.

// SQKind says how a send queue's SQs (its connections) are made.
type SQKind uint8

const (
	// DC SQs connect on demand to the peer of the work they are given
	// (the first data follows the connect without waiting a round trip)
	// and let go of it once idle for SendQueueOptions.IdleTimeout: a few
	// SQs serve any number of peers. The default.
	DC SQKind = iota + 1
	// RC SQs are each connected to one peer, on the first post to it, and
	// kept: a queue serves at most SendQueueOptions.SQs peers.
	RC
)

func (k SQKind) String() string {
	switch k {
	case DC:
		return "dc"
	case RC:
		return "rc"
	}
	return "kind?"
}

// SendQueueOptions configure Endpoint.NewSendQueue. Zero fields take their
// defaults.
type SendQueueOptions struct {
	// Kind is DC (the default) or RC.
	Kind SQKind
	// SQs is the pool's size: the connections the queue spreads its work
	// over (default 8 for DC, 16 for RC). A DC SQ may hold two of the
	// endpoint's connections at once (its own and one still closing), an
	// RC SQ one: they must fit Options.MaxConns beside the endpoint's
	// other queues and connections. With fewer DC SQs than the peers in
	// use at once, SQs move between peers, a connect each time, and the
	// connection left lingers closing at both ends (twice the transport's
	// largest retransmit timeout) and holds one of the peer's MaxConns
	// meanwhile: a peer whose table stays full through the connect's
	// retries is unreachable (ErrPeerGone).
	SQs int
	// Ordered completes the queue's operations in posting order (each
	// waits for those posted before it, to any peer); otherwise each
	// completes as soon as it is done. The operations for one peer are
	// executed there in posting order either way.
	Ordered bool
	// Depth is how many operations the queue holds from post to
	// completion (default 1024; rounded up to a power of two). A post
	// that finds it full waits (blocking) or fails with ErrBusy (*Async).
	Depth int
	// IdleTimeout (DC) is how long an SQ keeps its connection to a peer
	// after its last operation (default 10 ms): a peer posted to again
	// within it is served without a new connect.
	IdleTimeout time.Duration
	// Timeout ends an operation the transport has not completed this
	// long after it went out with ErrTimeout (0: none), and stops its
	// peer like any failure (below).
	Timeout time.Duration
}

// SendQueue posts pushes and pulls to any peers of its endpoint without
// the application dialling, accepting or keeping a connection: it names a
// peer's address and a region there, as Conn.Push does. Its calls may be
// made from any goroutine. Open the endpoint with Options.MCSQ, and make
// queues with Endpoint.NewSendQueue.
//
// A peer is reached like a Dial: it must have a listener, whose Accept
// hands it the queue's connections (to be taken, or they count against its
// MaxConns; they carry nothing for it to read, and end when the queue lets
// go of them).
//
// An operation that fails at a peer — its retries run out, the peer is
// gone, it refused the connection or a region — stops that peer's SQ
// alone: the operations queued behind it for the same peer end with the
// same error without running, as do later ones, until Reset(peer); the
// other peers' go on.
type SendQueue struct{ q sendQueue }

// NewSendQueue makes a send queue on an endpoint opened with Options.MCSQ
// (on a sharded one, Options.Shards, the queues are dealt round robin over
// the shards, as Dial deals connections: queue k runs on shard k mod N's
// loop, with the regions every shard knows). Through the sidecar it is ErrNotSupported: the appliance runs no send
// queue for attached applications.
func (ep *Endpoint) NewSendQueue(opts SendQueueOptions) (*SendQueue, error) {
	if ep.sc != nil {
		return nil, &Error{Op: "send queue", Status: StatusNotSupported, Cause: errors.New("an attached endpoint has no send queue: the appliance's poll loop runs none for its applications (open the endpoint in-process with Options.MCSQ)")}
	}
	if ep.g != nil {
		return ep.g.newSendQueue(opts)
	}
	return ep.e.newSendQueue(opts)
}

// Push writes n bytes of local, from offset off, into peer's region at
// remote, and returns once the peer has placed them. If ctx ends first it
// returns at once with ErrCancelled (below).
func (s *SendQueue) Push(ctx context.Context, peer Addr, local *Region, off, n int, remote RemoteAddr) error {
	return s.q.blocking(ctx, opPush, peer, local, off, n, remote)
}

// Pull reads n bytes of peer's region at remote into local, from offset
// off.
func (s *SendQueue) Pull(ctx context.Context, peer Addr, local *Region, off, n int, remote RemoteAddr) error {
	return s.q.blocking(ctx, opPull, peer, local, off, n, remote)
}

// PushAsync starts Push with op; a full queue is ErrBusy.
func (s *SendQueue) PushAsync(op *Op, peer Addr, local *Region, off, n int, remote RemoteAddr) error {
	return s.q.async(op, opPush, peer, local, off, n, remote)
}

// PullAsync starts Pull with op; a full queue is ErrBusy.
func (s *SendQueue) PullAsync(op *Op, peer Addr, local *Region, off, n int, remote RemoteAddr) error {
	return s.q.async(op, opPull, peer, local, off, n, remote)
}

// Reset lets operations for peer run again after a failure stopped it
// (from the endpoint's next poll on).
func (s *SendQueue) Reset(peer Addr) error { return s.q.reset(peer) }

// Ordered reports whether the queue completes in posting order.
func (s *SendQueue) Ordered() bool { return s.q.opts.Ordered }

// Close stops the queue taking operations and returns once every one it
// took has ended, cancelled ones included (closing the endpoint ends them
// all). Idempotent.
func (s *SendQueue) Close() error { return s.q.close() }

// Defaults of SendQueueOptions, and the most peers an endpoint's DC
// queues name over its life.
const (
	defaultDCSQs   = 8
	defaultRCSQs   = 16
	defaultSQDepth = 1024
	defaultSQIdle  = 10 * time.Millisecond
	maxSQPeers     = 4096
)

// mqEngine is an endpoint's mcsq engine and its queues. The engine polls
// the endpoint's transaction layer and hands the completions that are not
// its WRs' to engine.completed; it holds the send queues' connections,
// which engine.onConnEvent leaves alone (mcsq.Engine.Holds).
type mqEngine struct {
	e   *engine
	eng *mcsq.Engine

	// DC peers: a peer's mcsq target (and flow ID), made on the first post
	// to it.
	peers peerMap[mcsq.Target]

	// owned by the token holder
	queues []*sendQueue
	conns  int // connections the queues may hold at once
}

func newMQEngine(e *engine) (*mqEngine, error) {
	eng, err := mcsq.New(mcsq.Options{Endpoint: e.tx, Foreign: e.completed, MaxTargets: maxSQPeers, Name: "peregrine:" + e.name + " mcsq"})
	if err != nil {
		return nil, err
	}
	return &mqEngine{e: e, eng: eng}, nil
}

// poll runs the engine (which polls the transport) and completes the ops
// whose WRs ended.
func (m *mqEngine) poll(now clock.Time) int {
	n := m.eng.Poll(now)
	for _, s := range m.queues {
		n += s.reap()
	}
	return n
}

// stop ends every WR (flushed: StatusClosed) and stops the transport.
func (m *mqEngine) stop(now clock.Time) {
	m.eng.Stop(now)
	for _, s := range m.queues {
		s.reap()
	}
}

// target returns peer's DC target, adding it on the first post to it.
func (m *mqEngine) target(peer Addr) (mcsq.Target, error) {
	return m.peers.getOrAdd(peer, func() (mcsq.Target, error) {
		t, err := m.eng.AddTarget(rt.PeerAddr{MAC: peer.MAC, IP: peer.IP})
		if err != nil {
			return 0, &Error{Op: "send queue", Status: StatusBusy, Cause: fmt.Errorf("peer %v: %w (an endpoint's send queues name at most %d peers)", peer.IP, err, maxSQPeers)}
		}
		return t, nil
	})
}

// peerMap maps peers to what a send queue made for them once: read without
// a lock on every post, replaced whole under mu when a peer is added.
type peerMap[V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[Addr]V]
}

func (p *peerMap[V]) get(peer Addr) (V, bool) {
	if m := p.m.Load(); m != nil {
		v, ok := (*m)[peer]
		return v, ok
	}
	var zero V
	return zero, false
}

// getOrAdd returns peer's value, made by add (once: under mu) if it has
// none.
func (p *peerMap[V]) getOrAdd(peer Addr, add func() (V, error)) (V, error) {
	if v, ok := p.get(peer); ok {
		return v, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.get(peer); ok {
		return v, nil
	}
	v, err := add()
	if err != nil {
		return v, err
	}
	var old map[Addr]V
	if m := p.m.Load(); m != nil {
		old = *m
	}
	grown := make(map[Addr]V, len(old)+1)
	for k, x := range old {
		grown[k] = x
	}
	grown[peer] = v
	p.m.Store(&grown)
	return v, nil
}

// sendQueue is a SendQueue's state. Each operation takes a slot of the
// queue's table, whose index is its WR's cookie: the slot names the op the
// WR completes, written by the poster before the post and then the
// loop's, which clears it when the op completes or is cancelled (the WR
// then runs on unobserved) and frees the slot when the WR ends.
type sendQueue struct {
	e     *engine
	m     *mqEngine
	opts  SendQueueOptions
	pool  *mcsq.Pool
	q     *mcsq.Queue
	slots []mqSlot
	free  *rings.MPMC[uint32]
	space chan struct{} // a slot was freed (posters waiting for room)
	idle  chan struct{} // nothing is in flight (Close)
	// inflight counts the slots taken and the posts under way: Close
	// waits for it to reach zero once closed is set.
	inflight atomic.Int64
	closed   atomic.Bool

	// RC peers: a peer's QPN (the identifier of its SQ), made by AddRC on
	// the loop on the first post to it.
	qpns    peerMap[uint32]
	nextQPN uint32 // under qpns.mu

	cqes []mcsq.CQE // the loop's
}

type mqSlot struct{ op *Op }

func (e *engine) newSendQueue(o SendQueueOptions) (*SendQueue, error) {
	fail := func(st Status, err error) (*SendQueue, error) {
		return nil, &Error{Op: "send queue", Status: st, Cause: err}
	}
	if e.mq == nil {
		return fail(StatusInvalid, invalidf("the endpoint runs no send queue: open it with Options.MCSQ"))
	}
	if o.Kind == 0 {
		o.Kind = DC
	}
	if o.SQs == 0 {
		o.SQs = defaultDCSQs
		if o.Kind == RC {
			o.SQs = defaultRCSQs
		}
	}
	if o.Depth == 0 {
		o.Depth = defaultSQDepth
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = defaultSQIdle
	}
	switch {
	case o.Kind != DC && o.Kind != RC:
		return fail(StatusInvalid, invalidf("SendQueueOptions.Kind %d must be DC or RC", o.Kind))
	case o.SQs < 1 || o.SQs > e.opts.MaxConns:
		return fail(StatusInvalid, invalidf("SendQueueOptions.SQs %d out of range (1..Options.MaxConns %d)", o.SQs, e.opts.MaxConns))
	case o.Depth < 2 || o.Depth > 1<<20:
		return fail(StatusInvalid, invalidf("SendQueueOptions.Depth %d out of range (2..%d)", o.Depth, 1<<20))
	case o.IdleTimeout < 0 || o.Timeout < 0:
		return fail(StatusInvalid, invalidf("SendQueueOptions.IdleTimeout %v and Timeout %v must not be negative", o.IdleTimeout, o.Timeout))
	case o.Kind == RC && e.opts.GlobalQPNs:
		// The transport hands out the QP numbers then (mcsq Pool.OpenRC),
		// and a connection opened for a QPN no SQ holds yet could not be
		// told from a peer's.
		return fail(StatusNotSupported, errors.New("an RC send queue on an endpoint with Options.GlobalQPNs (use a DC queue)"))
	}
	o.Depth = ceilPow2(o.Depth)
	sq := &SendQueue{}
	s := &sq.q
	*s = sendQueue{e: e, m: e.mq, opts: o, slots: make([]mqSlot, o.Depth), space: make(chan struct{}, 1),
		idle: make(chan struct{}, 1), nextQPN: 1, cqes: make([]mcsq.CQE, 64)}
	var err error
	if s.free, err = rings.NewMPMC[uint32](o.Depth); err != nil {
		return fail(StatusInvalid, err)
	}
	for i := range o.Depth {
		one := [1]uint32{uint32(i)}
		s.free.EnqueueBulk(one[:])
	}
	if err := e.onLoop(s.setup); err != nil {
		return nil, err
	}
	return sq, nil
}

// setup makes the queue's pool and mcsq queue (on the loop).
func (s *sendQueue) setup() (Status, error) {
	m, o := s.m, s.opts
	conns := o.SQs
	if o.Kind == DC {
		conns *= 2
	}
	if m.conns+conns > s.e.opts.MaxConns {
		return StatusInvalid, invalidf("%d SQs (%v) need %d connections, and the endpoint's send queues hold %d of Options.MaxConns %d already (raise it)", o.SQs, o.Kind, conns, m.conns, s.e.opts.MaxConns)
	}
	kind := mcsq.DC
	if o.Kind == RC {
		kind = mcsq.RC
	}
	var err error
	if s.pool, err = m.eng.NewPool(mcsq.PoolOptions{Kind: kind, SQs: o.SQs, IdleTimeout: o.IdleTimeout, OpTimeout: o.Timeout}); err != nil {
		return StatusInvalid, err
	}
	qo := mcsq.QueueOptions{Depth: o.Depth, Ordered: o.Ordered,
		// One completion per WR: each ends its own op.
		MaxCoalesce: 1}
	if o.Kind == RC {
		qo.RC = s.pool
	} else {
		qo.DC = s.pool
	}
	if s.q, err = m.eng.NewQueue(qo); err != nil {
		return StatusInvalid, err
	}
	m.conns += conns
	m.queues = append(m.queues, s)
	return StatusOK, nil
}

// onLoop runs f on the loop and waits for it (setup, not the data path).
func (e *engine) onLoop(f func() (Status, error)) error {
	op := e.takeOp()
	op.o.kind, op.o.call = opCall, f
	_, err := e.control(context.Background(), op)
	op.o.call = nil
	e.putOp(op)
	return err
}

// route returns the WR identifier and target of peer.
func (s *sendQueue) route(peer Addr) (mcsq.ID, mcsq.Target, error) {
	if s.opts.Kind == DC {
		t, err := s.m.target(peer)
		return mcsq.Flow(uint64(t)), t, err
	}
	n, err := s.qpns.getOrAdd(peer, func() (uint32, error) {
		n := s.nextQPN
		err := s.e.onLoop(func() (Status, error) {
			if err := s.pool.AddRC(n, rt.PeerAddr{MAC: peer.MAC, IP: peer.IP}); err != nil {
				return statusOfMQ(err), fmt.Errorf("an SQ for peer %v: %w (SendQueueOptions.SQs bounds an RC queue's peers)", peer.IP, err)
			}
			return StatusOK, nil
		})
		if err == nil {
			s.nextQPN++
		}
		return n, err
	})
	return mcsq.QPN(n), 0, err
}

func statusOfMQ(err error) Status {
	if errors.Is(err, mcsq.ErrInvalidOptions) || errors.Is(err, mcsq.ErrBadWR) {
		return StatusInvalid
	}
	return statusOf(err)
}

// check validates a post on the caller's goroutine.
func (s *sendQueue) check(kind opKind, peer Addr, r *Region, off, n int) error {
	switch {
	case !peer.IP.IsValid():
		return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("the peer's IP is required")}
	case r == nil || !s.e.owns(r):
		return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("the local region is not registered with the send queue's endpoint")}
	case off < 0 || n < 0 || off > len(r.r.mem) || n > len(r.r.mem)-off:
		return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("span [%d, +%d) is outside the %d-byte local region", off, n, len(r.r.mem))}
	case n > txn.MaxMessage:
		return &Error{Op: kind.String(), Status: StatusRemoteInvalid, Cause: fmt.Errorf("%w: %d bytes, more than the %d an operation may move", ErrTooLarge, n, txn.MaxMessage)}
	}
	return nil
}

// blocking runs a post with one of the endpoint's spare ops and waits. A
// cancelled wait returns at once: the loop unlinks the op from its slot
// (sendQueue.cancel), so the op goes back to the spares while the WR runs
// on.
func (s *sendQueue) blocking(ctx context.Context, kind opKind, peer Addr, r *Region, off, n int, remote RemoteAddr) error {
	e := s.e
	op := e.takeOp()
	if err := s.start(ctx, op, kind, peer, r, off, n, remote); err != nil {
		e.putOp(op)
		return err
	}
	_, err := op.wait(ctx)
	e.putOp(op)
	return err
}

func (s *sendQueue) async(op *Op, kind opKind, peer Addr, r *Region, off, n int, remote RemoteAddr) error {
	if op == nil {
		return &Error{Op: kind.String(), Status: StatusInvalid, Cause: invalidf("op is nil")}
	}
	if op.o.state.Load() == statePosted {
		return &Error{Op: kind.String(), Status: StatusBusy, Cause: errors.New("the op is in flight (start it again once it completed)")}
	}
	return s.start(nil, op, kind, peer, r, off, n, remote)
}

// start posts op's WR on the mcsq queue, from the caller's goroutine (the
// queue's post ring is lock-free, multi-producer): no hand-off through the
// endpoint's submission ring. ctx nil: do not wait for room.
func (s *sendQueue) start(ctx context.Context, op *Op, kind opKind, peer Addr, r *Region, off, n int, remote RemoteAddr) error {
	if err := s.check(kind, peer, r, off, n); err != nil {
		return err
	}
	id, target, err := s.route(peer)
	if err != nil {
		return err
	}
	s.inflight.Add(1)
	if s.closed.Load() {
		s.settle()
		return &Error{Op: kind.String(), Status: StatusClosed, Cause: errors.New("the send queue is closed")}
	}
	i, err := s.take(ctx, kind)
	if err != nil {
		s.settle()
		return err
	}
	e := s.e
	o := &op.o
	o.e, o.sc = e, nil
	if err := op.prepare(); err != nil {
		s.release(i)
		return err
	}
	o.kind, o.region, o.off, o.n, o.remote = kind, r, off, n, remote
	o.mq, o.slot = s, int(i)
	if q := op.CQ; q != nil && e.caller {
		q.q.drives(e)
	}
	s.slots[i].op = op
	o.state.Store(statePosted)
	wr := mcsq.WR{ID: id, Target: target, Op: mcsq.OpPush, Local: txn.Region{Key: r.r.key, Len: len(r.r.mem)},
		LocalAddr: uint64(off), Len: n, Cookie: uint64(i)}
	wr.Remote.Key, wr.Remote.Addr = remote.Key, remote.Addr
	if kind == opPull {
		wr.Op = mcsq.OpPull
	}
	// Closing the endpoint waits for users: a WR is either posted before
	// the engine's Stop flushes the queue, or refused here.
	e.users.Add(1)
	var perr error
	if e.dead.Load() {
		perr = errors.New("the endpoint is closed")
	} else if perr = s.q.Post(&wr); perr != nil {
		perr = fmt.Errorf("the send queue refused the work request: %w", perr)
	}
	e.users.Add(-1)
	if perr != nil {
		s.slots[i].op = nil
		s.release(i)
		if q := op.CQ; q != nil {
			q.q.unreserve()
		}
		st := StatusClosed
		if !errors.Is(perr, mcsq.ErrClosed) && !e.dead.Load() {
			st = StatusInvalid
		}
		o.status = st
		o.err = &Error{Op: kind.String(), Status: st, Cause: perr}
		o.state.Store(stateDone)
		return o.err
	}
	return nil
}

// take returns a free slot; with ctx, it waits for one while ctx allows.
func (s *sendQueue) take(ctx context.Context, kind opKind) (uint32, error) {
	var one [1]uint32
	for {
		if s.free.DequeueBurst(one[:]) == 1 {
			if ctx != nil && s.free.Len() > 0 {
				signal(s.space) // pass the wake-up on to another waiter
			}
			return one[0], nil
		}
		if ctx == nil {
			return 0, &Error{Op: kind.String(), Status: StatusBusy, Cause: fmt.Errorf("the send queue holds %d operations (SendQueueOptions.Depth): reap completions and post again", len(s.slots))}
		}
		if s.e.caller {
			// Nobody may be polling: poll here while that finds work.
			if n, ok := s.e.tryPoll(); ok && n > 0 {
				continue
			}
		}
		select {
		case <-s.space:
		case <-ctx.Done():
			return 0, cancelled(kind.String(), ctx)
		case <-s.e.gone:
			return 0, &Error{Op: kind.String(), Status: StatusClosed, Cause: errors.New("the endpoint is closed")}
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// release frees slot i.
func (s *sendQueue) release(i uint32) {
	one := [1]uint32{i}
	s.free.EnqueueBulk(one[:])
	signal(s.space)
	s.settle()
}

// settle ends one post's share of inflight.
func (s *sendQueue) settle() {
	if s.inflight.Add(-1) == 0 {
		signal(s.idle)
	}
}

// reap turns the queue's CQEs into its ops' completions (on the loop).
func (s *sendQueue) reap() int {
	total := 0
	for {
		n := s.q.Completions(s.cqes)
		for k := range s.cqes[:n] {
			s.completed(&s.cqes[k])
			s.cqes[k] = mcsq.CQE{}
		}
		total += n
		if n < len(s.cqes) {
			return total
		}
	}
}

func (s *sendQueue) completed(c *mcsq.CQE) {
	i := uint32(c.Cookie)
	if int(i) >= len(s.slots) {
		return
	}
	op := s.slots[i].op
	s.slots[i].op = nil
	s.release(i)
	if op == nil {
		return // cancelled: nobody waits for it
	}
	st, why := mqStatus(c)
	n := c.Bytes
	if st != StatusOK {
		n = 0
	}
	s.e.finish(op, n, st, why)
}

// cancel ends op at once if its WR has not (on the loop). The WR cannot be
// recalled from the send queue: it runs to its end, and its slot is freed
// then.
func (s *sendQueue) cancel(op *Op) {
	o := &op.o
	if o.slot < 0 || o.slot >= len(s.slots) || s.slots[o.slot].op != op {
		return
	}
	s.slots[o.slot].op = nil
	s.e.finish(op, 0, StatusCancelled, o.causeOf())
}

// mqStatus maps a CQE onto the package's statuses: the way the WR, or the
// failure of its peer's SQ before it, ended.
func mqStatus(c *mcsq.CQE) (Status, error) {
	switch c.Status {
	case mcsq.StatusOK:
		return StatusOK, nil
	case mcsq.StatusFlushed:
		return StatusClosed, c.Err
	case mcsq.StatusLocalError, mcsq.StatusUnknownID:
		return StatusInvalid, c.Err
	}
	why := fmt.Errorf("%w (the peer's SQ failed: %v)", c.Err, c.Cause)
	if c.Status == mcsq.StatusSQFailed {
		switch c.TxnStatus {
		case txn.StatusRemoteAccess, txn.StatusRemoteInvalid, txn.StatusTimeout:
			return Status(c.TxnStatus), why
		}
	}
	switch c.Cause {
	case mcsq.CauseRemoteError:
		return StatusRemoteAccess, why
	case mcsq.CauseRefused:
		return StatusRefused, why
	case mcsq.CauseTimeout:
		return StatusTimeout, why
	}
	// Retries exhausted, the connect unanswered, the peer reset or gone
	// silent, the connection ended under the WR: the peer is gone as far
	// as the queue can tell.
	return StatusPeerGone, why
}

func (s *sendQueue) reset(peer Addr) error {
	if s.opts.Kind == DC {
		if t, ok := s.m.peers.get(peer); ok {
			s.pool.Unblacklist(mcsq.Flow(uint64(t)))
		}
	} else if n, ok := s.qpns.get(peer); ok {
		s.pool.Unblacklist(mcsq.QPN(n))
	}
	return nil
}

func (s *sendQueue) close() error {
	s.closed.Store(true)
	for s.inflight.Load() != 0 {
		if s.e.caller {
			if n, ok := s.e.tryPoll(); ok && n > 0 {
				continue
			}
		}
		select {
		case <-s.idle:
		case <-s.e.gone:
			// The endpoint's Stop ended every WR; a post under way when
			// it closed is refused.
			for s.inflight.Load() != 0 {
				select {
				case <-s.idle:
				case <-s.space:
				}
			}
			return nil
		}
	}
	return s.q.Close()
}
