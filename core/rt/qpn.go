package rt

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/wire"
)

// QPNOptions turn on global QP numbers (docs/qp-translation.md) on an endpoint.
//
// Each connection then also has a 24-bit global QP number, handed out by a
// core/qpx CAM whose local contexts are the endpoint's connection slots
// (MaxConns of them): the number the host sees (Conn.QPN) and names the
// connection by (Endpoint.ConnByQPN translates it through the CAM). The
// numbers are exchanged in the setup — ConnOpen and ConnAccept carry the
// QPN extension (wire.ExtQPN) with the sender's number, ConnAccept and
// the initiator's ACK-bearing packets the receiver's — and every reliable
// packet carries both (destination: the peer's, source: ours). A
// received reliable packet's destination QPN is translated through the
// CAM and must name the connection its CID named, and its source QPN must
// be the peer's; else it is dropped and counted (QPNStats): a retired
// number (a stale packet of a closed connection whose CID matched by
// generation wrap), an unknown one, one naming another connection, a
// wrong source, or none at all. Closing a connection retires its number at
// once; numbers rotate through the 2^24 space before any reuse.
//
// It changes the wire (eight more bytes per reliable packet, and the
// general decoder instead of the IPv4 fast path), so it is off by default;
// both ends must agree. An endpoint without it ignores a peer's QPN
// extension.
type QPNOptions struct {
	// Enabled turns global QP numbers on.
	Enabled bool
	// Start is the first number of the rotation (0: qpx.FirstQPN); tests
	// start near the end of the space to cross the wrap.
	Start uint32
}

// ErrQPNTable is wrapped by Open when every QP context is live.
var ErrQPNTable = errors.New("rt: no free QP context")

// QPNStats are the global-QPN counters of an endpoint.
type QPNStats struct {
	// CAM is the qpx table's counters (opens, retires, translations, and
	// the drops it classified: retired or unknown numbers).
	CAM qpx.Stats
	// Packets dropped: DropRetired and DropUnknown count destination
	// QPNs the CAM did not find; DropMisrouted a live number that names
	// another connection than the CID did; DropSource a source QPN that is
	// not the peer's; DropMissing a reliable packet without the extension.
	DropRetired, DropUnknown, DropMisrouted, DropSource, DropMissing uint64
}

// Dropped sums the drops.
func (s QPNStats) Dropped() uint64 {
	return s.DropRetired + s.DropUnknown + s.DropMisrouted + s.DropSource + s.DropMissing
}

func (s QPNStats) String() string {
	return fmt.Sprintf("%v drop{retired=%d unknown=%d misrouted=%d source=%d missing=%d}",
		s.CAM, s.DropRetired, s.DropUnknown, s.DropMisrouted, s.DropSource, s.DropMissing)
}

const (
	qRetired = iota
	qUnknown
	qMisrouted
	qSource
	qMissing
	nQCounters
)

// qpnState is an endpoint's QPN machinery; nil when QPNOptions is off.
type qpnState struct {
	tb  *qpx.Table
	own [nQCounters]uint64
	pub [nQCounters]atomic.Uint64
	mu  sync.Mutex
	cam qpx.Stats
}

// initQPN builds the CAM when the option is on. The fast path decodes no
// QPN extension, and every reliable packet carries one now.
func (e *Endpoint) initQPN() error {
	if !e.opts.QPN.Enabled {
		return nil
	}
	tb, err := qpx.New(qpx.Options{Slots: e.opts.MaxConns, Start: e.opts.QPN.Start, Seed: e.rng.Uint64() | 1, Name: e.opts.Name + " QPN CAM"})
	if err != nil {
		return invalid("Options.QPN: %v", err)
	}
	e.qpn = &qpnState{tb: tb, cam: tb.Stats()}
	e.fast4 = false
	return nil
}

// openQPN gives connection c a global number; false when the CAM is full
// (it never is while the connection table is not: both have MaxConns).
func (e *Endpoint) openQPN(c *conn) bool {
	if e.qpn == nil {
		return true
	}
	q, _, err := e.qpn.tb.Open(qpx.Context{Ref: uint64(c.idx)})
	if err != nil {
		return false
	}
	c.localQPN, c.peerQPN = q, 0
	return true
}

// closeQPN retires c's number.
func (e *Endpoint) closeQPN(c *conn) {
	if e.qpn == nil || c.localQPN == 0 {
		return
	}
	if e.qpn.tb.Close(c.localQPN) != nil {
		e.cnt.own[cInternal]++
	}
	if h := c.handle; h != nil {
		h.finalQPN = c.localQPN
	}
	c.localQPN, c.peerQPN = 0, 0
}

// stampQPN adds the QPN extension to a packet for c.
func (e *Endpoint) stampQPN(c *conn, x *wire.Ext) {
	if e.qpn == nil {
		return
	}
	x.Present |= wire.ExtQPN
	x.DstQPN, x.SrcQPN = c.peerQPN, c.localQPN
}

// learnQPN records the peer's number from a setup packet (ConnOpen at the
// target, ConnAccept at the initiator). A ConnAccept must name our number.
func (e *Endpoint) learnQPN(c *conn, hd *wire.Header) bool {
	if e.qpn == nil {
		return true
	}
	if hd.Ext.Present&wire.ExtQPN == 0 || hd.Ext.SrcQPN == 0 {
		e.qpn.own[qMissing]++
		return false
	}
	if hd.Type == wire.TypeConnAccept && hd.Ext.DstQPN != c.localQPN {
		e.qpn.own[qMisrouted]++
		return false
	}
	c.peerQPN = hd.Ext.SrcQPN
	return true
}

// checkQPN checks a packet the CID steered to c: a reliable packet's
// destination QPN must translate to c's slot and its source be c's peer.
// ACKs, NACKs and setup packets are the transport's own and carry none.
func (e *Endpoint) checkQPN(c *conn, hd *wire.Header) bool {
	if e.qpn == nil || hd.Type.Window() == wire.WindowNone {
		return true
	}
	q := e.qpn
	if hd.Ext.Present&wire.ExtQPN == 0 {
		q.own[qMissing]++
		return false
	}
	local, ok := q.tb.Translate(hd.Ext.DstQPN)
	switch {
	case !ok && q.tb.Issued(hd.Ext.DstQPN):
		q.own[qRetired]++
		return false
	case !ok:
		q.own[qUnknown]++
		return false
	case q.tb.Context(local).Ref != uint64(c.idx):
		q.own[qMisrouted]++
		return false
	case c.peerQPN != 0 && hd.Ext.SrcQPN != c.peerQPN:
		q.own[qSource]++
		return false
	}
	return true
}

// publishQPN copies the counters for other goroutines.
func (e *Endpoint) publishQPN() {
	q := e.qpn
	if q == nil {
		return
	}
	for i := range q.own {
		q.pub[i].Store(q.own[i])
	}
	s := q.tb.Stats()
	q.mu.Lock()
	q.cam = s
	q.mu.Unlock()
}

// QPNStats returns the global-QPN counters as of the last Poll (zero when
// QPNOptions is off). Safe from any goroutine.
func (e *Endpoint) QPNStats() QPNStats {
	q := e.qpn
	if q == nil {
		return QPNStats{}
	}
	q.mu.Lock()
	s := QPNStats{CAM: q.cam}
	q.mu.Unlock()
	s.DropRetired, s.DropUnknown = q.pub[qRetired].Load(), q.pub[qUnknown].Load()
	s.DropMisrouted, s.DropSource, s.DropMissing = q.pub[qMisrouted].Load(), q.pub[qSource].Load(), q.pub[qMissing].Load()
	return s
}

// ConnByQPN translates a global QP number through the CAM to the live
// connection that holds it (nil when none does): how the host names a
// connection. Call it on the polling goroutine.
func (e *Endpoint) ConnByQPN(qpn uint32) *Conn {
	if e.qpn == nil {
		return nil
	}
	local, ok := e.qpn.tb.Lookup(qpn)
	if !ok {
		return nil
	}
	c := &e.conns[e.qpn.tb.Context(local).Ref]
	if c.state == StateFree || c.localQPN != qpn {
		return nil
	}
	return c.handle
}

// QPN returns the connection's global QP number (0 when the endpoint has
// no QPNs); after the connection ended, the number it had (now retired).
func (h *Conn) QPN() uint32 {
	if c := h.live(); c != nil {
		return c.localQPN
	}
	return h.finalQPN
}

// PeerQPN returns the peer's global QP number (0 until the setup told it).
func (h *Conn) PeerQPN() uint32 {
	if c := h.live(); c != nil {
		return c.peerQPN
	}
	return 0
}
