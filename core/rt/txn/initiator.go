package txn

import (
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// Solicit chooses between solicited and unsolicited push.
type Solicit uint8

const (
	// SolicitAuto: solicited when the message is larger than
	// Options.SolicitThreshold, or larger than one packet while the
	// connection's congestion window is below one packet.
	SolicitAuto Solicit = iota
	// SolicitAlways asks for a grant whatever the size.
	SolicitAlways
	// SolicitNever sends the data at once whatever the size.
	SolicitNever
)

// Op describes a push or a pull.
type Op struct {
	// Local and LocalAddr name the local bytes [LocalAddr, LocalAddr+Len):
	// the data a push sends, or where a pull's data lands. They are read
	// (push) or written (pull) while the operation is outstanding, and a
	// push's bytes must not change until it completes: every transmission,
	// resends too, reads them again (as an RDMA send buffer).
	Local     Region
	LocalAddr uint64
	Len       int
	// Remote names the target's registered region and the address in it.
	Remote wire.RegionRef
	// Tag is the ULP's own word, returned in the completion.
	Tag     uint64
	Solicit Solicit
	// Timeout ends the operation with StatusTimeout if it has not
	// completed this long after posting (0: ConnOptions.OpTimeout). It is
	// measured on the endpoint's clock, and the operation completes at the
	// deadline (in its turn on an ordered connection), whether or not its
	// packets are acknowledged: those still in flight are given up then
	// (see Cancel for the buffers).
	Timeout time.Duration
	// NonIdempotent keeps the operation's packets wholly in order: IOI
	// (ConnOptions.IOI) sprays only idempotent operations.
	NonIdempotent bool
}

// Push posts a push of op.Len local bytes into the peer's region. It
// returns the request sequence number. When the endpoint cannot take the
// operation now it returns an error matching ErrBusy and nothing changes.
func (h *Conn) Push(op Op) (rsn uint32, err error) { return h.e.post(h, OpPush, &op) }

// Pull posts a pull of op.Len bytes of the peer's region into local memory.
func (h *Conn) Pull(op Op) (rsn uint32, err error) { return h.e.post(h, OpPull, &op) }

func (e *Endpoint) post(h *Conn, kind OpKind, op *Op) (uint32, error) {
	e.unpublished = true
	c := h.live()
	if c == nil || c.closing {
		return 0, ErrClosed
	}
	if op.Len < 0 || op.Len > MaxMessage {
		return 0, ErrTooLong
	}
	mem, why := e.regions.span(op.Local.Key, op.LocalAddr, uint32(op.Len), 0)
	if why != refuseNone {
		return 0, fmt.Errorf("%w: local region %#x [%d, +%d): %v", ErrLocalRegion, op.Local.Key, op.LocalAddr, op.Len, why)
	}
	if len(e.freeX) == 0 || e.reserved >= len(e.cq.buf) || e.ro.Len()+2 > e.ro.Cap() || e.sch.Len() >= e.sch.Cap() {
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	solicited := false
	if kind == OpPush {
		switch op.Solicit {
		case SolicitAlways:
			solicited = true
		case SolicitAuto:
			solicited = e.opts.SolicitThreshold >= 0 && op.Len > e.opts.SolicitThreshold ||
				c.swift != nil && c.swift.Cwnd() < 1 && op.Len > e.seg
		}
	}
	i, x := e.allocX(h.idx, roleInitiator)
	x.kind, x.solicited = kind, solicited
	x.rsn = c.nextRSN
	x.length = uint32(op.Len)
	x.mem, x.remote, x.tag = mem, op.Remote, op.Tag
	x.posted = e.now
	x.pkts = e.packets(x.length)
	x.ioi.nonIdem = op.NonIdempotent
	if err := e.register(i, c.cid, spaceRSN, x.rsn); err != nil {
		e.freeXact(i)
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	x.rsnHeld = true
	if solicited {
		x.ssn = c.nextSSN
		if err := e.register(i, c.cid, spaceSSN, x.ssn); err != nil {
			e.ro.Take(c.cid, spaceRSN, x.rsn)
			e.freeXact(i)
			e.cnt.own[cBusy]++
			return 0, ErrBusy
		}
		x.ssnHeld = true
	}
	if !e.enqueue(h.idx, sched.ClassRequest, i) {
		e.ro.Take(c.cid, spaceRSN, x.rsn)
		if solicited {
			e.ro.Take(c.cid, spaceSSN, x.ssn)
		}
		e.freeXact(i)
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	c.nextRSN++
	if solicited {
		c.nextSSN++
		e.cnt.own[cSolicited]++
	} else if kind == OpPush {
		e.cnt.own[cUnsolicited]++
	}
	if kind == OpPush {
		e.cnt.own[cPushes]++
	} else {
		e.cnt.own[cPulls]++
	}
	to := op.Timeout
	if to == 0 {
		to = c.opTimeout
	}
	e.armTimeout(i, x, to)
	e.reserved++
	e.cnt.own[cPosted]++
	return x.rsn, nil
}

// packets returns how many data packets a message of n bytes takes.
func (e *Endpoint) packets(n uint32) uint32 {
	return max(1, (n+uint32(e.seg)-1)/uint32(e.seg))
}

// requestCost is what a packet without data costs in the scheduler.
const requestCost = 64

// firstCost is the scheduler cost of a transaction's next packet.
func (e *Endpoint) firstCost(x *xact) int {
	if x.notice == noticeWanted {
		return requestCost
	}
	if x.kind == OpPull && x.role == roleInitiator || x.solicited && !x.reqSent && x.role == roleInitiator ||
		x.role == roleTarget && x.kind == OpPush {
		return requestCost
	}
	return requestCost + int(min(x.length-x.sentPkts*uint32(e.seg), uint32(e.seg)))
}

// checkDone completes an initiator's transaction once nothing of it is
// pending, in posting order on an ordered connection.
func (e *Endpoint) checkDone(i int32) {
	x := &e.xacts[i]
	if !x.live || x.role != roleInitiator || x.state == initDone || x.state == initCompleted {
		return // completed already (an earlier call in this chain freed it)
	}
	switch {
	case x.stopped():
		// Packets given up (stopOp) reference nothing of the operation.
		if x.unresolved > 0 && !x.givenUp || x.inSched { // a queued item is dropped when picked
			return
		}
	case x.kind == OpPull:
		if !x.gotData || x.received != x.length {
			return
		}
	default: // push
		if x.sentPkts != x.pkts || x.unresolved > 0 {
			return
		}
	}
	e.setState(x, initDone)
	if x.stopped() && e.needsNotice(x) {
		if x.unresolved > 0 {
			x.notice = noticeHeld // queued when its given-up packets resolve
		} else {
			e.queueNotice(i, sched.ClassRequest)
		}
	}
	c := &e.conns[x.conn]
	if c.ordered {
		e.ro.MarkReady(c.doneBase, c.cid, spaceRSN, x.rsn)
		for {
			k, ok := e.ro.PopReady(c.cid, spaceRSN, &c.doneBase)
			if !ok {
				break
			}
			j := e.byEntry[k]
			e.xacts[j].rsnHeld = false
			e.completeInTurn(c, j) // cq.go
		}
		return
	}
	e.ro.Take(c.cid, spaceRSN, x.rsn)
	x.rsnHeld = false
	e.complete(i, x.status)
}

// complete posts the completion of initiator transaction i and frees it.
func (e *Endpoint) complete(i int32, st Status) {
	x := &e.xacts[i]
	c := &e.conns[x.conn]
	if x.timer != clock.NoTimer {
		e.wheel.Cancel(x.timer)
		x.timer = clock.NoTimer
	}
	if x.ssnHeld {
		if e.tearing {
			e.ro.Take(c.cid, spaceSSN, x.ssn)
		} else if k, ok := e.ro.Lookup(c.cid, spaceSSN, x.ssn); ok {
			// Its grant turn has not come yet (an earlier SSN is still
			// waiting): leave a ready entry that releaseGrants passes over,
			// so the grant order does not stall on a gap.
			e.ro.MarkReady(c.grantBase, c.cid, spaceSSN, x.ssn)
			e.byEntry[k] = -1
		}
		x.ssnHeld = false
	}
	if x.rsnHeld {
		e.ro.Take(c.cid, spaceRSN, x.rsn)
		x.rsnHeld = false
	}
	cp := e.cq.slot()
	if cp == nil {
		panic("txn: completion queue overflow despite reservation") // a bug, never the peer's doing
	}
	cp.Conn, cp.Tag, cp.Kind, cp.RSN = c.handle, x.tag, x.kind, x.rsn
	cp.Bytes, cp.Status = int(x.length), st
	cp.RemoteKey, cp.RemoteAddr = x.remote.Key, x.remote.Addr
	cp.Posted, cp.Done = x.posted, e.now
	if st == StatusRemoteAccess || st == StatusRemoteInvalid {
		cp.Refusal = x.refusal
	}
	if st == StatusOK {
		e.cnt.own[cCompleted]++
		e.cnt.own[cBytesCompleted] += uint64(x.length)
	} else {
		e.cnt.own[cCompletedErr]++
	}
	ci := x.conn
	if (x.noticePending() || x.givenUp && x.unresolved > 0) && !e.tearing {
		e.setState(x, initCompleted) // the context stays until its notice (and given-up packets) resolve
		if c.ordered && x.noticePending() {
			x.owesTurn = true
			c.noticesOwed++
		}
		return
	}
	e.freeXact(i)
	e.maybeClose(ci)
}

// skipGrant releases the SSN entry of a solicited push that will never be
// granted, keeping the grant order moving.
func (e *Endpoint) skipGrant(i int32, x *xact) {
	c := &e.conns[x.conn]
	e.ro.MarkReady(c.grantBase, c.cid, spaceSSN, x.ssn)
	e.releaseGrants(x.conn, c)
}

// onGrant handles a push grant from the target.
func (e *Endpoint) onGrant(ci int32, c *conn, h *wire.Header) rt.Verdict {
	k, ok := e.ro.Lookup(c.cid, spaceSSN, h.SSN)
	// An entry of no transaction (-1) is one left for the grant order to
	// pass over: its push completed (cancelled, timed out) before its turn.
	if !ok || e.byEntry[k] < 0 || e.xacts[e.byEntry[k]].rsn != h.RSN {
		e.cnt.own[cUnmatched]++
		return rt.Accept
	}
	if _, ok := e.ro.MarkReady(c.grantBase, c.cid, spaceSSN, h.SSN); !ok {
		e.cnt.own[cUnmatched]++
		return rt.Accept
	}
	e.releaseGrants(ci, c)
	return rt.Accept
}

// releaseGrants lets the solicited pushes whose grants arrived, in SSN
// order, queue their data.
func (e *Endpoint) releaseGrants(ci int32, c *conn) {
	for {
		k, ok := e.ro.PopReady(c.cid, spaceSSN, &c.grantBase)
		if !ok {
			return
		}
		j := e.byEntry[k]
		if j < 0 {
			continue // a transaction that completed before its turn
		}
		x := &e.xacts[j]
		x.ssnHeld = false
		if x.stopped() {
			e.checkDone(j)
			continue
		}
		x.granted = true
		e.cnt.own[cGrantsReceived]++
		if !e.enqueue(ci, sched.ClassData, j) {
			// The store holds 2×MaxOps items and each transaction queues at
			// most one at a time, so this cannot happen.
			e.fail(j, StatusConnFailed)
		}
	}
}

// fail stops an initiator transaction with st.
func (e *Endpoint) fail(i int32, st Status) {
	x := &e.xacts[i]
	if x.status == StatusOK {
		x.status = st
	}
	e.stop(x)
	e.checkDone(i)
}

// onPullData places pull data in the initiator's local span.
func (e *Endpoint) onPullData(c *conn, h *wire.Header, p []byte) rt.Verdict {
	k, ok := e.ro.Lookup(c.cid, spaceRSN, h.RSN)
	if !ok && !seqLT(h.RSN, c.nextRSN) {
		// Data of a pull never posted: its PSN is another's (forged).
		e.cnt.own[cMalformed]++
		return rt.Drop
	}
	if !ok {
		e.cnt.own[cUnmatched]++
		return rt.Accept
	}
	i := e.byEntry[k]
	x := &e.xacts[i]
	if x.kind != OpPull {
		// Pull data under the RSN of a push or Send (forged).
		e.cnt.own[cMalformed]++
		return rt.Drop
	}
	if x.state != initActive {
		e.cnt.own[cUnmatched]++
		return rt.Accept
	}
	if h.ReqLen != x.length || uint64(h.Offset)+uint64(len(p)) > uint64(x.length) {
		// Not our pull's data (forged): not acknowledged, so the packet
		// that holds this PSN still comes.
		e.cnt.own[cMalformed]++
		return rt.Drop
	}
	if v, ok := e.ioiAdmit(c, i, x, h, p); !ok {
		return v
	}
	copy(x.mem[h.Offset:], p)
	x.received += uint32(len(p))
	x.gotData = true
	e.cnt.own[cBytesPlaced] += uint64(len(p))
	e.checkDone(i)
	return rt.Accept
}
