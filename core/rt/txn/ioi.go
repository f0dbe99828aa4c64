package txn

import (
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// IOI forwarding (docs/ioi.md) in the transaction layer: core/ioi decides,
// this file applies its decisions to the data packets of pushes (the
// initiator's) and pulls (the target's pull data), and checks the
// in-sequence promise of flagged packets where data is placed (the
// target's push data, the initiator's pull data).
//
// What "processed in sequence" gives the ULP: each message's flagged
// packets (its head and tail, or all of it when it goes wholly in order)
// are placed and handed to Options.OnInOrder strictly in their in-order
// sequence, so a ULP that parses a message header early reads the head's
// bytes in order as they arrive; sprayed middle packets are placed as
// they arrive and reach the ULP with the whole message (OnRequest, the
// completion). A flagged packet that arrives out of sequence (an earlier
// one was lost on the ordered path) is counted (IOIStats.OutOfSequence),
// placed and handed over when its turn comes. Each message's receiver
// buffers as far ahead as the transport's receive window reaches
// (rt.Options.WindowSize: its bitmap and the held packets' places live in
// the endpoint's ioiHeld, ioiOff and ioiLen, one window per transaction),
// so a packet the transport accepted is never too far ahead; one that is
// (a forgery) is refused as out of window (IOIStats.Refused): an
// out-of-window NACK, which does not spend its sender's retry budget.
// It is never handed over ahead of its turn. Message boundaries stay in order on ordered connections by
// the reorder engine as before: a message is complete only when all its
// bytes are placed, whatever path they took.
//
// The in-order sequence number travels in the SSN field of flagged data
// packets (no receiver reads a data packet's SSN otherwise).

// dataBit marks the cookie of a data packet IOI counted (a push request's
// acknowledgement, which may come after the data started, is not one);
// sprayBit that of one sent outside the ordered path (it counts in UPC,
// not OPC). ioiCookieBits are both, which byCookie masks off.
const (
	sprayBit      = 1 << 29
	dataBit       = 1 << 28
	ioiCookieBits = sprayBit | dataBit
)

// ioiConn is a connection's IOI state.
type ioiConn struct {
	cfg ioi.Config
	set bool // cfg came from ConnOptions.IOI; else the endpoint's
	est ioi.Estimator
}

// ioiXact is a transaction's IOI state: the sender's for the messages this
// side sends (push data, pull data), the receiver's for those it places.
type ioiXact struct {
	s       ioi.Sender
	r       ioi.Receiver
	mark    ioi.Mark
	nonIdem bool        // Op.NonIdempotent: wholly in order
	cl      sched.Class // the class the held last packet goes back to
}

// ioiWindow sets up the receivers' windows: per transaction, a bitmap of
// the transport's window and, by sequence number mod that window, the
// offset and length of each flagged packet placed ahead of its turn.
func (e *Endpoint) ioiWindow() {
	w := e.rt.Options().WindowSize
	e.ioiHeld = make([]uint64, len(e.xacts)*w/64)
	e.ioiOff = make([]uint32, len(e.xacts)*w)
	e.ioiLen = make([]uint16, len(e.xacts)*w)
}

// ioiReceiver returns transaction i's receiver, its window given on the
// first use after the transaction was allocated.
func (e *Endpoint) ioiReceiver(i int32, x *xact) *ioi.Receiver {
	r := &x.ioi.r
	if !r.Ready() {
		words := len(e.ioiHeld) / len(e.xacts)
		r.Init(e.ioiHeld[int(i)*words : int(i+1)*words])
	}
	return r
}

// IOI counter indices.
const (
	iMsgPlain = iota
	iMsgInOrder
	iMsgSprayed
	iMsgIOI
	iMsgIOIStayed
	iPktNone
	iPktInOrder
	iPktHead
	iPktMiddle
	iPktTail
	iPeakOPC
	iPeakUPC
	iUPCWaits
	iThreshold
	iRTT
	iBandwidth
	iInSequence
	iOutOfSequence
	iForged
	iStale
	iUnknown
	iRefused
	numIOICounters
)

// ioiCounters are plain counters on the polling goroutine, published to
// atomics once per Poll.
type ioiCounters struct {
	own [numIOICounters]uint64
	pub [numIOICounters]atomic.Uint64
}

func (c *ioiCounters) publish() {
	for i := range c.own {
		if c.pub[i].Load() != c.own[i] {
			c.pub[i].Store(c.own[i])
		}
	}
}

// IOIStats are the endpoint's IOI counters (as of the end of the latest
// Poll that published them, see Stats). All grow except the gauges Threshold, RTT and Bandwidth (the
// latest measurement on any connection) and the peaks.
type IOIStats struct {
	// Messages this side sent, by how they travelled: unmarked (ModeOff),
	// wholly in order, wholly sprayed, with IOI (the head went out), and
	// of those, the ones whose first response found them too small to
	// spray (they stayed in order).
	MsgPlain, MsgInOrder, MsgSprayed, MsgIOI, MsgIOIStayed uint64
	// Data packets sent, by phase: in order outside IOI (Phase None,
	// flagged), unmarked or sprayed outside IOI (Phase None), head,
	// middle, tail.
	PktInOrder, PktNone, PktHead, PktMiddle, PktTail uint64
	// PeakOPC and PeakUPC: the most outstanding in-order and sprayed
	// packets any one message had.
	PeakOPC, PeakUPC uint64
	// UPCWaits counts messages whose last packet waited for UPC == 0.
	UPCWaits uint64
	// Threshold (bytes), RTT (ns) and Bandwidth (bytes/s): the latest
	// first-response measurement.
	Threshold, RTT, Bandwidth uint64
	// Receiver: flagged packets handed over in sequence; flagged packets
	// that came out of sequence (placed, their handover deferred to their
	// turn), and of those the ones too far ahead to buffer (Refused: not
	// placed, refused for retransmission); packets with a phase and flag
	// no sender makes, or a phase on a packet that is not data; flagged
	// packets whose sequence number was already taken; and middle or tail
	// packets for a message unknown here. The last three are dropped.
	InSequence, OutOfSequence, Refused, Forged, Stale, Unknown uint64
}

// IOIStats returns the IOI counters; it may be called from any goroutine.
func (e *Endpoint) IOIStats() IOIStats {
	v := func(i int) uint64 { return e.ioiCnt.pub[i].Load() }
	return IOIStats{
		MsgPlain: v(iMsgPlain), MsgInOrder: v(iMsgInOrder), MsgSprayed: v(iMsgSprayed), MsgIOI: v(iMsgIOI), MsgIOIStayed: v(iMsgIOIStayed),
		PktInOrder: v(iPktInOrder), PktNone: v(iPktNone), PktHead: v(iPktHead), PktMiddle: v(iPktMiddle), PktTail: v(iPktTail),
		PeakOPC: v(iPeakOPC), PeakUPC: v(iPeakUPC), UPCWaits: v(iUPCWaits),
		Threshold: v(iThreshold), RTT: v(iRTT), Bandwidth: v(iBandwidth),
		InSequence: v(iInSequence), OutOfSequence: v(iOutOfSequence), Refused: v(iRefused), Forged: v(iForged), Stale: v(iStale), Unknown: v(iUnknown),
	}
}

// IOIThreshold returns a connection's IOI threshold in bytes and whether
// it is known yet (measured, or an override).
func (h *Conn) IOIThreshold() (uint64, bool) {
	c := h.live()
	if c == nil {
		return 0, false
	}
	c.ioi.est.Override = uint64(h.e.ioiConfig(c).Threshold)
	return c.ioi.est.Threshold()
}

// ioiConfig is connection c's IOI configuration.
func (e *Endpoint) ioiConfig(c *conn) ioi.Config {
	if c.ioi.set {
		return c.ioi.cfg
	}
	return e.opts.IOI
}

// ioiOpen records ConnOptions.IOI on a new connection.
func (c *conn) ioiOpen(cfg *ioi.Config) {
	if cfg != nil {
		c.ioi.cfg, c.ioi.set = *cfg, true
	}
}

// ioiMark decides the IOI marks of transaction x's next data packet,
// described in sh: flag, phase, in-order sequence number (in SSN), DSCP,
// and for a sprayed packet its entropy and the cookie's sprayBit.
func (e *Endpoint) ioiMark(c *conn, x *xact, sh *rt.SendHeader) {
	st := &x.ioi
	if !st.s.Begun() {
		cfg := e.ioiConfig(c)
		c.ioi.est.Override = uint64(cfg.Threshold)
		st.s.Begin(cfg.Mode, x.pkts, uint64(x.length), !st.nonIdem, &c.ioi.est, e.now, x.rsn^c.cid<<8)
		switch {
		case st.s.IOI():
			e.ioiCnt.own[iMsgIOI]++
		case st.s.InOrder():
			e.ioiCnt.own[iMsgInOrder]++
		case st.s.Sprayed():
			e.ioiCnt.own[iMsgSprayed]++
		default:
			e.ioiCnt.own[iMsgPlain]++
		}
	}
	m := st.s.Next()
	st.mark = m
	sh.Phase = m.Phase
	sh.Cookie |= dataBit
	if m.Flagged {
		sh.Flags |= wire.FlagIOIInOrder
		sh.SSN = m.Ordinal
		sh.DSCP = e.ioiConfig(c).DSCP
		return
	}
	sh.SrcPort = m.Entropy
	if st.s.IOI() || st.s.Sprayed() {
		sh.Cookie |= sprayBit
	}
}

// ioiSent commits the mark of x's packet the transport just took (x's
// sentPkts already counts it).
func (e *Endpoint) ioiSent(x *xact) {
	st := &x.ioi
	if !st.s.Begun() {
		return
	}
	off := (x.sentPkts - 1) * uint32(e.seg)
	st.s.Sent(st.mark, int(min(x.length-min(off, x.length), uint32(e.seg))))
	switch {
	case st.mark.Phase == wire.PhaseHead:
		e.ioiCnt.own[iPktHead]++
	case st.mark.Phase == wire.PhaseMiddle:
		e.ioiCnt.own[iPktMiddle]++
	case st.mark.Phase == wire.PhaseTail:
		e.ioiCnt.own[iPktTail]++
	case st.mark.Flagged:
		e.ioiCnt.own[iPktInOrder]++
	default:
		e.ioiCnt.own[iPktNone]++
	}
	opc, upc := st.s.Peaks()
	e.ioiCnt.own[iPeakOPC] = max(e.ioiCnt.own[iPeakOPC], uint64(opc))
	e.ioiCnt.own[iPeakUPC] = max(e.ioiCnt.own[iPeakUPC], uint64(upc))
}

// ioiHold reports whether x's next packet, its last, must wait for
// UPC == 0; ioiResolved queues it (in class cl) when UPC gets there.
func (e *Endpoint) ioiHold(x *xact, cl sched.Class) bool {
	if !x.ioi.s.MustHold() {
		return false
	}
	x.ioi.cl = cl
	e.ioiCnt.own[iUPCWaits]++
	return true
}

// ioiResolved tells x's sender that one of its packets (cookie) resolved.
func (e *Endpoint) ioiResolved(i int32, x *xact, cookie uint64, st Status) {
	if !x.ioi.s.Begun() || cookie&(noticeBit|grantBit) != 0 || cookie&dataBit == 0 {
		return
	}
	c := &e.conns[x.conn]
	if st == StatusOK {
		c.ioi.est.Acked(uint64(e.seg), e.now)
	}
	if x.ioi.s.OPC()+x.ioi.s.UPC() <= 1 && x.sentPkts == x.pkts {
		c.ioi.est.Idle() // its last packet resolves: a gap may follow
	}
	switch x.ioi.s.Resolved(cookie&sprayBit == 0, st == StatusOK, e.now, &c.ioi.est) {
	case ioi.ResolvedFirst:
		t, _ := c.ioi.est.Threshold()
		e.ioiCnt.own[iThreshold] = t
		e.ioiCnt.own[iRTT] = uint64(c.ioi.est.RTT())
		e.ioiCnt.own[iBandwidth] = c.ioi.est.Bandwidth()
		if x.ioi.s.Phase() != wire.PhaseMiddle {
			e.ioiCnt.own[iMsgIOIStayed]++
		}
	case ioi.ResolvedRelease:
		if !x.inSched && !e.enqueue(x.conn, x.ioi.cl, i) {
			if x.role == roleInitiator {
				x.status = StatusConnFailed
				e.stop(x)
			} else {
				e.setState(x, targetFailed)
			}
		}
	}
}

// ioiData reports whether packets of type t carry message data (and may
// carry an IOI phase).
func ioiData(t wire.Type) bool {
	return t == wire.TypePushUnsolicitedData || t == wire.TypePushSolicitedData || t == wire.TypePullData
}

// ioiForgedPhase reports (and counts) a packet whose IOI phase and flag
// no sender makes (ioi.CheckCombo), a phase on a packet that is not data
// included.
func (e *Endpoint) ioiForgedPhase(h *wire.Header) bool {
	if h.Phase == wire.PhaseNone || ioi.CheckCombo(ioiData(h.Type), h.Flags.Has(wire.FlagIOIInOrder), h.Phase) {
		return false
	}
	e.ioiCnt.own[iForged]++
	return true
}

// ioiUnknown reports (and counts) a middle or tail packet that would start
// a message here: its head was never taken, so it is no message this side
// knows. No sender sends one: a message's middle goes only after its
// head's first acknowledgement (so the head was taken here, and its
// context lives until every packet came), and no packet of it follows its
// abort notice. The caller drops it unacknowledged.
func (e *Endpoint) ioiUnknown(h *wire.Header) bool {
	if h.Phase != wire.PhaseMiddle && h.Phase != wire.PhaseTail {
		return false
	}
	e.ioiCnt.own[iUnknown]++
	return true
}

// ioiAdmit checks a data packet of x against its message's in-sequence
// state before it is placed. ok false: do not place it, answer v.
func (e *Endpoint) ioiAdmit(c *conn, i int32, x *xact, h *wire.Header, p []byte) (v rt.Verdict, ok bool) {
	flagged := h.Flags.Has(wire.FlagIOIInOrder)
	if !ioi.CheckCombo(true, flagged, h.Phase) {
		e.ioiCnt.own[iForged]++
		return rt.Drop, false
	}
	r := e.ioiReceiver(i, x)
	base := int(i) * int(r.Window())
	switch r.Admit(flagged, h.SSN) {
	case ioi.InSequence:
		e.ioiCnt.own[iInSequence]++
		if e.opts.OnInOrder != nil {
			e.opts.OnInOrder(c.handle, h.RSN, h.Offset, p)
		}
		for {
			o, ok := r.Release()
			if !ok {
				break
			}
			e.ioiCnt.own[iInSequence]++
			if e.opts.OnInOrder != nil {
				s := base + int(r.Slot(o))
				off := e.ioiOff[s]
				e.opts.OnInOrder(c.handle, h.RSN, off, x.mem[off:off+uint32(e.ioiLen[s])])
			}
		}
	case ioi.Buffered:
		e.ioiCnt.own[iOutOfSequence]++
		s := base + int(r.Slot(h.SSN))
		e.ioiOff[s] = h.Offset
		e.ioiLen[s] = uint16(len(p))
	case ioi.OutOfSequence:
		e.ioiCnt.own[iOutOfSequence]++
		e.ioiCnt.own[iRefused]++
		return rt.OutOfWindow, false
	case ioi.Stale:
		// An in-order number taken already under another PSN (a copy with
		// the same PSN never reaches here): forged. Not acknowledged, so
		// the packet that holds this PSN still comes.
		e.ioiCnt.own[iStale]++
		return rt.Drop, false
	}
	return 0, true
}
