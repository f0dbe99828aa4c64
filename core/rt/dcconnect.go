package rt

import (
	"net/netip"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// # Early data: a connection whose first data does not wait a round trip
//
// The dynamically connected SQs of sched/mcsq connect on demand, once per
// target, and a round trip of setup before every burst would dominate.
// OpenEarly opens a connection that sends at once, as InfiniBand's DC
// transport and UET's SYN-flagged first request do:
//
//   - The initiator chooses the initial PSNs of its own transmit windows
//     (instead of learning the target's choice from ConnAccept) and
//     announces them in its ConnOpen: PSN (request window), Offset (data
//     window), with ReqLen = earlyOpenMark saying so. Send is allowed
//     while the connection is StateOpening: those packets carry
//     destination CID 0 and the source-CID extension, and leave right
//     behind the ConnOpen (control packets go first in every transmit
//     burst), so the connect travels right ahead of the first data. A
//     packet that would not fit its frame with that extension (a
//     full-size segment) is refused with ErrNotEstablished and waits for
//     ConnAccept, as on a connection opened with Open.
//   - The target, on such a ConnOpen, starts its receive windows at the
//     announced PSNs and is established at once (EventEstablished before
//     any data): it accepts in the same breath, and answers ConnAccept as
//     usual. A packet to destination CID 0 with the source-CID extension is
//     found by (that CID, its source address) — the table that finds a
//     repeated ConnOpen — and processed as the connection's own.
//   - The initiator, on ConnAccept, keeps its windows (the target adopted
//     them) and takes the ConnAccept's BSNs as an acknowledgement.
//
// Recovery. A lost ConnOpen is resent on the setup timer (RTO, doubling,
// RetryLimit: then EventFailed, ErrOpenTimeout), as for Open; early data
// that reaches the target before any ConnOpen finds no connection, is
// dropped and counted (RxBadState), and is resent by its own
// retransmission timer, so it lands once a ConnOpen has. A lost ConnAccept
// is answered again to the next ConnOpen, which the initiator resends
// until one arrives; the target's ACKs that overtake it are dropped at the
// initiator (RxBadState) and the data they acknowledged is resent and
// acknowledged again. A refused ConnOpen (the target's Accept policy, a
// ulp-fatal NACK) fails the connection with ErrRefused, and its early
// data, already dropped at the target, is dropped here with it; a full
// table at the target (resource-exhausted NACK) is retried by the setup
// timer. Early packets resent after the ConnAccept still carry CID 0 and
// are found the same way.

// earlyOpenMark in a ConnOpen's ReqLen says the initiator sends before
// ConnAccept and chose its transmit windows' initial PSNs (PSN, Offset).
// A plain ConnOpen carries ReqLen 0.
const earlyOpenMark = 0x44430002 // "DC", version 2: RSN and SSN name the connect

// dcEarly is a connection's early-data state (initiator side).
type dcEarly struct {
	on  bool
	psn [2]uint32 // the initial PSNs announced in ConnOpen, by window-1
	inc uint32    // the endpoint's incarnation, announced in RSN
	num uint32    // the connect number, announced in SSN
}

// replayKey finds an initiator incarnation's record on the target: the
// incarnation and a hash of the initiator's IP and UDP port (the record
// holds the full address, so a collision is refused, not confused).
type replayKey struct {
	Inc      uint32
	AddrHash uint32
}

// replayWin is how far below the highest accepted connect number a
// number may come and still be taken (once).
const replayWin = 64

// replayRec is what the target remembers of an initiator incarnation.
type replayRec struct {
	ip   netip.Addr
	port uint16
	used bool
	high uint32     // the highest connect number accepted
	seen uint64     // bit i: number high-1-i accepted
	last clock.Time // the latest connect accepted
}

// replayCache is the target's memory of early connects (see "Replay").
type replayCache struct {
	keys *cam.Table[replayKey]
	recs []replayRec
	hand int // the eviction scan's position
}

func newReplayCache(capacity int, seed uint64, name string) (replayCache, error) {
	t, err := cam.New[replayKey](cam.Options{Capacity: capacity, Seed: seed | 1, Name: name + " replay cache"})
	if err != nil {
		return replayCache{}, err
	}
	return replayCache{keys: t, recs: make([]replayRec, t.Cap())}, nil
}

// Verdicts of replayCheck.
const (
	replayFresh = iota // a number never accepted: take it
	replayNew          // an incarnation not in the cache: take it, if a record is free
	replayOld          // a number accepted already, or too far below the highest
)

// replayCheck judges an early ConnOpen from peer without changing
// anything: the connection may still fail to be made.
func (e *Endpoint) replayCheck(hd *wire.Header, peer PeerAddr) (key replayKey, verdict int) {
	key = replayKey{Inc: hd.RSN, AddrHash: e.addrHash(peer.IP, peer.Port)}
	idx, ok := e.replay.keys.Lookup(key)
	if !ok {
		return key, replayNew
	}
	r := &e.replay.recs[idx]
	if r.ip != peer.IP || r.port != peer.Port {
		return key, replayOld // two initiators whose keys collide: the newcomer waits
	}
	num := hd.SSN
	if seqLT(r.high, num) {
		return key, replayFresh
	}
	d := r.high - num
	if d == 0 || d > replayWin || r.seen>>(d-1)&1 != 0 {
		return key, replayOld
	}
	return key, replayFresh
}

// replayRoom reports whether a new incarnation's record can be made,
// evicting one older than the replay window if the cache is full.
func (e *Endpoint) replayRoom() bool {
	rc := &e.replay
	if rc.keys.Len() < rc.keys.Cap() {
		return true
	}
	old := e.now.Add(-e.opts.ReplayWindow)
	for range rc.recs {
		i := rc.hand
		rc.hand = (rc.hand + 1) % len(rc.recs)
		if r := &rc.recs[i]; r.used && r.last < old {
			rc.keys.DeleteIndex(uint32(i))
			*r = replayRec{}
			return true
		}
	}
	return false
}

// replayCommit records an accepted early connect.
func (e *Endpoint) replayCommit(key replayKey, hd *wire.Header, peer PeerAddr) {
	rc := &e.replay
	idx, ok := rc.keys.Lookup(key)
	if !ok {
		var err error
		if idx, err = rc.keys.Insert(key); err != nil {
			e.cnt.own[cInternal]++ // replayRoom made room
			return
		}
		rc.recs[idx] = replayRec{ip: peer.IP, port: peer.Port, used: true, high: hd.SSN}
	}
	r := &rc.recs[idx]
	r.last = e.now
	num := hd.SSN
	switch {
	case !ok:
	case seqLT(r.high, num):
		if d := num - r.high; d > replayWin {
			r.seen = 0
		} else {
			r.seen = r.seen<<d | 1<<(d-1)
		}
		r.high = num
	default:
		r.seen |= 1 << (r.high - num - 1)
	}
}

// earlyAdmit applies the replay rule to an early ConnOpen before a slot is
// taken; it reports false when the ConnOpen was refused (and answered).
func (e *Endpoint) earlyAdmit(f *wire.Frame, peer PeerAddr) (replayKey, bool) {
	hd := &f.Header
	if hd.RSN == 0 || hd.SSN == 0 {
		e.cnt.own[cRxMalformed]++
		return replayKey{}, false
	}
	key, v := e.replayCheck(hd, peer)
	switch {
	case v == replayOld:
		e.cnt.own[cEarlyReplays]++
		e.reject(f, wire.NackULPFatal)
		return key, false
	case v == replayNew && !e.replayRoom():
		e.cnt.own[cReplayCacheFull]++
		e.reject(f, wire.NackResourceExhausted)
		return key, false
	}
	return key, true
}

// isEarlyOpen reports whether hd is an early ConnOpen.
func isEarlyOpen(hd *wire.Header) bool { return hd.ReqLen == earlyOpenMark }

// nextConnect returns the endpoint's next connect number (never 0).
func (e *Endpoint) nextConnect() uint32 {
	e.connects++
	if e.connects == 0 {
		e.connects++
	}
	return e.connects
}

// OpenEarly is Open for a connection that may Send at once, before
// ConnAccept (see "Early data" above). It fails as Open does.
func (e *Endpoint) OpenEarly(peer PeerAddr) (*Conn, error) {
	h, err := e.Open(peer)
	if err != nil {
		return nil, err
	}
	c := h.c
	c.early.on = true
	c.early.inc, c.early.num = e.incarnation, e.nextConnect()
	for k := range 2 {
		c.early.psn[k] = e.initialPSN()
		c.tx[k].reset(c.early.psn[k])
	}
	return h, nil
}

// earlySend reports whether c may send although not yet established.
func (c *conn) earlySend() bool { return c.early.on && c.state == StateOpening }

// earlyOpen marks an early connection's ConnOpen.
func (c *conn) earlyOpen(hd *wire.Header) {
	if c.early.on && hd.Type == wire.TypeConnOpen {
		hd.PSN, hd.Offset, hd.ReqLen = c.early.psn[0], c.early.psn[1], earlyOpenMark
		hd.RSN, hd.SSN = c.early.inc, c.early.num
	}
}

// earlyExt makes an early packet findable before the target's CID is
// known: destination CID 0 and our CID in the source-CID extension. It
// reports false when the packet (rest bytes besides its header) would not
// fit maxFrame with the extension: such a packet (a full-size segment)
// waits for ConnAccept, like a packet of a connection opened with Open.
func (c *conn) earlyExt(hd *wire.Header, rest, maxFrame int) bool {
	if !c.earlySend() {
		return true
	}
	hd.Ext.Present |= wire.ExtSourceCID
	hd.Ext.SourceCID = c.localCID
	if rest+hd.Len() > maxFrame {
		hd.Ext.Present &^= wire.ExtSourceCID
		hd.Ext.SourceCID = 0
		return false
	}
	return true
}

// acceptEarly completes the target's side of an early ConnOpen: the
// receive windows start at the initiator's PSNs, and the connection is
// established at once, before the initiator's first data is processed.
// It reports whether hd was such a ConnOpen.
func (e *Endpoint) acceptEarly(c *conn, hd *wire.Header) bool {
	if !isEarlyOpen(hd) {
		return false
	}
	c.rx[0].bsn, c.rx[1].bsn = hd.PSN, hd.Offset
	if e.establish(c) {
		e.wantCtrl(c, ctrlAccept) // establish dropped it from the control queue
	}
	return true
}

// onEarlyData steers a packet sent before ConnAccept (destination CID 0)
// to the connection its source CID and address name; one that finds none
// (its ConnOpen has not arrived, or was refused) is dropped and counted.
func (e *Endpoint) onEarlyData(f *wire.Frame) {
	peerCID := f.Header.Ext.SourceCID
	idx, ok := e.openKeys.Lookup(openKey{PeerCID: peerCID, AddrHash: e.addrHash(f.SrcIP, f.SrcPort)})
	if !ok {
		e.cnt.own[cRxBadState]++
		return
	}
	c := &e.conns[e.openConn[idx]]
	if c.peerCID != peerCID || c.addrs.DstIP != f.SrcIP || c.addrs.DstPort != f.SrcPort || c.state == StateOpening {
		e.cnt.own[cRxBadSource]++
		return
	}
	if !e.unsealed(c, &f.Header) {
		return
	}
	e.onPacket(c, &f.Header, f.Payload)
}

// isEarlyData reports whether a frame for no CID is an early packet.
func isEarlyData(hd *wire.Header) bool {
	return hd.Ext.Present&wire.ExtSourceCID != 0 && hd.Type.Window() != wire.WindowNone
}

// earlyAccepted is the initiator's ConnAccept for an early connection:
// its windows stand (the target adopted them); the BSNs the ConnAccept
// carries acknowledge what arrived before it was sent. It reports false if
// the ULP, told of an acknowledged packet, ended the connection.
func (e *Endpoint) earlyAccepted(c *conn, hd *wire.Header) bool {
	return e.piggyback(c, hd)
}
