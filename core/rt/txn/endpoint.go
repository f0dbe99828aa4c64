package txn

import (
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/reorder"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// ErrBusy is matched (errors.Is) by a post refused for now: the context
// table, the reorder engine, the scheduler or the completion queue is
// full. Poll, drain completions, and post again. Nothing changed.
var ErrBusy = errors.New("txn: busy, poll and drain completions, then retry")

// Errors of Open and the posting calls that do not go away by retrying.
var (
	ErrClosed      = errors.New("txn: connection closed")
	ErrLocalRegion = errors.New("txn: local region refused")
	ErrTooLong     = fmt.Errorf("txn: message longer than %d bytes", MaxMessage)
)

// Reorder-engine spaces: an endpoint is initiator and target at once, so
// its own sequence numbers and its peers' live in separate spaces of the
// same CAM, keyed by the local CID.
const (
	spaceRSN     = reorder.SpaceRSN // our requests, for completion order and pull data lookup
	spaceSSN     = reorder.SpaceSSN // our solicited pushes, for grants
	spacePeerRSN = reorder.Space(2) // the peer's requests, for delivery order
	spacePeerSSN = reorder.Space(3) // the peer's solicited pushes, for grant order
)

// Endpoint is the transaction layer of one lcore over its own rt.Endpoint:
// single goroutine, share nothing, everything preallocated by New. It is
// an lcore stage (Poll). Stats may be read from other goroutines.
type Endpoint struct {
	opts    Options
	rt      *rt.Endpoint
	seg     int
	burst   int // the transport's Options.Burst: schedule's budget a poll
	regions regions
	ro      *reorder.Engine
	byEntry []int32 // reorder entry index -> xact index
	sch     *sched.Scheduler
	conns   []conn
	freeCon []int32
	xacts   []xact
	freeX   []int32
	cq      cq
	// reserved counts completions promised to outstanding operations, so
	// a post is refused rather than a completion dropped.
	reserved int
	grants   ring // target: connections with pushes waiting for a grant, round-robin
	granted  int  // target: bytes granted and not yet received
	now      clock.Time
	tearing  bool         // teardown runs: entries are taken, not left for their turn
	wheel    *clock.Wheel // operation timeouts
	fire     func(clock.TimerID, uint64)
	req      Request
	cnt      counters
	ioiCnt   ioiCounters
	// ioiHeld, ioiOff, ioiLen: the IOI receivers' windows (ioi.go).
	ioiHeld []uint64
	ioiOff  []uint32
	ioiLen  []uint16
	dx      dixEP // two-sided operations (send.go, recvq.go)

	// aw: connections whose awaiting may have changed (await.go).
	aw awaitSet
	// giveUps: connections to fail after the transport's Poll (faults.go).
	giveUps []int32
	// unpublished: a call between Polls may have counted; the next Poll
	// publishes even if it finds no work.
	unpublished bool
}

// New builds an endpoint and its transport.
func New(opts Options) (*Endpoint, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	seg, err := segmentFor(&o)
	if err != nil {
		return nil, err
	}
	r, err := rt.NewEndpoint(o.Transport)
	if err != nil {
		return nil, err
	}
	ro := r.Options()
	e := &Endpoint{opts: o, rt: r, seg: seg, burst: ro.Burst, regions: newRegions(o.MaxRegions), now: o.Transport.Clock.Now()}
	fail := func(err error) (*Endpoint, error) { return nil, errors.Join(err, r.Close()) }
	// Every xact holds at most two entries (RSN and SSN).
	e.ro, err = reorder.New(reorder.Options{Capacity: 2 * o.MaxOps, Seed: ro.Seed ^ 0x5eed})
	if err != nil {
		return fail(invalid("Options.MaxOps: %v", err))
	}
	e.byEntry = make([]int32, e.ro.Cap())
	e.sch, err = sched.New(sched.Options{Flows: ro.MaxConns, Items: 2 * o.MaxOps, Quantum: o.Quantum, RoundRobin: o.RoundRobin})
	if err != nil {
		return fail(invalid("scheduler: %v", err))
	}
	e.conns = make([]conn, ro.MaxConns)
	e.freeCon = make([]int32, 0, ro.MaxConns)
	for i := ro.MaxConns - 1; i >= 0; i-- {
		e.freeCon = append(e.freeCon, int32(i))
	}
	e.xacts = make([]xact, o.MaxOps)
	e.freeX = make([]int32, 0, o.MaxOps)
	for i := o.MaxOps - 1; i >= 0; i-- {
		e.freeX = append(e.freeX, int32(i))
	}
	e.ioiWindow()
	e.cq.buf = make([]Completion, o.CQSize)
	e.wheel, err = clock.NewWheel(clock.WheelOptions{Tick: ro.TimerTick, Timers: o.MaxOps, Start: e.now})
	if err != nil {
		return fail(invalid("timeout wheel: %v", err))
	}
	e.fire = e.fireTimeout
	e.grants = newRing(ro.MaxConns)
	e.aw.init(ro.MaxConns)
	e.giveUps = make([]int32, 0, ro.MaxConns)
	if err := e.dx.init(e, ro.MaxConns); err != nil {
		return fail(err)
	}
	r.SetULP((*transportULP)(e))
	return e, nil
}

// Transport returns the reliable transport below (for its stats).
func (e *Endpoint) Transport() *rt.Endpoint { return e.rt }

// Name names the stage.
func (e *Endpoint) Name() string { return "txn:" + e.rt.Name() }

// Segment returns the payload bytes per packet.
func (e *Endpoint) Segment() int { return e.seg }

// Register makes mem a region peers may push into (RemoteWrite) or pull
// from (RemoteRead), and local operations may name. The endpoint keeps mem
// until Deregister; the caller must not resize it.
func (e *Endpoint) Register(mem []byte, access Access) (Region, error) {
	return e.regions.register(mem, access)
}

// Deregister forgets a region. Operations already posted on it keep their
// slice of it until they complete.
func (e *Endpoint) Deregister(r Region) error { return e.regions.deregister(r.Key) }

// Completions moves up to len(out) completions into out and returns how
// many.
func (e *Endpoint) Completions(out []Completion) int {
	n := e.cq.pop(out)
	e.reserved -= n
	return n
}

// Outstanding returns the operations posted and not yet completed plus
// peers' requests in progress.
func (e *Endpoint) Outstanding() int { return len(e.xacts) - len(e.freeX) }

// Poll runs one round: the scheduler hands the transport what may be sent
// (new requests, segments, grants, pull data), then the transport receives
// a burst, fires its timers and transmits. It returns the work done.
func (e *Endpoint) Poll(now clock.Time) int {
	e.now = now
	e.rt.Tick(now) // what schedule sends is timed now
	n := e.wheel.Advance(now, e.fire)
	n += e.issueGrants()
	n += e.schedule(now)
	e.settleAwait() // before the transport's timers probe
	n += e.rt.Poll(now)
	if len(e.giveUps) > 0 {
		e.giveUpPending()
	}
	e.settleAwait() // after its ACKs and requests
	// Publishing reads every counter twice: an idle Poll of a busy loop
	// spent half its time on it. A call between Polls that may have
	// counted (a refused post) sets unpublished for the next Poll.
	if n > 0 || e.unpublished {
		e.unpublished = false
		e.publish()
		e.ioiCnt.publish()
	}
	return n
}

// WakeFDs implements lcore.Waker: the transport's port queue.
func (e *Endpoint) WakeFDs(fds []int) []int { return e.rt.WakeFDs(fds) }

// TakeBell implements lcore.BellTaker: the transport's port queue.
func (e *Endpoint) TakeBell(ring func()) { e.rt.TakeBell(ring) }

// NextDeadline returns when Poll next has timed work (transport timers,
// paced connections).
func (e *Endpoint) NextDeadline() (clock.Time, bool) {
	t, ok := e.rt.NextDeadline()
	if p, pok := e.sch.NextDeadline(); pok && (!ok || p < t) {
		t, ok = p, true
	}
	if p, pok := e.wheel.NextDeadline(); pok && (!ok || p < t) {
		t, ok = p, true
	}
	return t, ok
}

// Stop fails every outstanding operation (StatusConnFailed completions) and
// stops the transport, freeing its frames.
func (e *Endpoint) Stop(now clock.Time) {
	e.now = now
	for i := range e.conns {
		if e.conns[i].live {
			e.teardown(int32(i), rt.ErrStopped)
		}
	}
	e.rt.Stop(now)
	e.publish()
}

// Close stops (if needed) and releases the transport.
func (e *Endpoint) Close() error { return e.rt.Close() }

// Open starts a connection to peer. Operations may be posted at once; they
// wait in the scheduler until the connection is established, or, with
// opts.Early, go out at once behind the ConnOpen. Every option is checked
// before anything is taken (a slot here, a transport connection, a packet
// on the wire): a bad one is an error that changes nothing. Then the
// transport connection opens and the options are applied, none of which
// can fail any more.
func (e *Endpoint) Open(peer rt.PeerAddr, opts ConnOptions) (*Conn, error) {
	e.unpublished = true
	if err := checkConnOptions(&opts); err != nil {
		return nil, err
	}
	if len(e.freeCon) == 0 {
		return nil, rt.ErrTableFull
	}
	open := e.rt.Open
	if opts.Early {
		open = e.rt.OpenEarly
	}
	rc, err := open(peer)
	if err != nil {
		return nil, err
	}
	c := e.attach(rc)
	if c == nil {
		rc.Abort()
		return nil, rt.ErrTableFull
	}
	c.ordered = opts.Ordered
	c.opTimeout = opts.OpTimeout
	if opts.Weight > 0 {
		_ = e.sch.SetWeight(int(c.handle.idx), opts.Weight) // validated above
	}
	c.ioiOpen(opts.IOI)
	_ = e.dx.configure(e, int(c.handle.idx), opts.Index) // validated above
	return c.handle, nil
}

// OpenEarly is Open with opts.Early set: kept for the callers that open
// every connection for 0-RTT, it is no second way to open.
func (e *Endpoint) OpenEarly(peer rt.PeerAddr, opts ConnOptions) (*Conn, error) {
	opts.Early = true
	return e.Open(peer, opts)
}

// checkConnOptions reports the first option Open would refuse.
func checkConnOptions(opts *ConnOptions) error {
	if err := opts.Index.Validate(); err != nil {
		return fmt.Errorf("txn: ConnOptions.Index: %w", err)
	}
	if opts.OpTimeout < 0 {
		return fmt.Errorf("txn: ConnOptions.OpTimeout %v must not be negative", opts.OpTimeout)
	}
	if opts.Weight < 0 || opts.Weight > sched.MaxWeight {
		return fmt.Errorf("txn: ConnOptions.Weight %d is out of range (use 1..%d, or 0 for 1)", opts.Weight, sched.MaxWeight)
	}
	if opts.IOI != nil {
		if err := opts.IOI.Validate(); err != nil {
			return fmt.Errorf("txn: ConnOptions.IOI: %w", err)
		}
	}
	return nil
}

// attach gives a transport connection its transaction state.
func (e *Endpoint) attach(rc *rt.Conn) *conn {
	if len(e.freeCon) == 0 {
		return nil
	}
	i := e.freeCon[len(e.freeCon)-1]
	e.freeCon = e.freeCon[:len(e.freeCon)-1]
	c := &e.conns[i]
	gen := c.gen + 1
	s := e.opts.InitialSeq
	*c = conn{live: true, rc: rc, cid: rc.LocalCID(), gen: gen, head: -1, tail: -1, grantHead: -1, grantTail: -1,
		nextRSN: s, nextSSN: s, doneBase: s, grantBase: s, reqBase: s, ssnBase: s}
	c.handle = &Conn{e: e, idx: i, gen: gen}
	rc.SetULPContext(c) // connOf's answer, without a lookup
	if sw, ok := rc.Congestion().(*swift.Controller); ok {
		c.swift = sw
	}
	_ = e.sch.SetWeight(int(i), 1)
	return c
}

// transportULP is the Endpoint as its transport's ULP (rt.ULP), which
// keeps Deliver, Acked and Event out of the Endpoint's own API. What they
// may call back into is rt.ULP's rule (an operation completed by Acked
// closes its idle connection, Event aborts one it has no room for).
type transportULP Endpoint

func (u *transportULP) Deliver(rc *rt.Conn, h *wire.Header, p []byte) rt.Verdict {
	return (*Endpoint)(u).deliver(rc, h, p)
}

func (u *transportULP) Acked(rc *rt.Conn, w wire.Window, psn uint32, cookie uint64) {
	(*Endpoint)(u).onAcked(rc, w, psn, cookie)
}

func (u *transportULP) Event(ev rt.Event) { (*Endpoint)(u).onEvent(ev) }

// connOf returns the transaction state of a transport connection: the
// record attach hung on it (rt.Conn.SetULPContext), or nil once that
// record was torn down (it is then free, or serves another connection).
func (e *Endpoint) connOf(rc *rt.Conn) (int32, *conn) {
	c, _ := rc.ULPContext().(*conn)
	if c == nil || !c.live || c.rc != rc {
		return -1, nil
	}
	return c.handle.idx, c
}

// onEvent follows the transport's connection events.
func (e *Endpoint) onEvent(ev rt.Event) {
	switch ev.Kind {
	case rt.EventEstablished:
		i, c := e.connOf(ev.Conn)
		if c == nil {
			if c = e.attach(ev.Conn); c == nil {
				e.cnt.own[cConnRefused]++
				ev.Conn.Abort()
				return
			}
			e.emitConn(ConnEstablished, c.handle, nil)
			return
		}
		e.unblock(i, c)
		e.emitConn(ConnEstablished, c.handle, nil)
	case rt.EventClosed:
		if i, c := e.connOf(ev.Conn); c != nil {
			e.teardown(i, nil)
		}
	case rt.EventFailed:
		// Idempotent: a connection torn down already (Abort, Stop) is not
		// found, so nothing completes twice.
		if i, c := e.connOf(ev.Conn); c != nil {
			err := ev.Err
			if err == nil {
				err = rt.ErrAborted
			}
			e.teardown(i, err)
		}
	case rt.EventNack:
		// Only a ULP-error NACK is a refusal by the peer's transaction
		// layer; any other code (an "unexpected packet", say) leaves the
		// packet outstanding in the transport, and its ACK or abandonment
		// still comes.
		e.onRNR(ev)
		if ev.Nack.Code != wire.NackULPError {
			e.noticeDeferred(ev)
		}
		if ev.HasCookie && ev.Nack.Code == wire.NackULPError {
			if _, x := e.byCookie(ev.Cookie); x != nil && x.refusal == RefusalUnspecified {
				x.refusal = Refusal(ev.Nack.ULPCode)
				if x.refusal >= numRefusals {
					x.refusal = RefusalUnspecified
				}
			}
			e.resolve(ev.Cookie, StatusRemoteAccess)
		}
	case rt.EventAbandoned:
		// Its resync was acknowledged: the window has room again.
		if i, c := e.connOf(ev.Conn); c != nil {
			e.unblock(i, c)
		}
		e.resolve(ev.Cookie, StatusAbandoned)
	case rt.EventResynced:
		// A NACKed packet's resync was acknowledged: the window has room
		// again. Without this a connection whose last outstanding packets
		// were all refused waited for an ACK that never came.
		if i, c := e.connOf(ev.Conn); c != nil {
			e.unblock(i, c)
			e.awaitMark(i) // less outstanding
		}
	}
}

// onAcked resolves the packet a cookie names.
func (e *Endpoint) onAcked(rc *rt.Conn, _ wire.Window, _ uint32, cookie uint64) {
	if i, c := e.connOf(rc); c != nil {
		e.unblock(i, c)
		e.awaitMark(i) // less outstanding
	}
	e.resolve(cookie, StatusOK)
}

// unblock reopens a connection that waited for room in its windows
// (ErrWindowFull) or for its establishment.
func (e *Endpoint) unblock(i int32, c *conn) {
	if !c.blocked {
		return
	}
	c.blocked = false
	e.sch.SetBlocked(int(i), sched.ClassData, false)
	e.sch.SetBlocked(int(i), sched.ClassRequest, false)
}

func (e *Endpoint) publish() {
	e.cnt.publish()
	e.dx.publish()
	rs := e.ro.Stats()
	e.cnt.ro[0].Store(rs.Waits)
	e.cnt.ro[1].Store(rs.Released)
}
