package rt

import "github.com/peregrine-net/peregrine/core/wire"

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
const earlyOpenMark = 0x44430001 // "DC", version 1

// dcEarly is a connection's early-data state (initiator side).
type dcEarly struct {
	on  bool
	psn [2]uint32 // the initial PSNs announced in ConnOpen, by window-1
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
	if hd.ReqLen != earlyOpenMark {
		return false
	}
	c.rx[0].bsn, c.rx[1].bsn = hd.PSN, hd.Offset
	e.establish(c)
	e.wantCtrl(c, ctrlAccept) // establish dropped it from the control queue
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
	e.onPacket(c, &f.Header, f.Payload)
}

// isEarlyData reports whether a frame for no CID is an early packet.
func isEarlyData(hd *wire.Header) bool {
	return hd.Ext.Present&wire.ExtSourceCID != 0 && hd.Type.Window() != wire.WindowNone
}

// earlyAccepted is the initiator's ConnAccept for an early connection:
// its windows stand (the target adopted them); the BSNs the ConnAccept
// carries acknowledge what arrived before it was sent.
func (e *Endpoint) earlyAccepted(c *conn, hd *wire.Header) {
	e.piggyback(c, hd)
}
