package rt

import (
	"strconv"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// State is a connection's state.
type State uint8

// Connection states.
const (
	// StateFree: the slot holds no connection (a Conn in this state has
	// been released; see Conn).
	StateFree State = iota
	// StateOpening: the initiator sent ConnOpen and waits for ConnAccept.
	StateOpening
	// StateAccepting: the target answered ConnAccept and waits for the
	// initiator's first packet (its ACK of ConnAccept, or data).
	StateAccepting
	// StateEstablished: both sides know each other's CID; packets flow.
	StateEstablished
	// StateClosing: a close was asked for (locally or by the peer's
	// ConnClose); the connection delivers and retransmits until both
	// directions are acknowledged.
	StateClosing
	// StateClosed: closed cleanly; the slot lingers to acknowledge the
	// peer's retransmissions, then is freed.
	StateClosed
	// StateFailed: the connection failed (Conn.Err says why) and was freed.
	StateFailed
)

var stateNames = [...]string{"free", "opening", "accepting", "established", "closing", "closed", "failed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	// EventEstablished: the connection can carry packets (the initiator got
	// ConnAccept; the target got the initiator's first packet). On the
	// target this is how the ULP first learns of the Conn.
	EventEstablished EventKind = iota + 1
	// EventClosed: both directions closed cleanly.
	EventClosed
	// EventFailed: the connection failed; Err says why (ErrAborted after
	// Conn.Abort). Its packets were dropped and every unacknowledged one
	// is lost; their cookies are not handed back. Emitted once per
	// connection the ULP knew of (see the package doc, Failure semantics).
	EventFailed
	// EventAbandoned: the packet Window/PSN ran out of retransmissions and
	// a resync took its place, which the peer acknowledged. The packet may
	// or may not have been delivered; the connection goes on.
	EventAbandoned
	// EventNack: the peer NACKed packet Window/PSN with Nack (a ULP error,
	// an unexpected packet, or receiver-not-ready and resource exhaustion,
	// which the transport also handles by holding off), which the ULP
	// should handle. For a ULP
	// error (the peer's ULP.Deliver answered ULPError) the packet is
	// resolved: the event carries its cookie, a resync takes its place so
	// the windows move on, and no ULP.Acked call or EventAbandoned
	// follows for it; EventResynced does, once that resync is
	// acknowledged. Any other code is news only: the packet stays
	// outstanding and the event carries no cookie (HasCookie false); it
	// comes back once, when the packet resolves.
	EventNack
	// EventResynced: the resync that replaced NACKed packet Window/PSN was
	// acknowledged, so the PSN no longer holds a place in the window. It
	// carries no news about the packet (EventNack did); a sender that
	// waits for room in the window (Send returned ErrWindowFull) may try
	// again, as after a ULP.Acked call.
	EventResynced
)

var eventNames = [...]string{"", "established", "closed", "failed", "abandoned", "nack", "resynced"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k != 0 {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event reports a change of a connection to the ULP (ULP.Event), on the
// polling goroutine.
type Event struct {
	Kind   EventKind
	Conn   *Conn
	Err    error       // EventFailed: the reason (ErrOpenTimeout, ErrRetryExhausted, …)
	Window wire.Window // EventAbandoned, EventNack, EventResynced
	PSN    uint32      // EventAbandoned, EventNack, EventResynced
	Nack   wire.NackBody
	// Cookie is the SendHeader.Cookie of packet Window/PSN (EventAbandoned,
	// and EventNack for a ULP error: HasCookie).
	Cookie    uint64
	HasCookie bool
}

// ctrlKind is the connection-management packet a connection wants sent.
type ctrlKind uint8

const (
	ctrlNone ctrlKind = iota
	ctrlOpen
	ctrlAccept
	ctrlClose // a ConnClose is due but the request window had no room
)

// maxULPNacks bounds the ULP-error NACKs a connection queues.
const maxULPNacks = 8

// pendingNack is a NACK a receiver owes its peer.
type pendingNack struct {
	code    wire.NackCode
	ulpCode uint8
	window  wire.Window
	psn     uint32
	// echo is the refused packet's TxTime, echoed in the NACK's TxEcho:
	// the sender checks it against that PSN's transmissions, so a
	// refusal of a forged packet with a live PSN is not taken for one of
	// the packet it sent.
	echo uint32
}

// conn is one slot of the connection table. Everything is preallocated by
// NewEndpoint; the bitmaps are slices of one array.
type conn struct {
	idx      int32
	state    State
	gen      uint32 // generation of the current (or last) CID of this slot
	localCID uint32
	peerCID  uint32
	peer     PeerAddr
	addrs    wire.Addrs
	tmpl     wire.FrameTemplate // addrs, prebuilt: every frame to the peer is built on it
	hdrOff   int                // offset of the transport header in frames to the peer
	sealTx   wire.SealKey       // key our packets are sealed with (zero: not sealed; seal.go)
	sealRx   wire.SealKey       // key the peer's packets must be sealed with (zero: not checked)
	openTag  uint64             // the ConnOpen's HelloTag: ours sent, or the peer's received (seal.go)
	// peerIP4 is the peer's IPv4 address as the fast path reads it (a
	// big-endian word; 0 for IPv6): with addrs.DstIP and addrs.DstPort it
	// is what every received packet's source is checked against.
	peerIP4  uint32
	announce bool // the ULP was told about the connection (EventEstablished, or Open)
	handle   *Conn

	// early is OpenEarly's state: sends before ConnAccept (dcconnect.go).
	early dcEarly

	tx [2]txWindow // by window-1
	rx [2]rxWindow

	// Receive side: ACK coalescing and echo.
	ackCount  int // reliable packets received since the last ACK
	ackNow    bool
	ackTimer  clock.TimerID
	oow       wire.OOWFlags
	oowCount  uint16
	echoTx    uint32 // TxTime of the latest fresh (not retransmitted) packet
	echoRx    uint32 // our clock when it arrived
	echoFresh bool   // not yet echoed in an ACK
	echoTTL   uint8  // the IP TTL it arrived with (HopEcho: wire.HopsFromTTL)
	peerTx    uint32 // TxTime of the latest packet, echoed on data packets
	// dupWin and dupPSN: a packet that came again (a duplicate or stale
	// PSN), reported in the next ACK (wire.AckBody.Dup); dupWin 0: none.
	dupWin wire.Window
	dupPSN uint32
	nack   pendingNack
	// ULP-error NACKs owed, oldest first: unlike an RNR NACK (one at a
	// time, the sender holds off) each refused packet needs its own, and
	// one the queue has no room for is owed again when the packet returns.
	ulpNacks [maxULPNacks]pendingNack
	nULPNack uint8

	// Setup, close and linger.
	ctrl        ctrlKind
	ctrlTimer   clock.TimerID
	ctrlTries   int
	ctrlSentAt  clock.Time
	closeWanted bool
	closeSent   bool
	peerClosing bool
	peerClose   uint32 // PSN of the peer's ConnClose
	peerDataEnd uint32 // the peer's data-window NSN when it closed
	openKey     openKey
	hasOpenKey  bool
	accepted    bool      // we are the target (the peer opened)
	openEBSN    [2]uint32 // the peer's ConnOpen's BSNs: a repeat carries the same
	// Liveness (Options.KeepAlive, IdleTimeout): the latest packet from the
	// peer, and a probe owed (an ACK asking for an ACK).
	lastRx clock.Time
	probe  bool
	// The ULP awaits the peer (SetAwaiting): probes sent since the peer
	// last spoke, and when the latest went.
	awaiting bool
	// closeWait: our close is done and acknowledged, only the peer's
	// ConnClose is missing (progressClose); reclaim: the table is full and
	// this connection was silent, so its peer is probed until it answers
	// (reclaim). Both probe as SetAwaiting does.
	closeWait bool
	reclaim   bool
	probesOut uint16
	probeExp  uint8 // probes sent in this wait, answered or not: the next one's backoff
	probeAt   clock.Time
	bornAt    clock.Time // when the slot took this connection: no RTT sample is older

	rtt   rttEstimator
	paths pathSet // entropy values and the ordered path (paths.go)
	fixed FixedWindow
	cc    CongestionControl
	hopCC HopSetter // cc, when it takes the path's hop count; else nil
	stats ConnStats

	// localQPN and peerQPN are the global QP numbers (qpn.go), 0 when off.
	localQPN, peerQPN uint32
}

func (c *conn) window(w wire.Window) int { return int(w) - 1 }

// oweULPNack queues a ULP-error NACK unless it is queued already or the
// queue is full.
func (c *conn) oweULPNack(n pendingNack) {
	for i := range c.nULPNack {
		if q := &c.ulpNacks[i]; q.code == n.code && q.ulpCode == n.ulpCode && q.window == n.window && q.psn == n.psn {
			q.echo = n.echo // the latest refused transmission
			return
		}
	}
	if int(c.nULPNack) < len(c.ulpNacks) {
		c.ulpNacks[c.nULPNack] = n
		c.nULPNack++
	}
}

// nextNack returns the NACK to send next, if any: the RNR one first.
func (c *conn) nextNack() (pendingNack, bool) {
	if c.nack.code != 0 {
		return c.nack, true
	}
	if c.nULPNack > 0 {
		return c.ulpNacks[0], true
	}
	return pendingNack{}, false
}

// nackSent forgets the NACK nextNack returned.
func (c *conn) nackSent() {
	if c.nack.code != 0 {
		c.nack = pendingNack{}
		return
	}
	copy(c.ulpNacks[:], c.ulpNacks[1:c.nULPNack])
	c.nULPNack--
	c.ulpNacks[c.nULPNack] = pendingNack{}
}

// peerClosed reports whether the peer's ConnClose arrived with every
// request before it and every data-window packet the peer sent (its
// ConnClose names its final data-window NSN).
func (c *conn) peerClosed() bool {
	return c.peerClosing && seqLT(c.peerClose, c.rx[0].bsn) && c.rx[1].bsn == c.peerDataEnd
}

// txIdle reports whether nothing is in flight in either window.
func (c *conn) txIdle() bool { return c.tx[0].inFlight() == 0 && c.tx[1].inFlight() == 0 }

// Conn is the ULP's handle on a connection. It stays valid after the
// connection is gone: its methods then report the final state (StateClosed
// or StateFailed) and Send returns ErrClosed, even once the table slot
// serves another connection. All methods must be called on the endpoint's
// polling goroutine (typically from a ULP method, see ULP for what those may
// call, or between Polls of a loop the caller runs).
type Conn struct {
	e      *Endpoint
	c      *conn
	ulpCtx any // SetULPContext

	cid        uint32
	final      State
	err        error
	peer       PeerAddr
	finalStats ConnStats
	// finalPeerCID keeps the peer CID once the slot serves another connection.
	finalPeerCID uint32
	finalQPN     uint32 // the retired global QP number (qpn.go)
}

// live returns the slot while it still holds this connection.
func (h *Conn) live() *conn {
	if h.c.handle == h {
		return h.c
	}
	return nil
}

// SetULPContext attaches the ULP's own state for this connection (its
// connection record, say), which ULPContext hands back: the ULP finds its
// state from the Conn every ULP method receives without a lookup of its
// own. The transport never reads it. It stays with the handle after the
// connection ends, so a ULP that reuses its records must check that the
// one it gets back still serves this Conn. Store a pointer: any other
// value may allocate.
func (h *Conn) SetULPContext(v any) { h.ulpCtx = v }

// ULPContext returns what SetULPContext attached (nil: nothing).
func (h *Conn) ULPContext() any { return h.ulpCtx }

// State returns the connection's state.
func (h *Conn) State() State {
	if c := h.live(); c != nil {
		return c.state
	}
	return h.final
}

// Err returns why the connection failed, or nil.
func (h *Conn) Err() error { return h.err }

// LocalCID returns the CID this endpoint allocated for the connection (the
// destination CID of the peer's packets).
func (h *Conn) LocalCID() uint32 { return h.cid }

// PeerCID returns the peer's CID (0 until ConnAccept arrives).
func (h *Conn) PeerCID() uint32 {
	if c := h.live(); c != nil {
		return c.peerCID
	}
	return h.finalPeerCID
}

// Peer returns the peer's address.
func (h *Conn) Peer() PeerAddr { return h.peer }

// Endpoint returns the endpoint the connection belongs to.
func (h *Conn) Endpoint() *Endpoint { return h.e }

// Outstanding returns the unacknowledged packets of window w.
func (h *Conn) Outstanding(w wire.Window) int {
	c := h.live()
	if c == nil || (w != wire.WindowRequest && w != wire.WindowData) {
		return 0
	}
	return int(c.tx[c.window(w)].outstanding)
}

// Stats returns the connection's counters.
func (h *Conn) Stats() ConnStats {
	c := h.live()
	if c == nil {
		return h.finalStats
	}
	s := c.stats
	s.SRTT, s.RTTVar, s.RTO = int64(c.rtt.srtt), int64(c.rtt.rttvar), int64(c.rtt.rto)
	return s
}

// Congestion returns the connection's congestion controller (the one
// Options.Congestion made, or its FixedWindow), for a scheduler that paces.
func (h *Conn) Congestion() CongestionControl {
	if c := h.live(); c != nil {
		return c.cc
	}
	return nil
}

// RTO returns the current retransmit timeout.
func (h *Conn) RTO() time.Duration { return h.c.rtt.rto }

func (h *Conn) String() string {
	return "conn " + strconv.FormatUint(uint64(h.cid), 16) + " (" + h.State().String() + ")"
}

// WindowState is a snapshot of one window pair of a connection: our
// transmit window and our receive window of the same kind.
type WindowState struct {
	TxBSN, TxNSN uint32 // oldest unacknowledged, next to assign
	Outstanding  int    // unacknowledged packets
	RxBSN        uint32 // next PSN expected from the peer
	RxAhead      int    // packets received past RxBSN (holes before them)
}

// Window returns the state of window w (request or data).
func (h *Conn) Window(w wire.Window) WindowState {
	c := h.live()
	if c == nil || (w != wire.WindowRequest && w != wire.WindowData) {
		return WindowState{}
	}
	k := c.window(w)
	return WindowState{
		TxBSN: c.tx[k].bsn, TxNSN: c.tx[k].nsn, Outstanding: int(c.tx[k].outstanding),
		RxBSN: c.rx[k].bsn, RxAhead: c.rx[k].got.count(),
	}
}
