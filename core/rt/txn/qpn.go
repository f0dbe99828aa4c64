package txn

import "github.com/peregrine-net/peregrine/core/rt"

// Global QP numbers (docs/qp-translation.md): with Options.Transport.QPN enabled, every
// connection is also named by a 24-bit global QP number that the transport
// hands out from its CAM and retires when the connection ends; the host
// names connections by it (ConnByQPN), as a verbs program names a QP by
// ibv_qp.qp_num. The wire carries both ends' numbers in every reliable
// packet and the transport drops packets whose numbers do not translate
// to the connection (rt.QPNOptions).

// QPN returns the connection's global QP number (0 when the transport
// has none, or once the connection is gone: its number is retired).
func (h *Conn) QPN() uint32 {
	if c := h.live(); c != nil {
		return c.rc.QPN()
	}
	return 0
}

// PeerQPN returns the peer's global QP number (0 before the setup ends or
// when the transport has none).
func (h *Conn) PeerQPN() uint32 {
	if c := h.live(); c != nil {
		return c.rc.PeerQPN()
	}
	return 0
}

// ConnByQPN returns the live connection holding global QP number qpn,
// translated through the transport's CAM, or nil (a retired or unknown
// number). Call it on the endpoint's goroutine.
func (e *Endpoint) ConnByQPN(qpn uint32) *Conn {
	rc := e.rt.ConnByQPN(qpn)
	if rc == nil {
		return nil
	}
	if _, c := e.connOf(rc); c != nil {
		return c.handle
	}
	return nil
}

// QPNStats returns the transport's global-QPN counters (see rt.QPNStats).
// Safe from any goroutine.
func (e *Endpoint) QPNStats() rt.QPNStats { return e.rt.QPNStats() }
