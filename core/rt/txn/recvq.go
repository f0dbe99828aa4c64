package txn

import (
	"fmt"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// The target's side of two-sided operations: each connection has its own
// receive queue of posted WQEs (as an RC queue pair has; a queue shared by
// connections could not be named by a sender, which knows only its own
// Sends), consumed in posting order: the k-th Send of the connection takes
// WQE k. How a Send's packets find WQE k:
//
//   - With a delivery index (dix.Absolute, Relative, FreeRunning): the
//     first arriving packet of the Send (any of its packets) binds it —
//     directly when it is the transaction the consumer pointer expects,
//     else through an element of the special receive queue (bounded by
//     Options.RecvElements; a full table answers RNR) — and every packet
//     is copied straight into the WQE's buffer at its offset. Packets that
//     omit the index (dix.CarryUntilAcked) find the binding by their RSN.
//   - Without (dix.None, the baseline): only the head WQE binds; a packet
//     of a later Send is copied into the hold buffer (Options.HoldBytes)
//     and copied again into its WQE once every Send before it is placed.
//
// A receive completion (Kind OpRecv) names the WQE (Completion.WQE, and
// its WRID in Tag) and the message length; it comes as soon as the WQE is
// whole (out of order: WQE k may complete before k-1). A Send longer than
// its WQE completes it with StatusLocalLength and is refused (the sender
// sees StatusRemoteInvalid); nothing past the WQE is written. A Send the
// initiator gave up on consumes its WQE with StatusRemoteAbandoned. When
// the connection ends, its WQEs not yet completed are flushed
// (StatusFlushed after Abort, else StatusConnFailed), in posting order.
//
// On an ordered connection (the peer's Send packets carry FlagOrdered)
// every packet is still placed on arrival, but a Send's receive
// completion waits for its turn in the peer's request order (RSN, shared
// with its pushes and pulls), as an ordered push's delivery does: a Send
// placed whole early holds its context and WQE until every request before
// it is released. A Send that fails (longer than its WQE, given up by the
// sender, an index of another depth) completes its WQE in error at once
// and keeps its turn with a placeholder, so the requests after it still
// wait for nothing that will not come.
//
// An absolute index travels with the depth it counts modulo; one counted
// modulo another depth than this queue's is refused (IndexMismatch; the
// sender's Send fails with StatusRemoteInvalid, RefusalIndexMismatch)
// before it can name any WQE. Every packet (and every copy) of a Send
// refused as longer than its WQE is refused again (RefusedAgain). An index
// that names a WQE consumed already is dropped unacknowledged and counted
// (Stale): every packet of a Send that completed was accepted, so none
// comes again. One that names a WQE not posted yet, or one beyond the
// queue, is refused for now (RNR) and counted; a packet whose index names
// a WQE bound to another transaction, or whose RSN is bound to another
// WQE, is dropped unacknowledged and counted (Forged): no packet ever
// writes into a WQE that is not its Send's, and a WQE bound to one Send
// is never bound to another. The package doc's "Every promise kept" has
// the whole table.

// Defaults of the receive-queue options.
const (
	DefaultRecvDepth    = 256
	DefaultRecvElements = 64
)

// ErrRecvQueueFull is returned (wrapping ErrBusy) by PostRecv when every
// slot of the connection's receive queue holds an unfinished WQE.
var ErrRecvQueueFull = fmt.Errorf("%w (the receive queue is full: Options.RecvDepth WQEs are posted and not completed)", ErrBusy)

// RecvWR is a receive work request: the buffer [LocalAddr, LocalAddr+Len)
// of registered region Local that one Send lands in (ibv_recv_wr).
type RecvWR struct {
	Local     Region
	LocalAddr uint64
	Len       int
	// WRID is the ULP's own word, returned in the receive completion's Tag.
	WRID uint64
}

// wqe is a posted receive work queue element.
type wqe struct {
	mem    []byte
	wrid   uint64
	posted clock.Time
	x      int32 // the bound transaction's context, or -1
	live   bool  // posted and not completed
}

// recvQueue is one connection slot's receive queue.
type recvQueue struct {
	q       *dix.Queue
	wqes    []wqe
	held    int32 // hold-buffer chunks of this connection (baseline), linked
	stalled bool  // the head Send's held packets wait for a free context
	// The Sends refused lately (longer than their WQE), newest last: a
	// copy of one of their packets that the transport delivers again (the
	// refusal NACK was lost) or another packet of the same Send is refused
	// the same way, never acknowledged as stale. Bounded: one evicted
	// falls back to being dropped unacknowledged (the sender abandons it).
	refused  [refusedMemory]refusedSend
	refusedN uint32
}

// refusedMemory is how many refused Sends a receive queue remembers. A
// refused Send is remembered until its sender has turned every packet of
// it into a resync (one NACK each way suffices); the sender's window keeps
// that to a few round trips, during which few Sends of one connection are
// refused.
const refusedMemory = 16

// refusedSend is a Send refused for good, by its RSN.
type refusedSend struct {
	rsn uint32
	why Refusal
}

// rememberRefusal records that the Send with this RSN was refused.
func (rq *recvQueue) rememberRefusal(rsn uint32, why Refusal) {
	rq.refused[rq.refusedN%refusedMemory] = refusedSend{rsn: rsn, why: why}
	rq.refusedN++
}

// refusal says whether the Send with this RSN was refused lately, and why.
func (rq *recvQueue) refusal(rsn uint32) (Refusal, bool) {
	for j := range min(rq.refusedN, refusedMemory) {
		if r := rq.refused[j]; r.rsn == rsn {
			return r.why, true
		}
	}
	return 0, false
}

// hchunk is one packet held in the hold buffer.
type hchunk struct {
	k, rsn, reqLen, off, n uint32
	next                   int32
}

// Counters of two-sided operations.
const (
	dSends = iota
	dRecvsPosted
	dRecvCompleted
	dRecvCompletedErr
	dPlacedDirect
	dPlacedElement
	dPlacedHeld
	dBindsDirect
	dBindsElement
	dPeakElements
	dRNRSent
	dRNRReceived
	dRNRExceeded
	dBeyond
	dElementsFull
	dHoldFull
	dHeld
	dHeldBytes
	dPeakHeldBytes
	dStale
	dForged
	dTooLong
	dBytesPlaced
	dBytesCopied
	dWindowFull
	dIndexOmitted
	dNoticesApplied
	dIndexMismatch
	dRefusedAgain
	numDixCounters
)

// SendStats are the counters of two-sided operations (both roles); they
// only grow, except the current ones (HeldBytes) and the peaks.
type SendStats struct {
	Sends        uint64 // initiator: Sends accepted
	WindowFull   uint64 // initiator: Sends refused for now (the index window was full)
	IndexOmitted uint64 // initiator: packets sent without the index (CarryUntilAcked)
	RNRReceived  uint64 // initiator: RNR NACKs received (a Send found no WQE)
	RNRExceeded  uint64 // initiator: Sends that ran out of RNR retries

	RecvsPosted      uint64 // target: WQEs posted
	RecvCompleted    uint64 // target: receive completions with StatusOK
	RecvCompletedErr uint64 // target: receive completions in error
	// Packets placed: directly (their Send was the expected one when
	// bound), through an element (bound out of order), or out of the
	// hold buffer (baseline).
	PlacedDirect   uint64
	PlacedElement  uint64
	PlacedHeld     uint64
	BindsDirect    uint64 // Sends bound to their WQE as the expected one
	BindsElement   uint64 // Sends bound through an element
	PeakElements   uint64 // most elements in use at once, on all connections
	RNRSent        uint64 // packets refused for now: no WQE posted for them
	Beyond         uint64 // packets whose index lay beyond the receive queue (refused for now)
	ElementsFull   uint64 // packets refused for now: the element table was full
	HoldFull       uint64 // packets refused for now: the hold buffer was full
	Held           uint64 // packets copied into the hold buffer (baseline)
	HeldBytes      uint64 // bytes in the hold buffer now
	PeakHeldBytes  uint64 // most bytes in the hold buffer at once
	Stale          uint64 // packets for a WQE consumed already (dropped)
	Forged         uint64 // packets with a bad descriptor or index, or naming another Send's WQE (dropped)
	TooLong        uint64 // Sends longer than their WQE
	BytesPlaced    uint64 // bytes written into WQEs
	BytesCopied    uint64 // every byte copy of received Send data: placement plus holding
	NoticesApplied uint64 // abort notices that consumed or marked a WQE
	// IndexMismatch: packets (and abort notices) refused because their
	// absolute index counts modulo another depth than this side's receive
	// queue (the sender's ConnOptions.Index.Depth is not this side's
	// Options.RecvDepth). Nothing of them is written; the Send fails at
	// the sender with StatusRemoteInvalid, RefusalIndexMismatch.
	IndexMismatch uint64
	// RefusedAgain: packets of a Send refused already (longer than its
	// WQE) refused again: a resend whose refusal NACK was lost, or another
	// packet of the same Send. Never acknowledged.
	RefusedAgain uint64
}

// dixEP is the endpoint's two-sided state.
type dixEP struct {
	snd   []sendConn   // per connection slot
	rq    []*recvQueue // per connection slot, made by the first PostRecv
	binds *cam.Table[uint64]
	bindX []int32 // binding entry -> context
	// The hold buffer (baseline): fixed chunks of one segment each.
	hold      []byte
	chunks    []hchunk
	freeChunk []int32
	elems     int
	cnt       [numDixCounters]uint64
	pub       [numDixCounters]atomic.Uint64
}

func (d *dixEP) init(e *Endpoint, conns int) error {
	d.snd = make([]sendConn, conns)
	d.rq = make([]*recvQueue, conns)
	var err error
	d.binds, err = cam.New[uint64](cam.Options{Capacity: e.opts.MaxOps, Seed: e.rt.Options().Seed ^ 0xd1c, Name: "txn Send bindings"})
	if err != nil {
		return invalid("Options.MaxOps: %v", err)
	}
	d.bindX = make([]int32, d.binds.Cap())
	if e.opts.HoldBytes > 0 {
		n := max(1, e.opts.HoldBytes/e.seg)
		d.hold = make([]byte, n*e.seg)
		d.chunks = make([]hchunk, n)
		d.freeChunk = make([]int32, 0, n)
		for i := n - 1; i >= 0; i-- {
			d.freeChunk = append(d.freeChunk, int32(i))
		}
	}
	for i := range d.snd {
		if err := d.configure(e, i, dix.Config{}); err != nil {
			return err
		}
	}
	return nil
}

// configure sets connection slot ci's Send configuration (validated by
// Open) and restarts its window.
func (d *dixEP) configure(e *Endpoint, ci int, cfg dix.Config) error {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return err
	}
	sc := &d.snd[ci]
	sc.cfg = cfg
	if sc.win == nil || sc.win.Cap() < cfg.Outstanding {
		sc.win, err = dix.NewWindow(cfg.Outstanding, e.opts.InitialSeq)
		return err
	}
	sc.win.Reset(cfg.Outstanding, e.opts.InitialSeq)
	return nil
}

func (d *dixEP) publish() {
	for i := range d.cnt {
		if d.pub[i].Load() != d.cnt[i] {
			d.pub[i].Store(d.cnt[i])
		}
	}
}

// SendStats returns the two-sided counters as of the end of the latest
// Poll that published them (see Stats).
func (e *Endpoint) SendStats() SendStats {
	v := func(i int) uint64 { return e.dx.pub[i].Load() }
	return SendStats{
		Sends: v(dSends), WindowFull: v(dWindowFull), IndexOmitted: v(dIndexOmitted), RNRReceived: v(dRNRReceived),
		RNRExceeded: v(dRNRExceeded), RecvsPosted: v(dRecvsPosted), RecvCompleted: v(dRecvCompleted),
		RecvCompletedErr: v(dRecvCompletedErr), PlacedDirect: v(dPlacedDirect), PlacedElement: v(dPlacedElement),
		PlacedHeld: v(dPlacedHeld), BindsDirect: v(dBindsDirect), BindsElement: v(dBindsElement),
		PeakElements: v(dPeakElements), RNRSent: v(dRNRSent), Beyond: v(dBeyond), ElementsFull: v(dElementsFull),
		HoldFull: v(dHoldFull), Held: v(dHeld), HeldBytes: v(dHeldBytes), PeakHeldBytes: v(dPeakHeldBytes),
		Stale: v(dStale), Forged: v(dForged), TooLong: v(dTooLong), BytesPlaced: v(dBytesPlaced),
		BytesCopied: v(dBytesCopied), NoticesApplied: v(dNoticesApplied), IndexMismatch: v(dIndexMismatch),
		RefusedAgain: v(dRefusedAgain),
	}
}

// PostRecv posts a receive WQE on the connection (ibv_post_recv): the next
// Send of the peer that has no WQE yet lands in it. It returns the WQE's
// number (the receive completion names it). ErrBusy when the completion
// queue has no room to promise, ErrRecvQueueFull when the receive queue
// is full. Its buffer must stay registered and untouched until the WQE
// completes (or its connection ends).
func (h *Conn) PostRecv(wr RecvWR) (wqeNum uint32, err error) {
	h.e.unpublished = true
	c := h.live()
	if c == nil || c.closing {
		return 0, ErrClosed
	}
	e := h.e
	if wr.Len < 0 || wr.Len > MaxMessage {
		return 0, ErrTooLong
	}
	mem, why := e.regions.span(wr.Local.Key, wr.LocalAddr, uint32(wr.Len), 0)
	if why != refuseNone {
		return 0, fmt.Errorf("%w: receive buffer in region %#x [%d, +%d): %v", ErrLocalRegion, wr.Local.Key, wr.LocalAddr, wr.Len, why)
	}
	if e.reserved >= len(e.cq.buf) {
		e.cnt.own[cBusy]++
		return 0, ErrBusy
	}
	rq, err := e.recvQueue(h.idx)
	if err != nil {
		return 0, err
	}
	k, aborted, ok := rq.q.Post()
	if !ok {
		e.cnt.own[cBusy]++
		return 0, ErrRecvQueueFull
	}
	rq.wqes[k&uint32(len(rq.wqes)-1)] = wqe{mem: mem, wrid: wr.WRID, posted: e.now, x: -1, live: true}
	e.reserved++
	e.dx.cnt[dRecvsPosted]++
	if aborted {
		// Its Send was given up before it was posted: consumed at once.
		e.recvDone(h.idx, rq, k, 0, 0, StatusRemoteAbandoned)
	}
	return k, nil
}

// recvQueue returns connection slot ci's receive queue, making it on first
// use (the control path: PostRecv).
func (e *Endpoint) recvQueue(ci int32) (*recvQueue, error) {
	if rq := e.dx.rq[ci]; rq != nil {
		return rq, nil
	}
	q, err := dix.NewQueue(e.opts.RecvDepth, e.opts.RecvElements, e.opts.InitialSeq)
	if err != nil {
		return nil, invalid("Options.RecvDepth: %v", err)
	}
	rq := &recvQueue{q: q, wqes: make([]wqe, e.opts.RecvDepth), held: -1}
	e.dx.rq[ci] = rq
	return rq, nil
}

// recvDone completes WQE k with st: the receive completion goes out and
// the queue's head moves on.
func (e *Endpoint) recvDone(ci int32, rq *recvQueue, k, rsn, n uint32, st Status) {
	w := &rq.wqes[k&uint32(len(rq.wqes)-1)]
	cp := Completion{Conn: e.conns[ci].handle, Tag: w.wrid, Kind: OpRecv, RSN: rsn, Bytes: int(n), Status: st, WQE: k, Posted: w.posted, Done: e.now}
	if st == StatusOK {
		e.dx.cnt[dRecvCompleted]++
	} else {
		e.dx.cnt[dRecvCompletedErr]++
	}
	*w = wqe{x: -1}
	rq.q.Complete(k)
	if !e.cq.push(cp) {
		panic("txn: completion queue overflow despite reservation") // a bug, never the peer's doing
	}
}

// decodeIndex finds the Send number a packet's index names.
func (e *Endpoint) decodeIndex(rq *recvQueue, desc dix.Desc, h *wire.Header) (uint32, bool) {
	kind := desc.Kind()
	if kind == dix.None {
		return h.SSN, true
	}
	var idx uint32
	tag := uint8(h.SSN >> 24)
	switch {
	case desc.InExt():
		if h.Ext.Present&wire.ExtPlacement == 0 || h.Ext.Placement.Mode != wire.PlacementMode(kind) {
			return 0, false
		}
		idx = h.Ext.Placement.Index
	case kind == dix.Relative:
		if desc.Width() > 24 {
			return 0, false
		}
		idx = h.SSN & 0xffffff
	case kind == dix.Absolute:
		idx = h.SSN & 0xffffff // the top byte is the depth tag
	default:
		idx = h.SSN
	}
	return dix.Decode(kind, desc.Width(), uint32(rq.q.Depth()), idx, tag, rq.q.Head())
}

// onSend takes a Send packet (or a Send's abort notice).
func (e *Endpoint) onSend(ci int32, c *conn, h *wire.Header, p []byte) rt.Verdict {
	d := &e.dx
	desc := dix.Desc(h.Desc)
	if !desc.Valid() {
		d.cnt[dForged]++
		return rt.Drop
	}
	c.peerOrdered = h.Flags.Has(wire.FlagOrdered)
	notice := h.Offset == abortOffset && len(p) == 0
	if desc.Kind() == dix.Absolute && !desc.Omitted() {
		// The depth the index counts modulo must be this queue's: checked
		// before anything (even whether a WQE is posted), so a
		// misconfigured pair fails its first Send with a clear refusal
		// instead of placing Sends in the wrong WQEs.
		if _, bad := dix.DepthMismatch(uint8(h.SSN>>24), uint32(e.opts.RecvDepth)); bad {
			d.cnt[dIndexMismatch]++
			if v := e.holdTurn(ci, c, h, RefusalIndexMismatch); v != rt.Accept || notice {
				return v
			}
			return rt.ULPErrorCode(uint8(RefusalIndexMismatch))
		}
	}
	if notice {
		return e.onSendNotice(ci, c, h, desc)
	}
	if uint64(h.Offset)+uint64(len(p)) > uint64(h.ReqLen) {
		e.cnt.own[cMalformed]++
		return rt.ULPError
	}
	rq := d.rq[ci]
	if rq == nil {
		d.cnt[dRNRSent]++ // nothing posted on this connection yet
		return rt.NotReady
	}
	if why, ok := rq.refusal(h.RSN); ok {
		// Its Send was refused: every packet of it, every copy, hears so.
		d.cnt[dRefusedAgain]++
		if v := e.holdTurn(ci, c, h, why); v != rt.Accept {
			return v
		}
		return rt.ULPErrorCode(uint8(why))
	}
	if rq.stalled {
		e.drainHeld(ci, rq)
	}
	var i int32 = -1
	if desc.Omitted() {
		k, ok := d.binds.Lookup(uint64(c.cid)<<32 | uint64(h.RSN))
		if !ok {
			d.cnt[dForged]++
			return rt.Drop
		}
		i = d.bindX[k]
	} else {
		k, ok := e.decodeIndex(rq, desc, h)
		if !ok {
			d.cnt[dForged]++
			return rt.Drop
		}
		var v rt.Verdict
		if i, v = e.bindSend(ci, c, rq, h, p, desc, k); i < 0 {
			return v
		}
	}
	return e.placeSend(ci, rq, i, h, p)
}

// bindSend finds or makes the binding of Send k for a packet that carries
// its index. It returns the context, or -1 and the packet's verdict.
func (e *Endpoint) bindSend(ci int32, c *conn, rq *recvQueue, h *wire.Header, p []byte, desc dix.Desc, k uint32) (int32, rt.Verdict) {
	d := &e.dx
	w := &rq.wqes[k&uint32(len(rq.wqes)-1)]
	if bound, _ := rq.q.Bound(k); bound {
		if w.x < 0 || e.xacts[w.x].rsn != h.RSN {
			// WQE k belongs to another Send: a misdirected or forged
			// index. Not acknowledged, so a packet that really holds this
			// PSN still comes.
			d.cnt[dForged]++
			return -1, rt.Drop
		}
		return w.x, rt.Accept
	}
	// Room for a binding (and, on an ordered connection, for its turn in
	// the request order) before the queue commits to one.
	if len(e.freeX) == 0 || d.binds.Len() >= d.binds.Cap() ||
		c.peerOrdered && !e.admissible(h.RSN != c.reqBase, 2) {
		return -1, rt.NoResources
	}
	if _, ok := d.binds.Lookup(uint64(c.cid)<<32 | uint64(h.RSN)); ok {
		d.cnt[dForged]++ // this RSN is bound to another WQE already
		return -1, rt.Drop
	}
	inOrder := desc.Kind() == dix.None
	switch v := rq.q.Arrive(k, inOrder); v {
	case dix.BoundDirect, dix.BoundElement:
		if v == dix.BoundElement {
			d.cnt[dBindsElement]++
			d.elems++
			d.cnt[dPeakElements] = max(d.cnt[dPeakElements], uint64(d.elems))
		} else {
			d.cnt[dBindsDirect]++
		}
		if uint64(h.ReqLen) > uint64(len(w.mem)) {
			// Longer than its WQE: the WQE completes in error, nothing is
			// written, and the packet is refused (the sender's Send fails;
			// any later packet of it finds the WQE consumed and is dropped).
			if v == dix.BoundElement {
				d.elems--
			}
			e.refuseTooLong(ci, rq, h, k)
			_ = e.holdTurn(ci, c, h, RefusalRecvTooSmall) // admitted above
			e.drainHeld(ci, rq)
			return -1, rt.ULPErrorCode(uint8(RefusalRecvTooSmall))
		}
		if !inOrder && !c.peerOrdered && h.Offset == 0 && uint64(len(p)) == uint64(h.ReqLen) {
			// The whole Send in one packet: placed and completed at once,
			// with no context and no binding to find later packets by.
			copy(w.mem, p)
			d.cnt[dBytesPlaced] += uint64(len(p))
			d.cnt[dBytesCopied] += uint64(len(p))
			if v == dix.BoundElement {
				d.cnt[dPlacedElement]++
				d.elems--
			} else {
				d.cnt[dPlacedDirect]++
			}
			e.recvDone(ci, rq, k, h.RSN, h.ReqLen, StatusOK)
			return -1, rt.Accept
		}
		i, x := e.allocX(ci, roleTarget)
		x.kind, x.rsn, x.length = OpSend, h.RSN, h.ReqLen
		x.mem = w.mem[:h.ReqLen:h.ReqLen]
		x.snd.k, x.snd.elem = k, v == dix.BoundElement
		ent, err := d.binds.Insert(uint64(c.cid)<<32 | uint64(h.RSN))
		if err != nil {
			panic("txn: Send binding table full despite the check") // a bug
		}
		d.bindX[ent] = i
		x.snd.bound, x.snd.entry = true, ent
		w.x = i
		if c.peerOrdered && !seqLT(h.RSN, c.reqBase) {
			if _, taken := e.ro.Lookup(c.cid, spacePeerRSN, h.RSN); !taken && e.register(i, c.cid, spacePeerRSN, h.RSN) == nil {
				x.rsnHeld = true // completes in its turn (sendWhole)
			}
		}
		return i, rt.Accept
	case dix.Hold:
		return -1, e.holdPacket(ci, rq, h, p, k)
	case dix.NotPosted:
		d.cnt[dRNRSent]++
		return -1, rt.NotReady
	case dix.Beyond:
		d.cnt[dBeyond]++
		return -1, rt.NotReady
	case dix.Full:
		d.cnt[dElementsFull]++
		return -1, rt.NotReady
	}
	// WQE k is consumed already, and not by a Send refused lately (see
	// onSend): every packet of a Send that completed was accepted, so the
	// transport takes no copy of it again; this one is forged, or of a
	// Send whose refusal is forgotten. Not acknowledged: the sender, if
	// any, abandons it.
	d.cnt[dStale]++
	return -1, rt.Drop
}

// refuseTooLong ends WQE k in error for a Send longer than it: nothing is
// written, and every later packet or copy of the Send is refused too.
func (e *Endpoint) refuseTooLong(ci int32, rq *recvQueue, h *wire.Header, k uint32) {
	e.dx.cnt[dTooLong]++
	rq.rememberRefusal(h.RSN, RefusalRecvTooSmall)
	e.recvDone(ci, rq, k, h.RSN, h.ReqLen, StatusLocalLength)
}

// placeSend copies a packet into its Send's WQE.
func (e *Endpoint) placeSend(ci int32, rq *recvQueue, i int32, h *wire.Header, p []byte) rt.Verdict {
	d := &e.dx
	x := &e.xacts[i]
	if x.length != h.ReqLen || x.rsn != h.RSN {
		e.cnt.own[cMalformed]++
		return rt.ULPError
	}
	copy(x.mem[h.Offset:], p)
	n := uint64(len(p))
	x.received += uint32(len(p))
	d.cnt[dBytesPlaced] += n
	d.cnt[dBytesCopied] += n
	if x.snd.elem {
		d.cnt[dPlacedElement]++
	} else {
		d.cnt[dPlacedDirect]++
	}
	if x.received == x.length {
		e.sendWhole(ci, rq, i)
	}
	return rt.Accept
}

// sendWhole: target Send context i is placed whole. Unordered, its WQE
// completes now; ordered, when its turn in the request order comes
// (release, sendReleased).
func (e *Endpoint) sendWhole(ci int32, rq *recvQueue, i int32) {
	x := &e.xacts[i]
	if x.rsnHeld {
		x.snd.whole = true
		e.requestComplete(ci, &e.conns[ci], i)
		return
	}
	e.finishSend(ci, rq, i, StatusOK)
	e.drainHeld(ci, rq)
}

// sendReleased is release for a target Send context: its turn in the
// request order came. A Send placed whole completes its WQE; a failed one
// (a placeholder) only frees its context.
func (e *Endpoint) sendReleased(ci int32, i int32) {
	x := &e.xacts[i]
	if x.state == targetFailed || !x.snd.whole {
		e.maybeFreeTarget(i)
		return
	}
	rq := e.dx.rq[ci]
	e.finishSend(ci, rq, i, StatusOK)
	e.drainHeld(ci, rq)
}

// sendFailOrdered ends target Send context i (holding its turn) with st:
// its WQE completes in error now, and its turn passes with nothing
// delivered.
func (e *Endpoint) sendFailOrdered(ci int32, rq *recvQueue, i int32, st Status) {
	x := &e.xacts[i]
	k, rsn, n := x.snd.k, x.rsn, x.length
	if x.snd.bound {
		x.snd.bound = false
		e.dx.unbind(x)
	}
	e.setState(x, targetFailed)
	e.recvDone(ci, rq, k, rsn, n, st)
	e.requestComplete(ci, &e.conns[ci], i)
}

// holdTurn keeps a failed Send's turn in the peer's request order (an
// ordered connection) with a placeholder, so the requests after it are
// not held for it. rt.NoResources when there is no room (the packet
// comes back), else rt.Accept.
func (e *Endpoint) holdTurn(ci int32, c *conn, h *wire.Header, why Refusal) rt.Verdict {
	if !c.peerOrdered {
		return rt.Accept
	}
	return e.placeholder(ci, c, h, OpSend, false, why)
}

// finishSend completes Send context i's WQE with st and frees the context.
func (e *Endpoint) finishSend(ci int32, rq *recvQueue, i int32, st Status) {
	x := &e.xacts[i]
	k, rsn, n := x.snd.k, x.rsn, x.length
	e.freeXact(i)
	e.recvDone(ci, rq, k, rsn, n, st)
	e.maybeClose(ci)
}

// unbind drops a target Send context's binding (freeXact).
func (d *dixEP) unbind(x *xact) {
	d.binds.DeleteIndex(x.snd.entry)
	if x.snd.elem {
		d.elems--
	}
	if rq := d.rq[x.conn]; rq != nil {
		if w := &rq.wqes[x.snd.k&uint32(len(rq.wqes)-1)]; w.x >= 0 {
			w.x = -1
		}
	}
}

// onSendNotice applies the initiator's abort notice for a Send: its WQE
// is consumed with StatusRemoteAbandoned (marked, if not yet posted, and
// consumed when posted).
func (e *Endpoint) onSendNotice(ci int32, c *conn, h *wire.Header, desc dix.Desc) rt.Verdict {
	d := &e.dx
	e.cnt.own[cNoticesReceived]++
	rq, err := e.recvQueue(ci)
	if err != nil {
		return rt.NotReady
	}
	if desc.Omitted() {
		d.cnt[dForged]++
		return rt.Accept
	}
	k, ok := e.decodeIndex(rq, desc, h)
	if !ok {
		d.cnt[dForged]++
		return rt.Accept
	}
	if c.peerOrdered && !e.admissible(h.RSN != c.reqBase, 2) {
		return rt.NoResources // no room to keep its turn: the notice comes back
	}
	switch rq.q.Abort(k) {
	case dix.Placed:
		w := &rq.wqes[k&uint32(len(rq.wqes)-1)]
		if w.x < 0 {
			d.cnt[dForged]++
			return rt.Accept
		}
		// The notice's index is the sender's own count of its Sends: WQE k
		// was Send k's. Bound to another RSN, a misdirected packet took it
		// (its own Send's packets are dropped since): it ends all the same,
		// else it would never complete.
		switch x := &e.xacts[w.x]; {
		case x.snd.whole:
			return rt.Accept // placed whole already, waiting for its turn
		case x.rsn != h.RSN:
			d.cnt[dForged]++
			if x.rsnHeld {
				e.sendFailOrdered(ci, rq, w.x, StatusRemoteAbandoned)
			} else {
				e.finishSend(ci, rq, w.x, StatusRemoteAbandoned)
			}
			_ = e.holdTurn(ci, c, h, RefusalUnspecified) // admitted above
		case x.rsnHeld:
			e.sendFailOrdered(ci, rq, w.x, StatusRemoteAbandoned)
		default:
			e.finishSend(ci, rq, w.x, StatusRemoteAbandoned)
		}
	case dix.BoundDirect: // posted, nothing of it arrived
		e.recvDone(ci, rq, k, h.RSN, 0, StatusRemoteAbandoned)
		_ = e.holdTurn(ci, c, h, RefusalUnspecified) // admitted above
	case dix.NotPosted: // marked
		_ = e.holdTurn(ci, c, h, RefusalUnspecified)
	case dix.Beyond:
		d.cnt[dBeyond]++
		return rt.NotReady
	default:
		d.cnt[dStale]++
		return rt.Accept
	}
	d.cnt[dNoticesApplied]++
	e.dropHeld(ci, rq, k)
	e.drainHeld(ci, rq)
	return rt.Accept
}

// holdPacket copies a baseline packet that came before its turn into the
// hold buffer.
func (e *Endpoint) holdPacket(ci int32, rq *recvQueue, h *wire.Header, p []byte, k uint32) rt.Verdict {
	d := &e.dx
	if w := &rq.wqes[k&uint32(len(rq.wqes)-1)]; uint64(h.ReqLen) > uint64(len(w.mem)) {
		// Longer than its WQE: that WQE completes in error now (out of
		// order), nothing is held, and the Send is refused. On an ordered
		// connection it keeps its turn first, as on the direct path (no
		// room for that: the packet comes back, nothing changed).
		c := &e.conns[ci]
		if c.peerOrdered && !e.admissible(h.RSN != c.reqBase, 2) {
			return rt.NoResources
		}
		e.refuseTooLong(ci, rq, h, k)
		e.dropHeld(ci, rq, k)
		_ = e.holdTurn(ci, c, h, RefusalRecvTooSmall) // admitted above
		return rt.ULPErrorCode(uint8(RefusalRecvTooSmall))
	}
	if len(d.freeChunk) == 0 || len(p) > e.seg {
		d.cnt[dHoldFull]++
		return rt.NoResources
	}
	j := d.freeChunk[len(d.freeChunk)-1]
	d.freeChunk = d.freeChunk[:len(d.freeChunk)-1]
	copy(d.hold[int(j)*e.seg:], p)
	d.chunks[j] = hchunk{k: k, rsn: h.RSN, reqLen: h.ReqLen, off: h.Offset, n: uint32(len(p)), next: rq.held}
	rq.held = j
	d.cnt[dHeld]++
	d.cnt[dBytesCopied] += uint64(len(p))
	d.cnt[dHeldBytes] += uint64(len(p))
	d.cnt[dPeakHeldBytes] = max(d.cnt[dPeakHeldBytes], d.cnt[dHeldBytes])
	return rt.Accept
}

// drainHeld places the held packets of the head Send, as long as the head
// has some (each completion moves the head on). Packets of Sends already
// consumed are dropped (counted). When no context is free for the head
// Send, its packets stay held and the drain is retried on the
// connection's next packet or post.
func (e *Endpoint) drainHeld(ci int32, rq *recvQueue) {
	d := &e.dx
	rq.stalled = false
	for rq.held >= 0 {
		head := rq.q.Head()
		j, prev := rq.held, int32(-1)
		for j >= 0 {
			ch := &d.chunks[j]
			if seqLT(ch.k, head) {
				// Its WQE was consumed (the Send failed): drop it.
				next := ch.next
				e.unlinkChunk(rq, j, prev)
				d.cnt[dStale]++
				j = next
				continue
			}
			if ch.k == head {
				break
			}
			prev, j = j, ch.next
		}
		if j < 0 {
			return
		}
		ch := d.chunks[j]
		p := d.hold[int(j)*e.seg : int(j)*e.seg+int(ch.n)]
		h := wire.Header{Type: wire.TypeSend, RSN: ch.rsn, ReqLen: ch.reqLen, Offset: ch.off}
		i, v := e.bindSend(ci, &e.conns[ci], rq, &h, p, 0, ch.k)
		if i < 0 && v == rt.NoResources {
			rq.stalled = true
			return
		}
		// Unlinked before placing: placing may complete the Send.
		e.unlinkChunk(rq, j, prev)
		if i < 0 {
			if v != rt.Accept { // else placed whole, and completed, already
				d.cnt[dStale]++
			}
			continue
		}
		x := &e.xacts[i]
		if x.length != ch.reqLen || x.rsn != ch.rsn {
			d.cnt[dForged]++
			continue
		}
		copy(x.mem[ch.off:], p)
		n := uint64(len(p))
		x.received += uint32(len(p))
		d.cnt[dBytesPlaced] += n
		d.cnt[dBytesCopied] += n
		d.cnt[dPlacedHeld]++
		if x.received == x.length {
			if x.rsnHeld {
				x.snd.whole = true
				e.requestComplete(ci, &e.conns[ci], i) // may drain again
			} else {
				e.finishSend(ci, rq, i, StatusOK)
			}
		}
	}
}

// unlinkChunk takes chunk j (after prev, or first) off the connection's
// held list and frees it.
func (e *Endpoint) unlinkChunk(rq *recvQueue, j, prev int32) {
	d := &e.dx
	if prev < 0 {
		rq.held = d.chunks[j].next
	} else {
		d.chunks[prev].next = d.chunks[j].next
	}
	d.cnt[dHeldBytes] -= uint64(d.chunks[j].n)
	d.freeChunk = append(d.freeChunk, j)
}

// dropHeld frees the held packets of Send k (its WQE was consumed).
func (e *Endpoint) dropHeld(ci int32, rq *recvQueue, k uint32) {
	d := &e.dx
	prev := int32(-1)
	for j := rq.held; j >= 0; {
		ch := &d.chunks[j]
		next := ch.next
		if ch.k == k {
			if prev < 0 {
				rq.held = next
			} else {
				d.chunks[prev].next = next
			}
			d.cnt[dHeldBytes] -= uint64(ch.n)
			d.freeChunk = append(d.freeChunk, j)
		} else {
			prev = j
		}
		j = next
	}
}

// recvTeardown flushes connection slot ci's receive queue when the
// connection ends: every WQE not completed completes with st, in posting
// order; held packets are dropped; the queue and the Send window restart.
func (e *Endpoint) recvTeardown(ci int32, st Status) {
	d := &e.dx
	if rq := d.rq[ci]; rq != nil {
		for j := rq.held; j >= 0; j = d.chunks[j].next {
			d.cnt[dHeldBytes] -= uint64(d.chunks[j].n)
			d.freeChunk = append(d.freeChunk, j)
		}
		rq.held = -1
		rq.refusedN = 0
		c := &e.conns[ci]
		for k := rq.q.Head(); seqLT(k, rq.q.Posted()); k++ {
			w := &rq.wqes[k&uint32(len(rq.wqes)-1)]
			if !w.live {
				continue // completed already (out of order)
			}
			cp := Completion{Conn: c.handle, Tag: w.wrid, Kind: OpRecv, Status: st, WQE: k, Posted: w.posted, Done: e.now}
			*w = wqe{x: -1}
			d.cnt[dRecvCompletedErr]++
			if !e.cq.push(cp) {
				panic("txn: completion queue overflow despite reservation")
			}
		}
		rq.q.Reset(e.opts.InitialSeq)
	}
	_ = d.configure(e, int(ci), dix.Config{})
}
