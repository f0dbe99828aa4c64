package mcsq

import (
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// PoolKind says how a pool's SQs connect.
type PoolKind uint8

const (
	// RC: each SQ is persistently connected to one target; its identifier
	// is a QPN (Pool.AddRC).
	RC PoolKind = iota + 1
	// DC: SQs connect on demand to the target of the WR they are bound
	// for and disconnect once idle; identifiers are flow IDs or 5-tuples.
	DC
)

func (k PoolKind) String() string {
	switch k {
	case RC:
		return "rc"
	case DC:
		return "dc"
	}
	return "kind?"
}

// PoolOptions configure Engine.NewPool.
type PoolOptions struct {
	Name string
	Kind PoolKind
	// SQs is the pool's size: DC SQs (default 64), or the most QPNs an RC
	// pool serves (default 1024).
	SQs int
	// SQDepth is the most WRs one SQ references at once, queued and in the
	// transport (default 64). A WR whose SQ is full waits at the head of
	// its queue (head-of-line).
	SQDepth int
	// IdleTimeout (DC): how long a DC SQ with nothing outstanding keeps
	// its identifier and its connection, so that the identifier's next WR
	// finds it connected. 0 closes the connection as soon as the last WR
	// is acknowledged. An idle SQ is taken for another identifier at once
	// when no SQ is free.
	IdleTimeout time.Duration
	// Unordered SQ connections let the target execute an SQ's WRs out of
	// order; by default they keep posting order (txn ConnOptions.Ordered).
	Unordered bool
	// OpTimeout is each WR's transport timeout (txn ConnOptions.OpTimeout;
	// 0 none). A WR that times out fails its SQ (CauseTimeout).
	OpTimeout time.Duration
	// Blacklist is the blacklist's capacity (default 4096). A failure
	// that finds it full is counted and the identifier is not blacklisted.
	Blacklist int
}

// SQ states.
const (
	sqFree   uint8 = iota // DC: unbound, no connection, on the free stack
	sqBound               // bound to an identifier (RC: always)
	sqIdle                // DC: bound, connected, nothing outstanding, on the idle list
	sqFailed              // failed: waiting for its WRs in the transport to flush
)

// sq is a send queue: a txn connection and a ring of references to WRs
// in the queues' tables (never copies).
type sq struct {
	state    uint8
	active   bool
	adopted  bool // RC on global QPNs: bound to the connection its QPN names
	conn     *txn.Conn
	rc       *rt.Conn // the transport connection below, kept to read why it failed
	peer     rt.PeerAddr
	target   int32 // DC: where conn goes, -1 none
	key      idKey
	id       ID
	fifo     []uint32 // refs (queue<<24 | slot) not yet handed to the transport
	fh, fn   int
	inflight int
	cause    Cause
	since    clock.Time
	prev     int32 // idle list
	next     int32
}

func (s *sq) push(ref uint32) {
	s.fifo[(s.fh+s.fn)%len(s.fifo)] = ref
	s.fn++
}

func (s *sq) pop() uint32 {
	r := s.fifo[s.fh]
	s.fh = (s.fh + 1) % len(s.fifo)
	s.fn--
	return r
}

type blackEntry struct {
	id    ID
	cause Cause
}

// Pool is a pool of SQs of one kind, fed by the queues that name it.
// Every method but Unblacklist belongs to the engine's poll loop (or runs
// before it starts).
type Pool struct {
	e      *Engine
	kind   PoolKind
	opts   PoolOptions
	sqs    []sq
	bind   *cam.Table[idKey] // identifier -> bindSQ entry
	bindSQ []int32
	free   []int32 // DC: free SQs
	idleH  int32   // DC: idle SQs, oldest first
	idleT  int32
	black  *cam.Table[idKey]
	blackE []blackEntry
	active []int32 // SQs holding WRs not yet handed to the transport
	cnt    counters
}

// NewPool makes a pool of SQs. DC SQs exist at once, unconnected; RC SQs
// are added with AddRC.
func (e *Engine) NewPool(o PoolOptions) (*Pool, error) {
	switch o.Kind {
	case RC:
		if o.SQs == 0 {
			o.SQs = 1024
		}
	case DC:
		if o.SQs == 0 {
			o.SQs = 64
		}
	default:
		return nil, fmt.Errorf("%w: PoolOptions.Kind must be RC or DC", ErrInvalidOptions)
	}
	if o.SQs < 1 || o.SQs > 1<<20 {
		return nil, fmt.Errorf("%w: PoolOptions.SQs %d out of range (1 to %d)", ErrInvalidOptions, o.SQs, 1<<20)
	}
	if o.SQDepth == 0 {
		o.SQDepth = 64
	}
	if o.Blacklist == 0 {
		o.Blacklist = 4096
	}
	if o.SQDepth < 1 || o.Blacklist < 1 || o.IdleTimeout < 0 || o.OpTimeout < 0 {
		return nil, fmt.Errorf("%w: PoolOptions.SQDepth and Blacklist must be positive, IdleTimeout and OpTimeout not negative", ErrInvalidOptions)
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("%v-pool%d", o.Kind, len(e.pools))
	}
	p := &Pool{e: e, kind: o.Kind, opts: o, idleH: -1, idleT: -1}
	var err error
	if p.bind, err = cam.New[idKey](cam.Options{Capacity: o.SQs, Name: o.Name + " bindings"}); err != nil {
		return nil, err
	}
	p.bindSQ = make([]int32, o.SQs)
	if p.black, err = cam.New[idKey](cam.Options{Capacity: o.Blacklist, Name: o.Name + " blacklist"}); err != nil {
		return nil, err
	}
	p.blackE = make([]blackEntry, o.Blacklist)
	p.active = make([]int32, 0, o.SQs)
	if o.Kind == DC {
		p.sqs = make([]sq, o.SQs)
		p.free = make([]int32, 0, o.SQs)
		for i := o.SQs - 1; i >= 0; i-- {
			p.initSQ(int32(i))
			p.free = append(p.free, int32(i))
		}
	} else {
		p.sqs = make([]sq, 0, o.SQs)
		p.free = make([]int32, 0, o.SQs) // RC on global QPNs: slots of dropped SQs
	}
	e.pools = append(e.pools, p)
	return p, nil
}

func (p *Pool) initSQ(x int32) {
	s := &p.sqs[x]
	*s = sq{fifo: make([]uint32, p.opts.SQDepth), target: -1, prev: -1, next: -1}
}

// Kind returns the pool's kind.
func (p *Pool) Kind() PoolKind { return p.kind }

// Name returns the pool's name.
func (p *Pool) Name() string { return p.opts.Name }

// SQs returns the pool's SQ count.
func (p *Pool) SQs() int { return len(p.sqs) }

// Stats returns the pool's counters (any goroutine).
func (p *Pool) Stats() Stats { return p.cnt.snapshot() }

// AddRC adds an RC SQ for qpn, connected to peer now and kept connected.
func (p *Pool) AddRC(qpn uint32, peer rt.PeerAddr) error {
	if p.kind != RC {
		return fmt.Errorf("%w: AddRC on a DC pool", ErrWrongKind)
	}
	if p.qpnMode() {
		return fmt.Errorf("%w: the endpoint runs on global QP numbers (rt.Options.QPN), which its transport hands out: open the connection with Pool.OpenRC and post the QPN it returns", ErrInvalidOptions)
	}
	if qpn > 1<<24-1 {
		return fmt.Errorf("%w: QPN %#x is wider than 24 bits", ErrBadWR, qpn)
	}
	if len(p.sqs) == cap(p.sqs) {
		return fmt.Errorf("%w: RC pool %s is full (raise PoolOptions.SQs above %d)", ErrInvalidOptions, p.opts.Name, cap(p.sqs))
	}
	id := QPN(qpn)
	key := id.key()
	if _, ok := p.bind.Lookup(key); ok {
		return fmt.Errorf("%w: %v already has an SQ", ErrBadWR, id)
	}
	x := int32(len(p.sqs))
	p.sqs = p.sqs[:x+1]
	p.initSQ(x)
	s := &p.sqs[x]
	s.peer = peer
	if err := p.connect(x, peer, -1); err != nil {
		p.sqs = p.sqs[:x]
		return err
	}
	k, err := p.bind.Insert(key)
	if err != nil {
		return err
	}
	p.bindSQ[k] = x
	s.state, s.key, s.id = sqBound, key, id
	p.cnt.own[cBinds]++
	return nil
}

// qpnMode reports whether the engine's endpoint names its connections by
// global QP numbers (rt.Options.QPN): then an RC WR's QPN is translated
// through the transport's CAM to the connection it names.
func (p *Pool) qpnMode() bool { return p.e.qpn }

// OpenRC opens a connection to peer on an endpoint with global QP numbers
// and returns the QPN its transport gave it: RC WRs that name it go to an
// SQ bound to that connection (bound on the first such WR, through the
// CAM). A connection opened on the endpoint directly may be named the
// same way. Before the loop runs, or on the poll loop.
func (p *Pool) OpenRC(peer rt.PeerAddr) (uint32, error) {
	if p.kind != RC {
		return 0, fmt.Errorf("%w: OpenRC on a DC pool", ErrWrongKind)
	}
	if !p.qpnMode() {
		return 0, fmt.Errorf("%w: OpenRC needs an endpoint with global QP numbers (rt.Options.QPN.Enabled); without them name the QPN yourself with Pool.AddRC", ErrInvalidOptions)
	}
	c, err := p.e.ep.Open(peer, txn.ConnOptions{Ordered: !p.opts.Unordered, OpTimeout: p.opts.OpTimeout})
	if err != nil {
		return 0, err
	}
	return c.QPN(), nil
}

// adopt binds an SQ to the live connection global QPN qpn names (through
// the transport's CAM). ErrQPNNotInCAM when it names none.
func (p *Pool) adopt(qpn uint32) (int32, error) {
	c := p.e.ep.ConnByQPN(qpn)
	if c == nil {
		return -1, fmt.Errorf("%w: qpn %#x", ErrQPNNotInCAM, qpn)
	}
	var x int32
	if n := len(p.free); n > 0 {
		x = p.free[n-1]
		p.free = p.free[:n-1]
		p.initSQ(x)
	} else {
		if len(p.sqs) == cap(p.sqs) {
			return -1, fmt.Errorf("%w: %d SQs, qpn %#x", ErrRCPoolFull, cap(p.sqs), qpn)
		}
		x = int32(len(p.sqs))
		p.sqs = p.sqs[:x+1]
		p.initSQ(x)
	}
	s := &p.sqs[x]
	s.conn, s.rc, s.target, s.adopted = c, c.Transport(), -1, true
	id := QPN(qpn)
	if !p.bindTo(x, id.key(), id) {
		s.conn, s.rc, s.adopted = nil, nil, false
		p.free = append(p.free, x)
		return -1, fmt.Errorf("%w: %d SQs, qpn %#x", ErrRCPoolFull, cap(p.sqs), qpn)
	}
	return x, nil
}

// dropAdopted returns a failed adopted RC SQ's slot: its connection, and
// so its QPN, is gone for good.
func (p *Pool) dropAdopted(x int32) {
	s := &p.sqs[x]
	p.unbind(x)
	s.state, s.cause, s.adopted, s.conn, s.rc = sqFree, CauseNone, false, nil, nil
	p.free = append(p.free, x)
}

// connect opens SQ x's connection: RC to peer, DC to target (0-RTT).
func (p *Pool) connect(x int32, peer rt.PeerAddr, target int32) error {
	s := &p.sqs[x]
	co := txn.ConnOptions{Ordered: !p.opts.Unordered, OpTimeout: p.opts.OpTimeout}
	var c *txn.Conn
	var err error
	if p.kind == DC {
		c, err = p.e.ep.OpenEarly(peer, co)
	} else {
		c, err = p.e.ep.Open(peer, co)
	}
	if err != nil {
		return err
	}
	s.conn, s.rc, s.target = c, c.Transport(), target
	if p.kind == DC {
		p.cnt.own[cDCConnects]++
	}
	return nil
}

// disconnect closes SQ x's connection once its operations are done (the
// transport's close handshake runs on behind it).
func (p *Pool) disconnect(x int32) {
	s := &p.sqs[x]
	if s.conn == nil {
		return
	}
	_ = s.conn.Close()
	s.conn, s.target = nil, -1
	p.cnt.own[cDCDisconnects]++
}

// Unblacklist asks the poll loop to take id off the pool's blacklist; any
// goroutine may call it. WRs for id posted after the poll loop applies it
// (its next Poll) execute again; an RC SQ reconnects on its next WR.
func (p *Pool) Unblacklist(id ID) {
	p.e.cmdMu.Lock()
	p.e.cmds = append(p.e.cmds, cmd{pool: p, id: id})
	p.e.cmdPending.Store(true)
	p.e.cmdMu.Unlock()
}

func (p *Pool) unblacklist(id ID) {
	key := id.key()
	if _, ok := p.black.Delete(key); !ok {
		return
	}
	p.cnt.own[cBlacklistRemoves]++
	if p.kind == RC {
		if k, ok := p.bind.Lookup(key); ok {
			x := p.bindSQ[k]
			if s := &p.sqs[x]; s.state == sqFailed && s.inflight == 0 {
				if s.adopted {
					// Its connection's QPN is retired: the next WR naming
					// it finds it unknown to the CAM.
					p.dropAdopted(x)
				} else {
					s.state, s.cause = sqBound, CauseNone
				}
			}
		}
	}
}

// BlacklistEntry is one blacklisted identifier and why.
type BlacklistEntry struct {
	ID    ID
	Cause Cause
}

// Blacklist appends the pool's blacklist to dst. Poll-loop goroutine only
// (or after Stop).
func (p *Pool) Blacklist(dst []BlacklistEntry) []BlacklistEntry {
	p.black.Range(func(idx uint32, _ idKey) bool {
		dst = append(dst, BlacklistEntry{ID: p.blackE[idx].id, Cause: p.blackE[idx].cause})
		return true
	})
	return dst
}

func (p *Pool) blacklisted(key idKey) (Cause, bool) {
	if p.black.Len() == 0 {
		return CauseNone, false
	}
	k, ok := p.black.Lookup(key)
	if !ok {
		return CauseNone, false
	}
	return p.blackE[k].cause, true
}

func (p *Pool) blacklistAdd(key idKey, id ID, cause Cause) {
	k, err := p.black.Insert(key)
	if err != nil {
		return // full (counted by the SQ failure) or already there
	}
	p.blackE[k] = blackEntry{id: id, cause: cause}
	p.cnt.own[cBlacklistAdds]++
}

// takeSQ returns a DC SQ for a new identifier whose first WR goes to
// peer: an idle one already connected to peer (the connection serves on,
// no connect), else a free one, else the longest idle one (which loses its
// identifier and is reconnected) if retarget allows, else -1. An idle SQ
// taken loses its identifier at once.
func (p *Pool) takeSQ(peer *rt.PeerAddr, retarget bool) int32 {
	for x := p.idleH; x >= 0; x = p.sqs[x].next {
		if s := &p.sqs[x]; s.conn != nil && s.target >= 0 && p.e.targets[s.target] == *peer {
			p.unidle(x)
			p.unbind(x)
			return x
		}
	}
	if n := len(p.free); n > 0 {
		x := p.free[n-1]
		p.free = p.free[:n-1]
		return x
	}
	if x := p.idleH; x >= 0 && retarget {
		p.unidle(x)
		p.unbind(x)
		return x
	}
	return -1
}

func (p *Pool) bindTo(x int32, key idKey, id ID) bool {
	k, err := p.bind.Insert(key)
	if err != nil {
		return false
	}
	p.bindSQ[k] = x
	s := &p.sqs[x]
	s.state, s.key, s.id = sqBound, key, id
	p.cnt.own[cBinds]++
	return true
}

func (p *Pool) unbind(x int32) {
	s := &p.sqs[x]
	p.bind.Delete(s.key)
	s.key, s.id = idKey{}, ID{}
}

func (p *Pool) idle(x int32, now clock.Time) {
	s := &p.sqs[x]
	s.state, s.since = sqIdle, now
	s.prev, s.next = p.idleT, -1
	if p.idleT >= 0 {
		p.sqs[p.idleT].next = x
	} else {
		p.idleH = x
	}
	p.idleT = x
}

func (p *Pool) unidle(x int32) {
	s := &p.sqs[x]
	if s.prev >= 0 {
		p.sqs[s.prev].next = s.next
	} else {
		p.idleH = s.next
	}
	if s.next >= 0 {
		p.sqs[s.next].prev = s.prev
	} else {
		p.idleT = s.prev
	}
	s.prev, s.next = -1, -1
	s.state = sqBound
}

func (p *Pool) activate(x int32) {
	if s := &p.sqs[x]; !s.active {
		s.active = true
		p.active = append(p.active, x)
	}
}

// maybeRelease returns a DC SQ that has nothing left to the pool: at once
// (closing its connection) without an idle timeout, else to the idle list.
// A failed SQ returns once its flushed WRs have all come back.
func (p *Pool) maybeRelease(x int32, now clock.Time) {
	s := &p.sqs[x]
	if s.fn > 0 || s.inflight > 0 {
		return
	}
	p.e.epoch++ // an SQ may come free: a waiting WR may go (lookahead)
	switch {
	case s.state == sqFailed && p.kind == DC:
		s.state, s.cause = sqFree, CauseNone
		p.free = append(p.free, x)
	case s.state == sqFailed && p.kind == RC:
		// Stays failed, bound to its QPN, until Unblacklist (or at once, if
		// the blacklist had no room for it).
		if _, ok := p.blacklisted(s.key); !ok {
			if s.adopted {
				p.dropAdopted(x)
			} else {
				s.state, s.cause = sqBound, CauseNone
			}
		}
	case s.state == sqBound && p.kind == DC:
		if p.opts.IdleTimeout == 0 {
			p.disconnect(x)
			p.unbind(x)
			s.state = sqFree
			p.free = append(p.free, x)
			return
		}
		p.idle(x, now)
	}
}

// expireIdle closes DC SQs idle for IdleTimeout.
func (p *Pool) expireIdle(now clock.Time) {
	for p.idleH >= 0 {
		x := p.idleH
		s := &p.sqs[x]
		if now.Sub(s.since) < p.opts.IdleTimeout {
			return
		}
		p.unidle(x)
		p.disconnect(x)
		p.unbind(x)
		s.state = sqFree
		p.free = append(p.free, x)
		p.cnt.own[cIdleCloses]++
		p.e.epoch++
	}
}

// nextIdle returns when the oldest idle SQ expires.
func (p *Pool) nextIdle() (clock.Time, bool) {
	if p.idleH < 0 {
		return 0, false
	}
	return p.sqs[p.idleH].since.Add(p.opts.IdleTimeout), true
}

// Idle returns how many DC SQs are free (unbound, unconnected) and how
// many idle (bound and connected, nothing outstanding). Poll-loop
// goroutine only.
func (p *Pool) Idle() (free, idle int) {
	for x := p.idleH; x >= 0; x = p.sqs[x].next {
		idle++
	}
	return len(p.free), idle
}
