package mcsq

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

const (
	maxQueues = 256     // a ref keeps the queue in 8 bits
	maxSlots  = 1 << 24 // and the slot in 24
	maxLen    = txn.MaxMessage
)

// Options configure New.
type Options struct {
	// Endpoint is the transaction endpoint the SQs' connections live on.
	// The engine polls it (do not add it as a stage of its own) and takes
	// every completion it produces: post on it only through the engine.
	// It may serve as a target at the same time.
	Endpoint *txn.Endpoint
	// MaxTargets bounds Engine.AddTarget (default 65536).
	MaxTargets int
	// Name labels the engine's stage.
	Name string
	// Foreign, if set, is handed every completion of the endpoint that is
	// not a WR's, on the poll loop: receive completions, and operations
	// the endpoint's owner posts on it directly with a Tag below 2^32 (a
	// WR's Tag never is). Without it they are dropped, as before: the
	// endpoint is the engine's alone.
	Foreign func(*txn.Completion)
}

type cmd struct {
	pool *Pool
	id   ID
}

// Engine is the adapter side of the MCSQs of one lcore: the distributor,
// the SQ pools, the completion path. It is an lcore stage; every method
// but AddTarget, Queue.Post/PostWait/Completions/Close/Stats,
// Pool.Unblacklist and the Stats calls belongs to the polling goroutine.
type Engine struct {
	opts    Options
	ep      *txn.Endpoint
	queues  []*Queue
	pools   []*Pool
	targets []rt.PeerAddr
	tmu     sync.Mutex
	// nTargets publishes how many targets exist (Post reads it).
	nTargets atomic.Uint32
	cbuf     []txn.Completion
	now      clock.Time
	stopped  bool
	dirty    []bool // per queue: a completion may release CQEs
	// epoch counts events that may let a waiting WR go (a completion, an
	// SQ failure or release, an idle SQ expiring, an unblacklist): the
	// lookahead rescans only after one.
	epoch uint64

	qpn bool // the endpoint names connections by global QPNs (rt.Options.QPN)

	cmdMu      sync.Mutex
	cmds       []cmd
	cmdScratch []cmd
	cmdPending atomic.Bool
}

// New makes an engine over a transaction endpoint.
func New(opts Options) (*Engine, error) {
	if opts.Endpoint == nil {
		return nil, fmt.Errorf("%w: Options.Endpoint is required (a txn.Endpoint the SQs connect on)", ErrInvalidOptions)
	}
	if opts.MaxTargets == 0 {
		opts.MaxTargets = 1 << 16
	}
	if opts.MaxTargets < 1 || opts.MaxTargets > 1<<24 {
		return nil, fmt.Errorf("%w: Options.MaxTargets %d out of range (1 to %d)", ErrInvalidOptions, opts.MaxTargets, 1<<24)
	}
	if opts.Name == "" {
		opts.Name = "mcsq"
	}
	return &Engine{opts: opts, ep: opts.Endpoint, targets: make([]rt.PeerAddr, opts.MaxTargets),
		cbuf: make([]txn.Completion, 64), now: opts.Endpoint.Transport().Now(),
		qpn: opts.Endpoint.Transport().Options().QPN.Enabled}, nil
}

// Endpoint returns the transaction endpoint below.
func (e *Engine) Endpoint() *txn.Endpoint { return e.ep }

// AddTarget names a peer DC WRs may go to. Any goroutine may call it; the
// target may be named by WRs posted after it returns.
func (e *Engine) AddTarget(peer rt.PeerAddr) (Target, error) {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	n := e.nTargets.Load()
	if int(n) == len(e.targets) {
		return 0, fmt.Errorf("%w: every target slot is used (raise Options.MaxTargets above %d)", ErrInvalidOptions, len(e.targets))
	}
	if !peer.IP.IsValid() {
		return 0, fmt.Errorf("%w: target address %v", ErrBadWR, peer.IP)
	}
	e.targets[n] = peer
	e.nTargets.Store(n + 1)
	return Target(n), nil
}

// Name implements lcore.Stage.
func (e *Engine) Name() string { return e.opts.Name }

// Holds reports whether one of the engine's SQs holds connection c. A
// layer that shares the endpoint's connection events (txn
// Options.OnConnEvent) tells by it the SQs' connections from the ones its
// peers opened: an SQ holds its connection from the open until after its
// ConnEstablished. Poll-loop goroutine only.
func (e *Engine) Holds(c *txn.Conn) bool {
	for _, p := range e.pools {
		for x := range p.sqs {
			if p.sqs[x].conn == c {
				return true
			}
		}
	}
	return false
}

// Poll runs one round on the poll loop: host commands (unblacklist), the
// distributor over each queue (one burst each), the SQs hand their WRs to
// the transport, the transport polls, its completions become CQEs, idle DC
// SQs expire, ordered queues release what their reorder buffer allows.
func (e *Engine) Poll(now clock.Time) int {
	e.now = now
	if len(e.dirty) != len(e.queues) {
		e.dirty = make([]bool, len(e.queues)) // setup only: queues are made before the loop runs
	}
	if e.cmdPending.Load() {
		e.applyCmds()
	}
	work := 0
	for _, q := range e.queues {
		work += e.distribute(q)
	}
	for _, p := range e.pools {
		work += e.pumpAll(p)
	}
	work += e.ep.Poll(now)
	work += e.drain()
	for _, p := range e.pools {
		if p.opts.IdleTimeout > 0 {
			p.expireIdle(now)
		}
		p.cnt.publish()
	}
	for i, q := range e.queues {
		if e.dirty[i] {
			e.dirty[i] = false
			q.release()
		}
		q.cnt.publish()
	}
	return work
}

// NextDeadline returns when Poll next has timed work.
func (e *Engine) NextDeadline() (clock.Time, bool) {
	t, ok := e.ep.NextDeadline()
	for _, p := range e.pools {
		if d, dok := p.nextIdle(); dok && (!ok || d < t) {
			t, ok = d, true
		}
	}
	return t, ok
}

func (e *Engine) applyCmds() {
	e.cmdMu.Lock()
	e.cmdScratch, e.cmds = e.cmds, e.cmdScratch[:0]
	e.cmdPending.Store(false)
	e.cmdMu.Unlock()
	for _, c := range e.cmdScratch {
		c.pool.unblacklist(c.id)
	}
	e.epoch++
}

// ref names a slot of a queue: the queue in the top 8 bits.
func ref(q *Queue, i uint32) uint32 { return uint32(q.idx)<<24 | i }

// distribute takes one burst of WRs off q's post ring, in posting order,
// and hands each to its SQ, until one cannot go: then the head waits
// (head-of-line) until a later Poll frees what it waits for, and the
// lookahead places what it can of the WRs behind it.
func (e *Engine) distribute(q *Queue) int {
	if q.sn == 0 && q.take() == 0 {
		return 0
	}
	work := 0
	la := q.opts.Lookahead
	for q.sn > 0 {
		i := q.stage[q.sh]
		s := &q.slots[i]
		// With the lookahead on, the head first tries for an SQ that needs
		// no new connection (a free one, or an idle one on its target's
		// peer); the lookahead then gives idle SQs connected to a peer to
		// WRs behind the head bound for that peer, and the head takes an
		// idle SQ that must reconnect only if one is left.
		why := e.place(q, i, s, la == 0 || q.overtook >= la)
		if why >= 0 && why != cHOLFence && la > 0 {
			work += e.lookahead(q)
			if why == cHOLNoSQ {
				why = e.place(q, i, s, true)
			}
		}
		if why >= 0 {
			q.cnt.own[why]++
			if !q.holding {
				q.holding, q.holSince = true, int64(e.now)
			}
			break
		}
		if q.holding {
			q.holding = false
			q.cnt.own[cHOLWaitNs] += uint64(int64(e.now) - q.holSince)
		}
		q.overtook, q.rescan = 0, true
		q.sh++
		q.sn--
		work++
	}
	return work
}

// lookahead runs while the head of q waits for an SQ (no SQ free, or its
// SQ full): it looks at up to Lookahead WRs behind the head, in posting
// order, and places each whose identifier no earlier waiting WR has — a
// WR for an identifier already bound to an SQ with room, a blacklisted
// identifier's (an error CQE), an unbound one's if a free SQ is left.
// Every WR it leaves puts its identifier on the held set, so no WR ever
// overtakes an earlier one of its own identifier; it stops at a local
// operation (a fence: nothing after it may start before it). At most
// Lookahead WRs overtake one waiting head, so the head waits no longer
// than the SQs take to finish those. A scan runs again only when an SQ
// may have changed (a completion, a release, a failure, an unblacklist) or
// the window has grown or the head is a new one.
func (e *Engine) lookahead(q *Queue) int {
	la := q.opts.Lookahead
	if q.overtook >= la {
		return 0
	}
	grown := false
	if q.sn < la+1 && q.sub.Len() > 0 {
		// Move the waiting WRs to the front and top the window up.
		copy(q.stage, q.stage[q.sh:q.sh+q.sn])
		q.sh = 0
		n := q.takeInto(q.stage[q.sn : la+1])
		q.sn += n
		grown = n > 0
	}
	if !grown && !q.rescan && q.scanEpoch == e.epoch {
		return 0
	}
	q.scanEpoch, q.rescan = e.epoch, false
	q.cnt.own[cLookScans]++
	q.held.reset()
	head := q.stage[q.sh]
	q.held.add(q.slots[head].wr.ID.key())
	work := 0
	keep := q.sh + 1 // entries before keep are still waiting, in order
	end := q.sh + q.sn
	k := q.sh + 1
	for ; k < min(end, q.sh+1+la) && q.overtook < la; k++ {
		i := q.stage[k]
		s := &q.slots[i]
		if s.wr.Op.local() {
			break
		}
		key := s.wr.ID.key()
		if q.held.has(key) || e.place(q, i, s, false) >= 0 {
			q.held.add(key)
			q.stage[keep] = i
			keep++
			continue
		}
		q.overtook++
		q.cnt.own[cOvertook]++
		work++
	}
	// The rest of the window (after a fence, or past the overtake bound)
	// keeps its place.
	n := copy(q.stage[keep:], q.stage[k:end])
	q.sn = keep + n - q.sh
	return work
}

// take moves a burst of posted WRs from the post ring to the (empty)
// stage.
func (q *Queue) take() int {
	q.sh, q.rescan = 0, true
	q.sn = q.takeInto(q.stage[:q.opts.Burst])
	return q.sn
}

// takeInto moves posted WRs from the post ring into dst, in posting
// order: each gets its sequence number and its place in the reorder
// buffer.
func (q *Queue) takeInto(dst []uint32) int {
	n := q.sub.DequeueBurst(dst)
	for _, i := range dst[:n] {
		s := &q.slots[i]
		q.nextSeq++
		s.seq, s.done, s.pool, s.sq = q.nextSeq, false, nil, -1
		if q.order != nil {
			q.order[(q.oh+q.on)&int(q.mask)] = i
			q.on++
		}
	}
	q.cnt.own[cPosted] += uint64(n)
	return n
}

// keySet is the lookahead's held identifiers: open addressing over a
// power-of-two table, cleared in O(1) by a generation stamp.
type keySet struct {
	keys []idKey
	gen  []uint32
	cur  uint32
	mask uint64
}

func newKeySet(n int) keySet {
	size := 1 << bits.Len(uint(2*n+1))
	return keySet{keys: make([]idKey, size), gen: make([]uint32, size), cur: 1, mask: uint64(size - 1)}
}

func (h *keySet) reset() {
	h.cur++
	if h.cur == 0 {
		clear(h.gen)
		h.cur = 1
	}
}

func (h *keySet) slot(k idKey) uint64 {
	return cam.HashWords(k.kind, k.val, 0x686f6c64) & h.mask
}

func (h *keySet) has(k idKey) bool {
	for x := h.slot(k); h.gen[x] == h.cur; x = (x + 1) & h.mask {
		if h.keys[x] == k {
			return true
		}
	}
	return false
}

func (h *keySet) add(k idKey) {
	x := h.slot(k)
	for ; h.gen[x] == h.cur; x = (x + 1) & h.mask {
		if h.keys[x] == k {
			return
		}
	}
	h.keys[x], h.gen[x] = k, h.cur
}

// place distributes one WR; it returns -1 when the WR went (to an SQ, or
// completed at once), else the head-of-line counter saying why it waits.
// retarget lets an unbound DC identifier take an idle SQ connected to
// another peer (it reconnects).
func (e *Engine) place(q *Queue, i uint32, s *slot, retarget bool) int {
	wr := &s.wr
	if wr.Op.local() {
		if q.outstanding > 0 {
			return cHOLFence
		}
		e.runLocal(q, i, s)
		return -1
	}
	p := q.opts.DC
	if wr.ID.Kind == KindQPN {
		p = q.opts.RC
	}
	key := wr.ID.key()
	if cause, ok := p.blacklisted(key); ok {
		q.cnt.own[cBlacklistedWRs]++
		e.complete(q, i, s, StatusBlacklisted, cause, ErrBlacklisted, 0)
		return -1
	}
	var x int32
	if k, ok := p.bind.Lookup(key); ok {
		x = p.bindSQ[k]
		sqx := &p.sqs[x]
		if sqx.fn+sqx.inflight >= p.opts.SQDepth || sqx.state == sqFailed {
			return cHOLSQFull
		}
		if sqx.state == sqIdle {
			p.unidle(x)
		}
		p.cnt.own[cBoundHits]++
	} else if p.kind == RC {
		if !p.qpnMode() {
			e.complete(q, i, s, StatusUnknownID, CauseNone, ErrUnknownQPN, 0)
			return -1
		}
		// Global QPNs: the WR's QPN names a connection through the
		// transport's CAM; an SQ is bound to that connection.
		var err error
		if x, err = p.adopt(uint32(wr.ID.N)); err != nil {
			cause := CauseNone
			if errors.Is(err, ErrQPNNotInCAM) {
				cause = CauseUnknownQPN
				p.cnt.own[cFailBase+int(cause)]++
				p.blacklistAdd(key, wr.ID, cause)
			}
			e.complete(q, i, s, StatusUnknownID, cause, err, 0)
			return -1
		}
	} else {
		if x = p.takeSQ(&e.targets[wr.Target], retarget); x < 0 {
			return cHOLNoSQ
		}
		if !p.bindTo(x, key, wr.ID) {
			// Cannot happen: the binding table holds one entry per SQ.
			p.free = append(p.free, x)
			return cHOLNoSQ
		}
	}
	s.pool, s.sq = p, x
	p.sqs[x].push(ref(q, i))
	p.activate(x)
	q.outstanding++
	return -1
}

// pumpAll lets every SQ with queued WRs hand them to the transport.
func (e *Engine) pumpAll(p *Pool) int {
	work, n := 0, 0
	for _, x := range p.active {
		work += e.pump(p, x)
		if p.sqs[x].fn > 0 {
			p.active[n] = x
			n++
		} else {
			p.sqs[x].active = false
			p.maybeRelease(x, e.now)
		}
	}
	p.active = p.active[:n]
	return work
}

// pump hands SQ x's queued WRs to its connection, in order, connecting
// (or, for a DC SQ whose next WR goes elsewhere, reconnecting) first.
func (e *Engine) pump(p *Pool, x int32) int {
	s := &p.sqs[x]
	work := 0
	for s.fn > 0 {
		r := s.fifo[s.fh]
		q := e.queues[r>>24]
		i := r & maxSlots1
		sl := &q.slots[i]
		if p.kind == DC {
			t := int32(sl.wr.Target)
			if s.conn != nil && s.inflight == 0 && !s.conn.Live() {
				// The transport ended the connection while it carried
				// nothing of ours (an idle one): connect afresh.
				_ = s.conn.Abort()
				s.conn, s.target = nil, -1
			}
			if s.conn != nil && s.target != t {
				if e.targets[s.target] == e.targets[t] {
					// Another target on the same peer: a connection is
					// between endpoints, the WR names the region.
					s.target = t
				} else {
					if s.inflight > 0 {
						return work // the earlier WRs finish on the old target first
					}
					p.disconnect(x)
					p.cnt.own[cDCRetarget]++
				}
			}
			if s.conn == nil {
				if err := p.connect(x, e.targets[t], t); err != nil {
					p.cnt.own[cConnectWaits]++
					return work
				}
			}
		} else if s.conn == nil {
			if err := p.connect(x, s.peer, -1); err != nil {
				p.cnt.own[cConnectWaits]++
				return work
			}
		}
		err := e.issue(s, q, i, sl)
		switch {
		case err == nil:
			s.pop()
			s.inflight++
			work++
		case errors.Is(err, txn.ErrBusy):
			return work
		case errors.Is(err, txn.ErrClosed):
			// The connection ended with nothing of ours in it (an idle
			// connection the transport failed): the SQ fails now.
			e.failSQ(p, x, causeOfConn(s.rc))
			return work
		default:
			s.pop()
			q.outstanding--
			why := ErrLocalRegion
			if !errors.Is(err, txn.ErrLocalRegion) {
				why = ErrRefusedWR
			}
			e.complete(q, i, sl, StatusLocalError, CauseNone, fmt.Errorf("%w: %v", why, err), 0)
		}
	}
	return work
}

// issue hands one WR to the transport; the txn tag names its slot.
func (e *Engine) issue(s *sq, q *Queue, i uint32, sl *slot) error {
	wr := &sl.wr
	op := txn.Op{Local: wr.Local, LocalAddr: wr.LocalAddr, Len: wr.Len, Remote: wr.Remote,
		Tag: uint64(sl.gen)<<32 | uint64(ref(q, i))}
	var err error
	switch wr.Op {
	case OpPush:
		_, err = s.conn.Push(op)
	case OpPull:
		_, err = s.conn.Pull(op)
	case OpSend:
		_, err = s.conn.Send(op)
	default:
		err = fmt.Errorf("%w: op %v cannot go to an SQ", ErrBadWR, wr.Op)
	}
	return err
}

const maxSlots1 = maxSlots - 1

// drain turns the transport's completions into CQEs.
func (e *Engine) drain() int {
	work := 0
	for {
		n := e.ep.Completions(e.cbuf)
		for k := range e.cbuf[:n] {
			e.onCompletion(&e.cbuf[k])
		}
		work += n
		if n < len(e.cbuf) {
			return work
		}
	}
}

func (e *Engine) onCompletion(c *txn.Completion) {
	if c.Kind == txn.OpRecv || c.Tag>>32 == 0 {
		// Not a WR's: a slot's generation is never 0.
		if e.opts.Foreign != nil {
			e.opts.Foreign(c)
		}
		return
	}
	r := uint32(c.Tag)
	if int(r>>24) >= len(e.queues) {
		return
	}
	q := e.queues[r>>24]
	i := r & maxSlots1
	if int(i) >= len(q.slots) {
		return
	}
	sl := &q.slots[i]
	if sl.gen != uint32(c.Tag>>32) || sl.done || sl.pool == nil {
		return
	}
	p, x := sl.pool, sl.sq
	s := &p.sqs[x]
	e.epoch++
	s.inflight--
	q.outstanding--
	switch {
	case c.Status == txn.StatusOK:
		e.complete(q, i, sl, StatusOK, CauseNone, nil, c.Bytes)
	case e.stopped:
		e.complete(q, i, sl, StatusFlushed, CauseNone, ErrFlushed, 0)
	default:
		if s.state != sqFailed {
			e.failSQ(p, x, causeOf(c.Status, s.rc))
		}
		e.complete(q, i, sl, StatusSQFailed, s.cause, ErrSQFailed, 0)
		sl.cqe.TxnStatus = c.Status
	}
	if s.fn == 0 && !s.active {
		p.maybeRelease(x, e.now)
	}
}

// failSQ stops SQ x: its identifier goes on the blacklist, the WRs it
// holds that the transport never saw complete as blacklisted (never
// executed), the connection is aborted (the WRs in it complete as
// StatusSQFailed when their flushed completions are drained), and a DC SQ
// gives its identifier up and returns to the pool once those are in.
func (e *Engine) failSQ(p *Pool, x int32, cause Cause) {
	s := &p.sqs[x]
	e.epoch++
	s.state, s.cause = sqFailed, cause
	p.cnt.own[cSQFailures]++
	p.cnt.own[cFailBase+int(cause)]++
	p.blacklistAdd(s.key, s.id, cause)
	for s.fn > 0 {
		r := s.pop()
		q := e.queues[r>>24]
		i := r & maxSlots1
		q.outstanding--
		q.cnt.own[cBlacklistedWRs]++
		e.complete(q, i, &q.slots[i], StatusBlacklisted, cause, ErrBlacklisted, 0)
	}
	if c := s.conn; c != nil {
		s.conn, s.target = nil, -1
		_ = c.Abort()
	}
	if p.kind == DC {
		p.unbind(x)
	}
}

func causeOf(st txn.Status, rc *rt.Conn) Cause {
	switch st {
	case txn.StatusRemoteAccess, txn.StatusRemoteAbandoned, txn.StatusRemoteInvalid:
		return CauseRemoteError
	case txn.StatusAbandoned, txn.StatusRNRRetryExceeded:
		return CauseRetryExhausted
	case txn.StatusTimeout:
		return CauseTimeout
	}
	return causeOfConn(rc)
}

func causeOfConn(rc *rt.Conn) Cause {
	if rc == nil {
		return CauseOther
	}
	switch err := rc.Err(); {
	case errors.Is(err, rt.ErrRetryExhausted):
		return CauseRetryExhausted
	case errors.Is(err, rt.ErrRefused):
		return CauseRefused
	case errors.Is(err, rt.ErrOpenTimeout):
		return CauseUnreachable
	case errors.Is(err, rt.ErrPeerReset), errors.Is(err, rt.ErrIdleTimeout):
		return CausePeerGone
	case errors.Is(err, rt.ErrPeerFatal):
		return CauseRemoteError
	}
	return CauseOther
}

// complete decides a WR's CQE: posted at once in unordered mode, released
// by the reorder buffer at the end of the Poll in ordered mode.
func (e *Engine) complete(q *Queue, i uint32, s *slot, st Status, cause Cause, err error, bytes int) {
	s.done = true
	s.cqe = CQE{Seq: s.seq, Count: 1, Cookie: s.wr.Cookie, ID: s.wr.ID, Op: s.wr.Op, Status: st, Cause: cause, Err: err, Bytes: bytes}
	if st == StatusOK {
		q.cnt.own[cCompleted]++
	} else {
		q.cnt.own[cCompletedErr]++
	}
	if q.order == nil {
		q.emit(i)
		return
	}
	e.dirty[q.idx] = true
}

// emit posts slot i's CQE on the CQ (which has room for every slot).
func (q *Queue) emit(i uint32) {
	one := [1]uint32{i}
	q.cq.EnqueueBulk(one[:])
	q.cnt.own[cCQEs]++
}

// release pops the reorder buffer's completed head in posting order,
// folding each run of successful remote WRs into one CQE (at most
// MaxCoalesce WRs): the run's earlier slots are freed here, the CQE is
// the last one's.
func (q *Queue) release() {
	run, last := 0, uint32(0)
	for q.on > 0 {
		i := q.order[q.oh]
		s := &q.slots[i]
		if !s.done {
			break
		}
		q.oh = (q.oh + 1) & int(q.mask)
		q.on--
		ok := s.cqe.Status == StatusOK && s.wr.Op.remote()
		if ok && run > 0 && run < q.opts.MaxCoalesce {
			q.freeSlot(last)
			run++
			s.cqe.Count = run
			last = i
			q.cnt.own[cCoalesced]++
			continue
		}
		if run > 0 {
			q.emit(last)
			run = 0
		}
		if ok {
			run, last = 1, i
			continue
		}
		q.emit(i)
	}
	if run > 0 {
		q.emit(last)
	}
}

// freeSlot returns a slot whose WR a later CQE covers.
func (q *Queue) freeSlot(i uint32) {
	s := &q.slots[i]
	s.wr, s.cqe = WR{}, CQE{}
	one := [1]uint32{i}
	q.free.EnqueueBulk(one[:])
	q.signal()
}

// runLocal executes a local operation, in stream order: every WR posted
// before it has completed (the distributor's fence), none after it has
// started.
func (e *Engine) runLocal(q *Queue, i uint32, s *slot) {
	wr := &s.wr
	q.cnt.own[cLocalOps]++
	var err error
	var reg txn.Region
	switch wr.Op {
	case OpRegister:
		reg, err = e.ep.Register(wr.Mem, wr.Access)
		if err != nil {
			err = fmt.Errorf("%w: %v", ErrRegisterLocal, err)
		}
	case OpDeregister:
		if err = e.ep.Deregister(wr.Local); err != nil {
			err = fmt.Errorf("%w: deregister %#x: %v", ErrLocalRegion, wr.Local.Key, err)
		}
	case OpCopy:
		var src, dst []byte
		if src, err = e.ep.LocalSpan(wr.Local, wr.LocalAddr, wr.Len); err == nil {
			if dst, err = e.ep.LocalSpan(wr.Dst, wr.DstAddr, wr.Len); err == nil {
				copy(dst, src)
			}
		}
		if err != nil {
			err = fmt.Errorf("%w: copy: %v", ErrLocalRegion, err)
		}
	}
	if err != nil {
		e.complete(q, i, s, StatusLocalError, CauseNone, err, 0)
		return
	}
	e.complete(q, i, s, StatusOK, CauseNone, nil, wr.Len)
	s.cqe.Region = reg
}

// Stop flushes everything: WRs not yet handed to the transport complete
// as StatusFlushed, the endpoint stops (its operations flush), every
// queue's CQ gets its CQEs and every queue is closed.
func (e *Engine) Stop(now clock.Time) {
	e.now = now
	e.stopped = true
	if len(e.dirty) != len(e.queues) {
		e.dirty = make([]bool, len(e.queues))
	}
	for _, q := range e.queues {
		q.closed.Store(true)
		for {
			for q.sn > 0 {
				i := q.stage[q.sh]
				q.sh++
				q.sn--
				e.complete(q, i, &q.slots[i], StatusFlushed, CauseNone, ErrFlushed, 0)
			}
			if q.take() == 0 {
				break
			}
		}
	}
	for _, p := range e.pools {
		for x := range p.sqs {
			s := &p.sqs[x]
			for s.fn > 0 {
				r := s.pop()
				q := e.queues[r>>24]
				i := r & maxSlots1
				q.outstanding--
				e.complete(q, i, &q.slots[i], StatusFlushed, CauseNone, ErrFlushed, 0)
			}
		}
		p.active = p.active[:0]
	}
	e.ep.Stop(now)
	e.drain()
	for i, q := range e.queues {
		if e.dirty[i] {
			e.dirty[i] = false
			q.release()
		}
		q.cnt.publish()
	}
	for _, p := range e.pools {
		p.cnt.publish()
	}
}
