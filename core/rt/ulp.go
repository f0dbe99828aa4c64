package rt

import (
	"github.com/peregrine-net/peregrine/core/wire"
)

// Verdict is ULP.Deliver's answer for one packet: one of the
// constants below, or ULPErrorCode(code).
type Verdict uint16

const (
	// Accept: the packet was consumed; it counts as received and is never
	// delivered again.
	Accept Verdict = iota
	// NotReady: the ULP cannot take it now. The packet is not marked
	// received and the peer gets a receiver-not-ready NACK: it resends
	// after Options.RNRTimeout.
	NotReady
	// NoResources: like NotReady, but NACKed as resource exhaustion.
	NoResources
	// ULPError: the ULP refuses the packet for good (it names memory that
	// is not registered, say). It is not marked received; the peer gets a
	// ULP-error NACK, reports it (EventNack with the packet's cookie) and
	// replaces the packet by a resync. If that NACK is lost the packet is
	// resent and refused again.
	ULPError
	// OutOfWindow: the ULP cannot take it yet because it came too far
	// ahead of what it waits for (an in-order packet past the gap its
	// window spans). Like NotReady, but NACKed as out of window: the
	// sender holds off for an RTO and the refused transmission does not
	// count toward its RetryLimit (the packet was not lost).
	OutOfWindow
	// Drop: the ULP will not take the packet and has nothing definite to
	// tell the sender (a forged or misdirected packet, or a copy of one
	// whose fate the ULP no longer knows). It is not marked received and
	// neither acknowledged nor NACKed: the sender resends it and, past its
	// retries, abandons it. Counted (RxDropped).
	Drop
)

// ULPErrorCode is ULPError with a code for the peer's ULP: the NACK
// carries it (wire.NackBody.ULPCode) to the sender's EventNack. ULPError
// itself sends code 0.
func ULPErrorCode(code uint8) Verdict { return ULPError | Verdict(code)<<8 }

// kind is the verdict without its ULP code.
func (v Verdict) kind() Verdict { return v & 0xff }

// ulpCode is the code of ULPErrorCode.
func (v Verdict) ulpCode() uint8 { return uint8(v >> 8) }

// ULP is the layer above the transport, as the endpoint sees it: the one
// interface it calls (SetULP). Every call runs on the polling goroutine,
// inside Poll, or inside the ULP's own call that caused it (Conn.Abort
// reports EventFailed, and Conn.Close of a connection still being set up
// EventClosed, before they return).
//
// Re-entrancy, the same for every method: a call may use the endpoint
// as the ULP does between Polls — Open, OpenEarly and every method of
// every Conn, the one it names included (Send, Close, Abort, Abandon,
// SetAwaiting, SetULPContext) — but not Poll, Tick, Stop or Close, which
// would run the endpoint inside itself. The endpoint finishes what it was
// doing on a connection that a call ended without touching it again, even
// when an Open in the same call gave its slot to another connection.
type ULP interface {
	// Deliver takes a reliable packet of c exactly once (unless it is
	// refused, and then again when it is resent); the verdict says
	// whether it was taken. h and payload alias the receive buffer,
	// which the endpoint owns: they are valid during the call only, so
	// copy what must outlive it.
	Deliver(c *Conn, h *wire.Header, payload []byte) Verdict
	// Acked says that the peer acknowledged the packet Window w / PSN psn
	// sent with SendHeader.Cookie cookie. The endpoint released the
	// packet's frame and its reference to a stable payload before the
	// call: nothing is borrowed, and the payload is the ULP's again.
	Acked(c *Conn, w wire.Window, psn uint32, cookie uint64)
	// Event reports a change of a connection (see EventKind). ev is the
	// ULP's copy; ev.Conn stays valid after the call (see Conn).
	Event(ev Event)
}

// SetULP sets the layer that receives reliable packets, ACKs of its
// packets and connection events. Without one every packet is accepted
// and dropped, and ACKs and events go unheard.
func (e *Endpoint) SetULP(u ULP) { e.ulp = u }

func (e *Endpoint) emit(ev Event) {
	if e.ulp != nil {
		e.ulp.Event(ev)
	}
}

// SendHeader is what the ULP chooses of a reliable packet's header. The
// transport fills in the rest: destination CID, PSN, eBSNs, timestamps,
// retry count.
type SendHeader struct {
	// Type is the packet type; its window (Type.Window) is the one the PSN
	// comes from. ConnClose and Resync are the transport's own.
	Type wire.Type
	// Flags: AckRequested, Ordered, IOIInOrder, LastOfMessage and ECNEcho
	// are sent as given; Retransmission and HasExtension are the
	// transport's.
	Flags  wire.Flags
	RSN    uint32
	SSN    uint32
	ReqLen uint32
	Offset uint32
	Phase  wire.Phase
	// SrcPort, when not 0, is this packet's UDP source port (IOI's
	// per-packet entropy, so that a fabric sprays it), and DSCP, when not
	// 0, its IP DSCP (IOI's in-order mark); wire.SetClass writes both. A
	// retransmission keeps them.
	SrcPort uint16
	DSCP    uint8
	// Desc is a Send's delivery-index descriptor (wire.Header.Desc).
	Desc uint8
	// Ext carries the placement, QPN and region extensions; the source CID
	// is the transport's.
	Ext wire.Ext
	// PayloadStable promises that the payload stays valid and unchanged
	// until the packet resolves (its Cookie comes back, or the connection
	// fails) or is given up (Conn.Abandon with its Cookie returns). The transport then keeps a reference to it instead of a
	// copy and copies it straight into each transmission, summing it for
	// the UDP checksum as it copies: one pass over the payload per
	// transmission instead of three. A payload changed meanwhile is sent
	// as it is then (as an RDMA send buffer changed before its completion:
	// the peer may get either version).
	PayloadStable bool
	// Cookie is the ULP's own word for this packet. It is not sent; the
	// transport hands it back when the packet resolves: to ULP.Acked when
	// the peer acknowledges it, in EventNack when the
	// peer's ULP refuses it, in EventAbandoned when it runs out of retries
	// or was given up (Conn.Abandon) and its resync is acknowledged;
	// exactly once, and only when the transport no longer references the
	// packet. A connection that ends hands back none: its end covers them.
	Cookie uint64
}

// Send queues one reliable packet: it takes the next PSN of the type's
// window, copies the payload into a frame that the retransmission engine
// keeps until the peer acknowledges it (or, with PayloadStable, keeps a
// reference to the payload), and returns the PSN; the next Poll
// transmits it. When the window, the congestion window, the CAM or the
// pool is full it returns an error matching ErrBusy and changes nothing:
// retry after a Poll. Send does not allocate.
func (h *Conn) Send(sh SendHeader, payload []byte) (psn uint32, err error) {
	c := h.live()
	if c == nil {
		return 0, ErrClosed
	}
	switch c.state {
	case StateEstablished:
	case StateOpening, StateAccepting:
		if !c.earlySend() {
			return 0, ErrNotEstablished
		}
	default:
		return 0, ErrClosed
	}
	if c.closeWanted {
		return 0, ErrClosed
	}
	w := sh.Type.Window()
	if w == wire.WindowNone || sh.Type == wire.TypeConnClose || sh.Type == wire.TypeResync {
		return 0, ErrBadType
	}
	return h.e.enqueue(c, w, &sh, payload)
}

// CanSend reports whether Send of a packet of type t would find room in
// the windows and the CAM (the pool may still refuse).
func (h *Conn) CanSend(t wire.Type) bool {
	c := h.live()
	if c == nil || c.state != StateEstablished || c.closeWanted {
		return false
	}
	w := t.Window()
	if w == wire.WindowNone {
		return false
	}
	tw := &c.tx[c.window(w)]
	return !tw.full() && int(tw.outstanding) < c.cc.Window() && h.e.retx.Len() < h.e.retx.Cap()
}
