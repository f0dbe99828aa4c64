package txn

import (
	"errors"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// enqueue queues transaction i's next packet on connection ci's class.
func (e *Endpoint) enqueue(ci int32, cl sched.Class, i int32) bool {
	x := &e.xacts[i]
	if e.sch.Enqueue(int(ci), cl, uint32(i), e.firstCost(x)) != nil {
		return false
	}
	x.inSched = true
	e.awaitMark(ci) // ours to send: not the peer's move
	return true
}

// schedule hands the transport up to one burst of packets, as the
// scheduler picks them: connections in deficit round-robin, grants and
// data before new requests within one, each gated by its windows and
// paced by its congestion window.
func (e *Endpoint) schedule(now clock.Time) int {
	budget := e.burst // not rt.Options(): a copy of every option each poll
	sent := 0
	for sent < budget {
		flow, cl, item, ok := e.sch.Next(now)
		if !ok {
			break
		}
		ci, i := int32(flow), int32(item)
		x := &e.xacts[i]
		x.inSched = false
		c := &e.conns[ci]
		e.awaitMark(ci) // sent, skipped or requeued: settled after this round
		if !c.live || !x.live || x.conn != ci {
			continue
		}
		if x.notice == noticeWanted {
			if !e.sendNotice(flow, cl, item, c, x, i) {
				break
			}
			sent++
			continue
		}
		if x.role == roleInitiator && x.stopped() {
			e.checkDone(i)
			continue
		}
		if x.role == roleTarget && x.state == targetFailed {
			e.maybeFreeTarget(i)
			continue
		}
		var sh rt.SendHeader
		payload := e.nextPacket(c, x, i, &sh)
		psn, err := c.rc.Send(sh, payload)
		if err != nil {
			if errors.Is(err, rt.ErrBusy) {
				_ = e.sch.Requeue(flow, cl, item, e.firstCost(x))
				x.inSched = true
				if err == rt.ErrWindowFull || err == rt.ErrNotEstablished {
					// This connection's own ACKs (or its establishment)
					// reopen it; the others go on.
					e.sch.SetBlocked(flow, cl, true)
					c.blocked = true
					continue
				}
				break // pool or CAM: nobody can send until a Poll
			}
			// The connection is closing or failed: its teardown follows.
			if x.role == roleInitiator {
				e.fail(i, StatusConnFailed)
			} else {
				e.setState(x, targetFailed)
				e.maybeFreeTarget(i)
			}
			continue
		}
		sent++
		if x.kind == OpSend {
			x.notePSN(psn)
		}
		e.advance(ci, c, x, i, cl)
		if c.swift != nil {
			if gap := c.swift.PacingGap(); gap > 0 {
				// Never pace past the retransmit timeout: a packet held
				// longer than a loss would be waits for nothing (and on
				// poll loops that sleep, inflated RTTs would otherwise
				// stretch a collapsed window's gap to seconds).
				gap = min(gap, c.rc.RTO())
				e.sch.PaceUntil(flow, now.Add(gap))
				e.cnt.own[cPaced]++
			}
		}
	}
	return sent
}

// sendNotice hands context x's abort notice to the transport. It returns
// false when nothing more can be sent in this round (the item is back in
// its queue).
func (e *Endpoint) sendNotice(flow int, cl sched.Class, item uint32, c *conn, x *xact, i int32) bool {
	var sh rt.SendHeader
	e.noticePacket(c, x, i, &sh)
	psn, err := c.rc.Send(sh, nil)
	switch {
	case err == nil:
		x.notice = noticeOut
		x.noticePSN, x.noticeWin = psn, sh.Type.Window()
		e.cnt.own[cNoticesSent]++
		return true
	case errors.Is(err, rt.ErrBusy):
		_ = e.sch.Requeue(flow, cl, item, e.firstCost(x))
		x.inSched = true
		if err == rt.ErrWindowFull || err == rt.ErrNotEstablished {
			e.sch.SetBlocked(flow, cl, true)
			c.blocked = true
			return true // the others go on
		}
		return false
	}
	// The connection is closing or failed: its teardown frees the context.
	x.notice = noticeNone
	if x.role == roleTarget {
		e.maybeFreeTarget(i)
	} else if x.state == initCompleted {
		e.freeXact(i)
		e.maybeClose(x.conn)
	}
	return true
}

// nextPacket describes transaction x's next packet in sh and returns its
// payload (a slice of registered memory; the transport copies it).
func (e *Endpoint) nextPacket(c *conn, x *xact, i int32, sh *rt.SendHeader) []byte {
	if x.kind == OpSend {
		return e.sendPacket(x.conn, x, i, sh)
	}
	sh.RSN, sh.SSN, sh.ReqLen = x.rsn, x.ssn, x.length
	sh.Cookie = x.cookie(i)
	if x.role == roleInitiator {
		sh.Ext = wire.Ext{Present: wire.ExtRegion, Region: x.remote}
		if c.ordered {
			sh.Flags |= wire.FlagOrdered
		}
		switch {
		case x.kind == OpPull:
			sh.Type = wire.TypePullRequest
			return nil
		case x.solicited && !x.reqSent:
			sh.Type = wire.TypePushRequest
			return nil
		case x.solicited:
			sh.Type = wire.TypePushSolicitedData
		default:
			sh.Type = wire.TypePushUnsolicitedData
		}
		// The source belongs to the endpoint until the push completes,
		// and it completes only once every packet resolved.
		sh.PayloadStable = true
	} else {
		if x.kind == OpPush {
			sh.Type = wire.TypePushGrant
			sh.Cookie |= grantBit // its fate matters: an abandoned grant is sent again
			return nil
		}
		sh.Type = wire.TypePullData
	}
	off := x.sentPkts * uint32(e.seg)
	end := min(off+uint32(e.seg), x.length)
	sh.Offset = off
	if x.sentPkts+1 == x.pkts {
		sh.Flags |= wire.FlagLastOfMessage
	}
	e.ioiMark(c, x, sh)
	return x.mem[off:end]
}

// advance records that x's packet went out and queues its next one.
func (e *Endpoint) advance(ci int32, c *conn, x *xact, i int32, cl sched.Class) {
	if x.role == roleTarget && x.kind == OpPush {
		e.cnt.own[cGrantsIssued]++ // the grant is sent; the data will come
		x.unresolved++
		return
	}
	x.unresolved++
	more := false
	switch {
	case x.role == roleInitiator && x.kind == OpPull:
		x.reqSent = true
	case x.role == roleInitiator && x.solicited && !x.reqSent:
		x.reqSent = true // the data waits for the grant
	default:
		if x.role == roleTarget {
			e.cnt.own[cBytesServed] += uint64(min(x.length-x.sentPkts*uint32(e.seg), uint32(e.seg)))
		}
		x.sentPkts++
		e.ioiSent(x)
		more = x.sentPkts < x.pkts && !e.ioiHold(x, cl)
	}
	if more && !e.enqueue(ci, cl, i) {
		if x.role == roleInitiator {
			e.fail(i, StatusConnFailed)
		} else {
			e.setState(x, targetFailed)
		}
	}
}
