package txn

import (
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt/reorder"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// The transaction contexts: one fixed array shared by both roles, a free
// list, and the lifecycle every context goes through whichever side it
// serves — taken (allocX) and linked to its connection, its sequence
// numbers registered (register), the transport's verdict on each of its
// packets (resolve), freed (freeXact) — and the end of a connection
// (teardown, maybeClose).

// role says which side of a transaction an xact holds.
type role uint8

const (
	roleInitiator role = iota + 1
	roleTarget
)

// xstate is where a transaction stands in its life. Each role has its
// own states; every move between them goes through setState, and the
// moves allowed are those of legalMoves, here and nowhere else. What a
// context still holds — reorder entries, a queued item, packets in
// flight, a notice owed — are counts and flags beside the state, and
// freeable is the one rule that decides when a target context goes.
type xstate uint8

const (
	stateFree xstate = iota // in the free list

	// Initiator.
	//
	//	initActive ──► initStopped ──► initDone ──► initCompleted
	//	     └─────────────────────────────┘ (and any of them ──► initCompleted at teardown)
	initActive  // posted: its packets go out, its answers come in
	initStopped // ended early (refused, abandoned, timed out, cancelled, its connection failing): sends nothing more, waits for what it sent
	initDone    // its completion is decided (status final); on an ordered connection it waits for its turn
	// initCompleted: the completion is posted; the context stays only for
	// its abort notice or for given-up packets still resolving.
	initCompleted

	// Target.
	//
	//	targetAdmitted ──► targetReleased ──► targetFailed
	//	     └────────────────────────────────────┘
	targetAdmitted // a peer's request: waits for its data, its grant or its turn
	targetReleased // handed to the ULP: a push is over, a pull serves its data
	// targetFailed: refused, given up by its initiator, or unable to go on
	// (its connection failing); it still takes its turn in the peer's
	// orders, then ends without reaching the ULP (OnAborted excepted).
	targetFailed

	numStates
)

var stateNames = [numStates]string{"free", "initActive", "initStopped", "initDone", "initCompleted",
	"targetAdmitted", "targetReleased", "targetFailed"}

func (s xstate) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "xstate(?)"
}

// legalMoves[from] has bit to set when from → to is a legal move. Taking
// (allocX) and freeing (freeXact) a context are not moves: they enter
// and leave the free list.
var legalMoves = [numStates]uint16{
	initActive:     1<<initStopped | 1<<initDone | 1<<initCompleted,
	initStopped:    1<<initDone | 1<<initCompleted,
	initDone:       1 << initCompleted,
	targetAdmitted: 1<<targetReleased | 1<<targetFailed,
	targetReleased: 1 << targetFailed,
}

// panicOnIllegalMove turns an illegal move into a panic (the tests set
// it); in production the move is counted (Stats.IllegalMoves) and made.
var panicOnIllegalMove = false

// setState moves context x to state to; staying put is always allowed.
func (e *Endpoint) setState(x *xact, to xstate) {
	from := x.state
	if from == to {
		return
	}
	if legalMoves[from]&(1<<to) == 0 {
		e.cnt.own[cIllegalMoves]++
		if panicOnIllegalMove {
			panic("txn: illegal transaction move " + from.String() + " → " + to.String())
		}
	}
	x.state = to
}

// stop records that initiator transaction x ended early; its status, set
// by the caller, says why. A transaction whose completion is decided
// already keeps its state (an expired held completion, a pull's request
// refused after its data came): only its status changes.
func (e *Endpoint) stop(x *xact) {
	if x.state == initActive {
		e.setState(x, initStopped)
	}
}

// stopped reports whether initiator transaction x ended early: only an
// early end sets a status other than StatusOK before the completion.
func (x *xact) stopped() bool { return x.status != StatusOK }

// freeable is the rule that frees a target context: it holds no entry in
// the peer's orders and no place in the grant queue, nothing of it is
// queued, in flight or owed to the peer, and a pull it serves (not
// failed) sent all its data.
func (x *xact) freeable() bool {
	if x.rsnHeld || x.ssnHeld || x.grantQ || x.inSched || x.unresolved > 0 || x.noticePending() {
		return false
	}
	return x.state == targetFailed || x.kind != OpPull || x.sentPkts == x.pkts
}

// xact is the context of one transaction on either side: fixed size, in a
// preallocated array; indexes travel as scheduler items and in cookies.
type xact struct {
	live      bool
	gen       uint32
	role      role
	state     xstate
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
	why        Refusal // target, failed: why
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

func (e *Endpoint) register(i int32, cid uint32, sp reorder.Space, seq uint32) error {
	k, err := e.ro.Register(cid, sp, seq)
	if err != nil {
		return err
	}
	e.byEntry[k] = i
	return nil
}

// allocX takes a free context and links it to connection ci.
func (e *Endpoint) allocX(ci int32, r role) (int32, *xact) {
	i := e.freeX[len(e.freeX)-1]
	e.freeX = e.freeX[:len(e.freeX)-1]
	x := &e.xacts[i]
	gen := x.gen + 1
	if gen == 0 {
		gen = 1
	}
	// Zeroed in place and filled field by field: a composite literal
	// stored through a pointer is built in a temporary and copied, and
	// the copy's wide loads stall on the narrow stores that built it.
	*x = xact{}
	x.live, x.gen, x.role, x.conn = true, gen, r, ci
	x.prev, x.next = -1, -1
	x.state = initActive
	if r == roleTarget {
		x.state = targetAdmitted
	}
	c := &e.conns[ci]
	if c.tail >= 0 {
		e.xacts[c.tail].next = i
		x.prev = c.tail
	} else {
		c.head = i
	}
	c.tail = i
	c.count++
	e.awaitMark(ci) // work in progress (await.go decides whether the peer has the move)
	return i, x
}

// freeXact unlinks and frees a context; its reorder entries must be gone.
func (e *Endpoint) freeXact(i int32) {
	x := &e.xacts[i]
	if x.kind == OpSend {
		e.sendFreed(x)
	}
	c := &e.conns[x.conn]
	if x.prev >= 0 {
		e.xacts[x.prev].next = x.next
	} else {
		c.head = x.next
	}
	if x.next >= 0 {
		e.xacts[x.next].prev = x.prev
	} else {
		c.tail = x.prev
	}
	c.count--
	e.awaitMark(x.conn)
	gen := x.gen
	*x = xact{gen: gen}
	e.freeX = append(e.freeX, i)
}

// byCookie returns the live context a cookie names.
func (e *Endpoint) byCookie(cookie uint64) (int32, *xact) {
	i := int32(uint32(cookie) &^ (noticeBit | grantBit | ioiCookieBits))
	if cookie>>32 == 0 || int(i) >= len(e.xacts) || i < 0 {
		return -1, nil
	}
	x := &e.xacts[i]
	if !x.live || uint64(x.gen) != cookie>>32 {
		return -1, nil
	}
	return i, x
}

// resolve is the transport's verdict on one packet of a transaction:
// acknowledged (StatusOK), refused by the peer's ULP, or abandoned.
func (e *Endpoint) resolve(cookie uint64, st Status) {
	if cookie == 0 {
		return
	}
	i, x := e.byCookie(cookie)
	if x == nil {
		e.cnt.own[cStaleCookie]++
		return
	}
	e.awaitMark(x.conn) // one packet fewer outstanding
	if cookie&noticeBit != 0 {
		e.noticeResolved(i, x, st)
		return
	}
	if cookie&grantBit != 0 {
		e.grantResolved(i, x, st)
		return
	}
	x.unresolved--
	e.ioiResolved(i, x, cookie, st)
	if x.givenUp {
		e.givenUpResolved(i, x)
		return
	}
	if x.kind == OpSend {
		st = e.sendResolved(x, st)
	}
	if x.role == roleTarget {
		// Pull data.
		if st != StatusOK && x.state != targetFailed {
			// The initiator waits for this data: tell it.
			e.setState(x, targetFailed)
			e.queueNotice(i, sched.ClassData)
		}
		e.maybeFreeTarget(i)
		return
	}
	if st != StatusOK && x.status == StatusOK {
		x.status = st
		e.stop(x)
		if x.solicited && !x.granted && x.ssnHeld {
			// No grant will come for a refused request: let the grant order
			// pass over this SSN.
			e.skipGrant(i, x)
		}
	}
	e.checkDone(i)
}

// teardown fails everything of a connection that failed, closed or was
// aborted: initiator operations complete in posting order with the status
// they already had, else StatusFlushed (Abort) or StatusConnFailed;
// peers' requests are dropped (their incast credit returned); contexts
// kept only for an abort notice are freed. Then OnConnEvent hears of it:
// ConnClosed when err is nil, else ConnFailed with err.
func (e *Endpoint) teardown(ci int32, err error) {
	c := &e.conns[ci]
	h, quiet := c.handle, c.quiet
	flush := StatusConnFailed
	if c.aborting {
		flush = StatusFlushed
	}
	e.tearing = true
	e.sch.Drop(int(ci), nil)
	for i := c.head; i >= 0; {
		x := &e.xacts[i]
		next := x.next
		x.inSched = false
		switch {
		case x.role == roleInitiator && x.state == initCompleted:
			e.freeXact(i) // its completion is out; only its notice was left
		case x.role == roleInitiator:
			st := x.status
			if st == StatusOK && (x.state != initDone || x.kind != OpPull) {
				// Not done; or a push or Send done here but still waiting
				// for its turn (an earlier operation unfinished, or its
				// notice unacknowledged): the target holds it behind that
				// one and drops it now, never handing it to its ULP. A
				// pull done here was served, so handed to the target ULP.
				st = flush
			}
			x.deferred = false
			e.complete(i, st)
		default:
			e.heldAtEnd(c, i) // target.go: OnAborted for a request held
			if x.granted && x.grantLeft > 0 {
				e.granted -= int(x.grantLeft)
			}
			if x.rsnHeld {
				e.ro.Take(c.cid, spacePeerRSN, x.rsn)
			}
			if x.ssnHeld {
				e.ro.Take(c.cid, spacePeerSSN, x.ssn)
			}
			e.freeXact(i)
		}
		i = next
	}
	// A solicited push that completed before its grant turn left a ready
	// SSN entry for the grant order to pass over (complete): take those.
	for ssn := c.grantBase; seqLT(ssn, c.nextSSN); ssn++ {
		e.ro.Take(c.cid, spaceSSN, ssn)
	}
	e.tearing = false
	e.recvTeardown(ci, flush)
	if c.inGrantRound {
		e.grants.remove(uint64(c.gen)<<32 | uint64(uint32(ci)))
	}
	e.sch.Unpace(int(ci))
	e.sch.SetBlocked(int(ci), sched.ClassData, false)
	e.sch.SetBlocked(int(ci), sched.ClassRequest, false)
	gen := c.gen
	*c = conn{gen: gen, head: -1, tail: -1}
	e.freeCon = append(e.freeCon, ci)
	switch {
	case quiet:
	case err == nil:
		e.emitConn(ConnClosed, h, nil)
	default:
		e.emitConn(ConnFailed, h, err)
	}
}

// maybeClose closes a connection the ULP is closing once it is idle.
func (e *Endpoint) maybeClose(ci int32) {
	c := &e.conns[ci]
	if c.live && c.closing && c.count == 0 && !c.closeSent {
		c.closeSent = true
		_ = c.rc.Close()
		e.awaitMark(ci) // now the peer's ConnClose is awaited
	}
}
