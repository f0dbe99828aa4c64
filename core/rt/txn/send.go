package txn

import (
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// Two-sided operations (docs/sends.md): the initiator's Send names no remote
// memory; its bytes go into the target's next posted receive WQE
// (PostRecv, recvq.go), as an RDMA SEND into a queue pair's receive
// queue (ibv_post_send with IBV_WR_SEND; ibv_post_recv). The k-th Send of
// a connection belongs in the k-th WQE posted on the target's end of that
// connection; ConnOptions.Index chooses how the packets say which
// (core/dix): by a delivery index, so the target places every packet on
// arrival, or not at all (dix.None, the baseline), so the target places
// in order and holds what comes early. On an ordered connection the
// Send's packets carry FlagOrdered: the target still places them on
// arrival, and releases the receive completion in the connection's
// request order (recvq.go); this side completes in posting order.
//
// This file is the initiator's side; recvq.go the target's.

// ErrSendOrdered was returned by Send on an ordered connection.
//
// Deprecated: Sends run on ordered connections too (the target still
// places every packet on arrival and releases the receive completions in
// request order); nothing returns it.
var ErrSendOrdered = errors.New("txn: Send on an ordered connection")

// sendConn is the initiator's Send state of one connection slot.
type sendConn struct {
	cfg dix.Config
	win *dix.Window
}

// sendX is the Send state of one transaction context.
type sendX struct {
	k      uint32 // the Send's number: it belongs in WQE k
	acked  bool   // initiator: a packet of it was acknowledged
	rnr    bool   // initiator: a packet of it drew an RNR NACK
	psnSet bool
	psnLo  uint32 // initiator: the PSNs of its first and latest packets
	psnHi  uint32
	bound  bool   // target: bound to WQE k (entry in the binding table)
	entry  uint32 // target: its binding-table entry
	elem   bool   // target: bound through an element (out of order)
	whole  bool   // target, ordered connection: placed whole, waiting for its turn
}

// Send posts a two-sided send of op.Len local bytes (op.Local, op.LocalAddr;
// op.Remote is ignored): the target places them in its next posted receive
// WQE on this connection and reports it there (a receive completion naming
// the WQE and the length). It returns the request sequence number. The
// completion here comes when every packet is acknowledged: StatusOK, or
// StatusRNRRetryExceeded when the target had no WQE posted for it through
// every retry, StatusRemoteInvalid when the message was longer than the
// WQE (Refusal RefusalRecvTooSmall) or its absolute index counts modulo
// another depth than the target's receive queue (RefusalIndexMismatch),
// or the errors a push can end with. ErrBusy when the endpoint or
// the connection's delivery-index window (dix.Config.Outstanding) is full.
func (h *Conn) Send(op Op) (rsn uint32, err error) {
	h.e.unpublished = true
	c := h.live()
	if c == nil || c.closing {
		return 0, ErrClosed
	}
	e := h.e
	if op.Len < 0 || op.Len > MaxMessage {
		return 0, ErrTooLong
	}
	mem, why := e.regions.span(op.Local.Key, op.LocalAddr, uint32(op.Len), 0)
	if why != refuseNone {
		return 0, fmt.Errorf("%w: local region %#x [%d, +%d): %v", ErrLocalRegion, op.Local.Key, op.LocalAddr, op.Len, why)
	}
	sc := &e.dx.snd[h.idx]
	if !sc.win.Room() {
		e.dx.cnt[dWindowFull]++
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	if len(e.freeX) == 0 || e.reserved >= len(e.cq.buf) || e.ro.Len()+1 > e.ro.Cap() || e.sch.Len() >= e.sch.Cap() {
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	i, x := e.allocX(h.idx, roleInitiator)
	x.kind = OpSend
	x.rsn = c.nextRSN
	x.length = uint32(op.Len)
	x.mem, x.tag = mem, op.Tag
	x.posted = e.now
	x.pkts = e.packets(x.length)
	if err := e.register(i, c.cid, spaceRSN, x.rsn); err != nil {
		e.freeXact(i)
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	x.rsnHeld = true
	if !e.enqueue(h.idx, sched.ClassRequest, i) {
		e.ro.Take(c.cid, spaceRSN, x.rsn)
		x.rsnHeld = false
		e.freeXact(i)
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	x.snd.k, _ = sc.win.Take()
	x.snd.bound = true // holds a window number until freed
	c.nextRSN++
	to := op.Timeout
	if to == 0 {
		to = c.opTimeout
	}
	e.armTimeout(i, x, to)
	e.reserved++
	e.cnt.own[cPosted]++
	e.dx.cnt[dSends]++
	return x.rsn, nil
}

// sendPacket describes Send x's next packet in sh and returns its payload.
func (e *Endpoint) sendPacket(ci int32, x *xact, i int32, sh *rt.SendHeader) []byte {
	sh.Type = wire.TypeSend
	sh.RSN, sh.ReqLen = x.rsn, x.length
	sh.Cookie = x.cookie(i)
	sh.PayloadStable = true
	if e.conns[ci].ordered {
		sh.Flags |= wire.FlagOrdered
	}
	sc := &e.dx.snd[ci]
	e.putIndex(sc, x, sh, sc.cfg.Carry == dix.CarryUntilAcked && x.snd.acked)
	off := x.sentPkts * uint32(e.seg)
	end := min(off+uint32(e.seg), x.length)
	sh.Offset = off
	if x.sentPkts+1 == x.pkts {
		sh.Flags |= wire.FlagLastOfMessage
	}
	return x.mem[off:end]
}

// putIndex writes Send x's delivery index (or the baseline's number) into
// sh: the descriptor, and the index in the SSN field or the Placement
// extension. An omitted index leaves only the descriptor.
func (e *Endpoint) putIndex(sc *sendConn, x *xact, sh *rt.SendHeader, omit bool) {
	cfg := &sc.cfg
	sh.Desc = uint8(cfg.Desc(omit))
	if cfg.Kind == dix.None {
		sh.SSN = x.snd.k
		return
	}
	if omit {
		e.dx.cnt[dIndexOmitted]++
		return
	}
	idx, tag := cfg.Encode(x.snd.k, sc.win.Base())
	if cfg.Where == dix.InExtension {
		sh.Ext = wire.Ext{Present: wire.ExtPlacement, Placement: wire.Placement{Mode: wire.PlacementMode(cfg.Kind), Index: idx}}
		sh.SSN = uint32(tag) << 24
		return
	}
	sh.SSN = idx | uint32(tag)<<24
}

// sendNoticePacket describes Send x's abort notice: the target consumes
// its WQE in error (or marks it, if not yet posted). It always carries the
// index: the target may have nothing of the Send to find it by.
func (e *Endpoint) sendNoticePacket(ci int32, x *xact, sh *rt.SendHeader) {
	sh.Type = wire.TypeSend
	sh.Ext = wire.Ext{}
	if e.conns[ci].ordered {
		sh.Flags |= wire.FlagOrdered
	}
	e.putIndex(&e.dx.snd[ci], x, sh, false)
}

// sendNeedsNotice: a stopped Send always tells the target, which must
// consume its WQE (the Send's place in the posting order) even if
// nothing of it arrived.
func sendNeedsNotice(st Status) bool {
	switch st {
	case StatusAbandoned, StatusRNRRetryExceeded, StatusTimeout, StatusCancelled:
		return true
	}
	return false
}

// sendResolved adjusts the transport's verdict on a Send's packet.
func (e *Endpoint) sendResolved(x *xact, st Status) Status {
	switch {
	case st == StatusOK:
		x.snd.acked = true
		x.snd.rnr = false // it found its WQE: a later loss is not for want of one
	case st == StatusAbandoned && x.snd.rnr:
		if x.status == StatusOK { // once per Send, not per packet
			e.dx.cnt[dRNRExceeded]++
		}
		return StatusRNRRetryExceeded
	case st == StatusRemoteAccess && (x.refusal == RefusalRecvTooSmall || x.refusal == RefusalIndexMismatch):
		return StatusRemoteInvalid
	}
	return st
}

// notePSN records the PSN of a Send's packet that went out.
func (x *xact) notePSN(psn uint32) {
	if !x.snd.psnSet {
		x.snd.psnSet, x.snd.psnLo = true, psn
	}
	x.snd.psnHi = psn
}

// onRNR counts a receiver-not-ready NACK and marks the Sends it holds
// off, so that their abandonment reads as StatusRNRRetryExceeded: the
// Send it names and every later one already sent on the connection (the
// transport holds off the NACKed packet and every packet after it, and
// NACKs only the first; those behind it starve of WQEs just the same).
func (e *Endpoint) onRNR(ev rt.Event) {
	if ev.Nack.Code != wire.NackReceiverNotReady {
		return
	}
	e.dx.cnt[dRNRReceived]++
	_, c := e.connOf(ev.Conn)
	if c == nil || ev.Window != wire.WindowRequest {
		return
	}
	for i := c.head; i >= 0; i = e.xacts[i].next {
		x := &e.xacts[i]
		if x.role == roleInitiator && x.kind == OpSend && x.snd.psnSet && !seqLT(x.snd.psnHi, ev.PSN) {
			x.snd.rnr = true
		}
	}
}

// sendFreed releases what a Send context holds in this file's and
// recvq.go's tables: the initiator's window number (the base moves on),
// the target's binding.
func (e *Endpoint) sendFreed(x *xact) {
	if !x.snd.bound {
		return
	}
	x.snd.bound = false
	if x.role == roleInitiator {
		e.dx.snd[x.conn].win.Done(x.snd.k)
		return
	}
	e.dx.unbind(x)
}

// SetIndex sets how this side's Sends on the connection name their WQE at
// the peer (what ConnOptions.Index sets at Open), for a connection the
// peer opened. Only before the connection's first Send: the index counts
// from it.
func (h *Conn) SetIndex(cfg dix.Config) error {
	c := h.live()
	if c == nil || c.closing {
		return ErrClosed
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("txn: SetIndex: %w", err)
	}
	if h.e.dx.snd[h.idx].win.Next() != h.e.opts.InitialSeq {
		return errors.New("txn: SetIndex after the connection's first Send")
	}
	return h.e.dx.configure(h.e, int(h.idx), cfg)
}
