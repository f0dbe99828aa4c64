package rt

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Verdict is the deliver function's answer for one packet: one of the
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
)

// ULPErrorCode is ULPError with a code for the peer's ULP: the NACK
// carries it (wire.NackBody.ULPCode) to the sender's EventNack. ULPError
// itself sends code 0.
func ULPErrorCode(code uint8) Verdict { return ULPError | Verdict(code)<<8 }

// kind is the verdict without its ULP code.
func (v Verdict) kind() Verdict { return v & 0xff }

// ulpCode is the code of ULPErrorCode.
func (v Verdict) ulpCode() uint8 { return uint8(v >> 8) }

// DeliverFunc receives every reliable packet exactly once (unless it
// refuses it, and then again when it is resent), in the polling goroutine.
// h and payload alias the receive buffer and are valid during the call
// only: copy what must outlive it. It may call Send, Close and Open.
type DeliverFunc func(c *Conn, h *wire.Header, payload []byte) Verdict

// openKey identifies a ConnOpen on the target: the initiator's CID and a
// hash of its IP and UDP port (the full address is checked in the
// connection, so a hash collision is refused, not confused).
type openKey struct {
	PeerCID  uint32
	AddrHash uint32
}

// Timer kinds, in the high half of a wheel timer's data word; the low half
// is a context or connection index.
const (
	timerRetx = 1 + iota
	timerAck
	timerCtrl
)

// orphanNack is a NACK to a peer that has no connection here (a refused
// ConnOpen).
type orphanNack struct {
	addrs   wire.Addrs
	destCID uint32
	code    wire.NackCode
	echo    uint32
}

const maxOrphans = 16

// Endpoint is the reliable transport of one lcore: a fixed table of
// connections over one port queue, polled as an lcore.Stage. All its
// methods except Stats run on the polling goroutine.
type Endpoint struct {
	opts      Options
	port      port.Port
	queue     int
	pool      *mbuf.Pool
	cache     *mbuf.Cache
	headroom  int
	maxFrame  int // longest frame the port and pool carry
	localIP   netip.Addr
	localPort uint16
	fast4     bool    // IPv4: try wire.DecodeFastIPv4 first
	localIP4  [4]byte // localIP, when fast4

	conns     []conn
	freeConns []int32
	layout    cidLayout
	openKeys  *cam.Table[openKey]
	openConn  []int32 // openKeys entry → connection index
	hashSeed  uint64

	retx  *cam.Table[cam.TransportKey]
	ctx   []retxCtx
	wheel *clock.Wheel
	fire  func(clock.TimerID, uint64)
	newQ  indexList // contexts never sent yet, in send order
	retxQ indexList // contexts due for a resend
	ackQ  indexList // connections owing an ACK or NACK
	ctrlQ indexList // connections owing a ConnOpen, ConnAccept or ConnClose
	// ackArmQ holds the connections that want a delayed-ACK timer, armed
	// at the end of the receive burst (armAckTimers).
	ackArmQ indexList

	orphans  [maxOrphans]orphanNack
	nOrphans int

	rxBuf   []mbuf.Handle
	rxData  [][]byte      // the packets of rxBuf, as touch found them
	rxTTL   uint8         // the IP TTL of the packet being received
	pending []mbuf.Handle // built frames the port has not taken yet
	freeBuf []mbuf.Handle // frames to return to the cache
	one     [1]mbuf.Handle
	frame   wire.Frame
	txHdr   wire.Header
	acked   []uint32 // scratch: PSNs newly acknowledged by one ACK

	now   clock.Time
	now32 uint32
	rng   *rand.Rand

	deliver DeliverFunc
	onEvent func(Event)
	onAcked AckHandler

	cnt     counters
	sink    byte // keeps touch's loads
	stopped bool
	closed  bool
}

// NewEndpoint validates opts and builds an endpoint. Everything it will
// use is allocated here: the connection table and its bitmaps, the
// retransmission CAM and its context array, the timer wheel, the queues.
func NewEndpoint(opts Options) (*Endpoint, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	e := &Endpoint{
		opts:      o,
		port:      o.Port,
		queue:     o.Queue,
		pool:      o.Pool,
		headroom:  o.Pool.Headroom(),
		localIP:   o.LocalIP,
		localPort: o.LocalPort,
		layout:    newCIDLayout(o.MaxConns),
		rng:       rng,
		hashSeed:  rng.Uint64(),
	}
	if e.fast4 = o.LocalIP.Is4(); e.fast4 {
		e.localIP4 = o.LocalIP.As4()
	}
	e.maxFrame = o.Pool.FrameSize() - e.headroom
	if mtu := o.Port.Info().MTU; mtu > 0 {
		e.maxFrame = min(e.maxFrame, wire.EthHeaderLen+mtu)
	}
	e.retx, err = cam.New[cam.TransportKey](cam.Options{Capacity: o.CAMCapacity, Seed: rng.Uint64() | 1, Name: o.Name + " retransmission CAM"})
	if err != nil {
		return nil, invalid("Options.CAMCapacity: %v", err)
	}
	e.openKeys, err = cam.New[openKey](cam.Options{Capacity: o.MaxConns, Seed: rng.Uint64() | 1, Name: o.Name + " open CAM"})
	if err != nil {
		return nil, invalid("Options.MaxConns: %v", err)
	}
	e.wheel, err = clock.NewWheel(clock.WheelOptions{Tick: o.TimerTick, Timers: o.CAMCapacity + 2*o.MaxConns + 4, Start: o.Clock.Now()})
	if err != nil {
		return nil, invalid("timer wheel: %v", err)
	}
	e.now = e.wheel.Now()
	e.now32 = stamp(e.now)

	words := o.WindowSize / 64
	bitmaps := make([]uint64, o.MaxConns*4*words)
	e.conns = make([]conn, o.MaxConns)
	e.freeConns = make([]int32, 0, o.MaxConns)
	for i := range e.conns {
		c := &e.conns[i]
		c.idx = int32(i)
		c.gen = uint32(rng.Uint64N(uint64(e.layout.genMax)))
		for k := range 2 {
			c.tx[k].acked, bitmaps = snb(bitmaps[:words:words]), bitmaps[words:]
			c.rx[k].got, bitmaps = snb(bitmaps[:words:words]), bitmaps[words:]
		}
	}
	for i := o.MaxConns - 1; i >= 0; i-- {
		e.freeConns = append(e.freeConns, int32(i))
	}
	e.openConn = make([]int32, o.MaxConns)
	e.ctx = make([]retxCtx, o.CAMCapacity)
	for i := range e.ctx {
		e.ctx[i].frame = mbuf.NoHandle
	}
	e.newQ = newIndexList(o.CAMCapacity)
	e.retxQ = newIndexList(o.CAMCapacity)
	e.ackQ = newIndexList(o.MaxConns)
	e.ctrlQ = newIndexList(o.MaxConns)
	e.ackArmQ = newIndexList(o.MaxConns)
	e.rxBuf = make([]mbuf.Handle, o.Burst)
	e.rxData = make([][]byte, o.Burst)
	e.pending = make([]mbuf.Handle, 0, o.Burst)
	e.freeBuf = make([]mbuf.Handle, 0, 2*o.Burst)
	e.acked = make([]uint32, 0, o.WindowSize+128)
	e.fire = e.onTimer
	e.cache = o.Pool.NewCache()
	return e, nil
}

// stamp truncates a time to the header's 32-bit timestamp. 0 is skipped:
// a TxEcho of 0 means "no RTT sample in this ACK".
func stamp(t clock.Time) uint32 {
	s := uint32(t)
	if s == 0 {
		s = 1
	}
	return s
}

// Name implements lcore.Stage.
func (e *Endpoint) Name() string { return e.opts.Name }

// Options returns the endpoint's options with every default filled in.
func (e *Endpoint) Options() Options { return e.opts }

// SetDeliver sets the function that receives reliable packets. Without one
// every packet is accepted and dropped.
func (e *Endpoint) SetDeliver(fn DeliverFunc) { e.deliver = fn }

// SetEventHandler sets the function that receives connection events, on
// the polling goroutine. It may call Open, Send and Close, but not Poll.
func (e *Endpoint) SetEventHandler(fn func(Event)) { e.onEvent = fn }

// AckHandler is told of every reliable packet the peer acknowledged, with
// the Cookie it was sent with, in the polling goroutine while the ACK is
// processed. It must not call Send, Open or Close (record what to do and
// do it after Poll).
type AckHandler func(c *Conn, w wire.Window, psn uint32, cookie uint64)

// SetAckHandler sets the function told of each acknowledged packet (nil:
// none).
func (e *Endpoint) SetAckHandler(fn AckHandler) { e.onAcked = fn }

// Stats returns the counters as published by the last Poll that did work.
// It may be called from any goroutine.
func (e *Endpoint) Stats() Stats { return e.cnt.snapshot() }

// Now returns the time of the latest Poll.
func (e *Endpoint) Now() clock.Time { return e.now }

// Conns returns the number of connections in the table.
func (e *Endpoint) Conns() int { return len(e.conns) - len(e.freeConns) }

// Outstanding returns the packets the retransmission engine tracks.
func (e *Endpoint) Outstanding() int { return e.retx.Len() }

// Open starts a connection to peer: it takes a slot and a CID, and the
// next Poll sends ConnOpen, resent on a timer until ConnAccept arrives
// (EventEstablished) or RetryLimit runs out (EventFailed, ErrOpenTimeout).
func (e *Endpoint) Open(peer PeerAddr) (*Conn, error) {
	if e.stopped {
		return nil, ErrStopped
	}
	if !peer.IP.IsValid() || peer.IP.Unmap().Is4() != e.localIP.Is4() {
		return nil, ErrBadPeer
	}
	peer.IP = peer.IP.Unmap()
	c := e.allocConn()
	if c == nil {
		return nil, ErrTableFull
	}
	e.initConn(c, peer)
	c.state = StateOpening
	c.announce = true
	h := &Conn{e: e, c: c, cid: c.localCID, peer: peer}
	c.handle = h
	e.wantCtrl(c, ctrlOpen)
	e.cnt.own[cConnOpened]++
	return h, nil
}

// allocConn takes a free slot under a new generation, reset.
func (e *Endpoint) allocConn() *conn {
	n := len(e.freeConns)
	if n == 0 {
		return nil
	}
	i := e.freeConns[n-1]
	e.freeConns = e.freeConns[:n-1]
	c := &e.conns[i]
	gen := c.gen + 1
	if gen > e.layout.genMax || gen == 0 {
		gen = 1
	}
	tx0, tx1, rx0, rx1 := c.tx[0].acked, c.tx[1].acked, c.rx[0].got, c.rx[1].got
	*c = conn{idx: i, gen: gen, localCID: e.layout.make(gen, i)}
	c.tx[0].acked, c.tx[1].acked, c.rx[0].got, c.rx[1].got = tx0, tx1, rx0, rx1
	for k := range 2 {
		clear(c.tx[k].acked)
		clear(c.rx[k].got)
	}
	return c
}

// initConn fills a fresh slot for peer: addresses, receive windows at
// their initial PSNs (announced to the peer in ConnOpen or ConnAccept),
// RTT estimator, congestion controller.
func (e *Endpoint) initConn(c *conn, peer PeerAddr) {
	c.peer = peer
	c.addrs = wire.Addrs{
		SrcMAC: e.opts.LocalMAC, DstMAC: peer.MAC,
		SrcIP: e.localIP, DstIP: peer.IP,
		SrcPort: e.localPort, DstPort: portOrDefault(peer.Port),
		NoUDPChecksum: e.opts.NoUDPChecksum,
	}
	// A template that fails to build (addresses EncodeFrame would refuse
	// too) stays zero, and every frame built on it fails as EncodeFrame's
	// would.
	c.tmpl, _ = wire.NewFrameTemplate(&c.addrs)
	l3 := wire.IPv4HeaderLen
	if peer.IP.Is6() {
		l3 = wire.IPv6HeaderLen
	}
	c.hdrOff = wire.EthHeaderLen + l3 + wire.UDPHeaderLen
	for k := range 2 {
		c.rx[k].bsn = e.initialPSN()
	}
	c.rtt.init(e.opts.InitialRTO)
	if e.opts.Congestion != nil {
		c.cc = e.opts.Congestion()
	}
	if c.cc == nil {
		c.fixed = FixedWindow{N: e.opts.MaxOutstanding}
		c.cc = &c.fixed
	}
	c.hopCC, _ = c.cc.(HopSetter)
}

func (e *Endpoint) initialPSN() uint32 {
	if e.opts.FixedInitialPSN {
		return e.opts.InitialPSN
	}
	return uint32(e.rng.Uint64())
}

// liveConn is lookup without counting a miss.
func (e *Endpoint) liveConn(cid uint32) *conn {
	i := e.layout.index(cid)
	if int(i) >= len(e.conns) {
		return nil
	}
	c := &e.conns[i]
	if c.state == StateFree || c.localCID != cid {
		return nil
	}
	return c
}

// lookup finds the live connection a CID names: an array index and a
// generation check.
func (e *Endpoint) lookup(cid uint32) *conn {
	i := e.layout.index(cid)
	if int(i) >= len(e.conns) {
		e.cnt.own[cRxUnknownCID]++
		return nil
	}
	c := &e.conns[i]
	if c.state == StateFree || c.localCID != cid {
		e.cnt.own[cRxStaleCID]++
		return nil
	}
	return c
}

func (e *Endpoint) addrHash(ip netip.Addr, port uint16) uint32 {
	b := ip.As16()
	lo := binary.BigEndian.Uint64(b[:8])
	hi := binary.BigEndian.Uint64(b[8:])
	return uint32(cam.HashWords(lo, hi^uint64(port), e.hashSeed))
}

func (e *Endpoint) emit(ev Event) {
	if e.onEvent != nil {
		e.onEvent(ev)
	}
}

// wantCtrl queues a connection-management packet.
func (e *Endpoint) wantCtrl(c *conn, k ctrlKind) {
	c.ctrl = k
	e.ctrlQ.push(c.idx)
}

// establish moves a connection to StateEstablished and tells the ULP.
func (e *Endpoint) establish(c *conn) {
	c.state = StateEstablished
	e.stopCtrl(c)
	c.announce = true
	e.cnt.own[cConnEstablished]++
	e.emit(Event{Kind: EventEstablished, Conn: c.handle})
}

func (e *Endpoint) stopCtrl(c *conn) {
	if c.ctrlTimer != clock.NoTimer {
		e.wheel.Cancel(c.ctrlTimer)
		c.ctrlTimer = clock.NoTimer
	}
	c.ctrl = ctrlNone
	e.ctrlQ.remove(c.idx)
}

// failConn drops a connection and reports why.
func (e *Endpoint) failConn(c *conn, err error) {
	h, announce := c.handle, c.announce
	e.freeConn(c, StateFailed, err)
	e.cnt.own[cConnFailed]++
	if announce {
		e.emit(Event{Kind: EventFailed, Conn: h, Err: err})
	}
}

// freeConn releases everything a connection holds and returns its slot.
// The handle keeps the final state; the CID goes stale.
func (e *Endpoint) freeConn(c *conn, final State, err error) {
	for k := range 2 {
		w := wire.Window(k + 1)
		tw := &c.tx[k]
		tw.unacked(tw.inFlight(), func(psn uint32) bool {
			if idx, ok := e.retx.Delete(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: psn}); ok {
				e.releaseCtx(idx)
			} else {
				e.cnt.own[cInternal]++
			}
			return true
		})
		tw.reset(tw.nsn)
	}
	if c.ackTimer != clock.NoTimer {
		e.wheel.Cancel(c.ackTimer)
		c.ackTimer = clock.NoTimer
	}
	e.stopCtrl(c)
	e.ackQ.remove(c.idx)
	e.ackArmQ.remove(c.idx)
	if c.hasOpenKey {
		e.openKeys.Delete(c.openKey)
		c.hasOpenKey = false
	}
	if h := c.handle; h != nil {
		h.finalStats = h.Stats()
		h.finalPeerCID = c.peerCID
		h.final, h.err = final, err
		c.handle = nil
	}
	c.state = StateFree
	e.freeConns = append(e.freeConns, c.idx)
}

// Poll implements lcore.Stage: it receives one burst and processes it
// (ACKs retire packets, reliable packets go to the deliver function),
// fires due timers (retransmissions, delayed ACKs, setup retries), then
// builds and transmits up to one burst: control packets, ACKs,
// retransmissions, then new packets. Frames the port refuses are offered
// again first on the next Poll. It returns the frames received plus the
// timers fired plus the frames built and sent.
func (e *Endpoint) Poll(now clock.Time) int {
	if e.stopped {
		return 0
	}
	if now > e.now {
		e.now = now
		e.now32 = stamp(now)
	}
	work := 0
	if n := e.port.RxBurst(e.queue, e.rxBuf); n > 0 {
		data := e.touch(e.rxBuf[:n])
		e.cnt.own[cRxFrames] += uint64(n)
		e.receiveBurst(data)
		e.armAckTimers()
		e.cache.Free(e.rxBuf[:n])
		work += n
	}
	work += e.wheel.Advance(e.now, e.fire)
	work += e.transmit()
	e.flushFrees()
	if work > 0 {
		e.cnt.publish()
	}
	return work
}

// touch reads the first cache lines of every frame of a burst, and their
// metadata, before any of them is processed: the loads do not depend on one
// another, so their cache misses overlap instead of stalling each packet in
// turn (DPDK applications prefetch their bursts for the same reason; Go has
// no prefetch instruction, so these are plain loads kept alive by a sink).
// The metadata of the whole burst is read first and the frames' lines
// after, so that no frame load waits for its metadata's miss; the packets
// found are returned (in rxData: valid until the burst's frames are freed)
// for receiveBurst, which then does not read the metadata again. It
// measured 12 ns per 64-byte-payload packet off the receive path, and the
// two passes 5 ns more.
func (e *Endpoint) touch(hs []mbuf.Handle) [][]byte {
	data := e.rxData[:len(hs)]
	for i, h := range hs {
		data[i] = e.pool.Data(h)
	}
	var x byte
	for _, b := range data {
		// The headers and a short payload; a long payload is read in order
		// by the checksum, which the hardware prefetcher follows. A frame
		// of touchLines lines or more gets straight loads (the loop's
		// bounds checks and branch cost more than the loads).
		if len(b) > (touchLines-1)*64 {
			x ^= b[0] ^ b[64] ^ b[2*64]
			continue
		}
		for i := 0; i < len(b); i += 64 {
			x ^= b[i]
		}
	}
	e.sink ^= x
	return data
}

// touchLines is how many cache lines of each received frame touch reads:
// three hold every header and, for small packets, the whole frame.
const touchLines = 3

// NextDeadline returns the earliest time at which Poll has something to
// do without new input: now if frames or packets are waiting to be sent,
// else the timer wheel's next deadline. ok is false when nothing is
// pending at all. A simulation jumps its virtual clock there.
func (e *Endpoint) NextDeadline() (t clock.Time, ok bool) {
	if len(e.pending) > 0 || e.ackQ.len() > 0 || e.retxQ.len() > 0 || e.newQ.len() > 0 || e.nOrphans > 0 || e.ctrlDue() {
		return e.now, true
	}
	return e.wheel.NextDeadline()
}

// ctrlDue reports whether a control packet can be sent now. A ConnClose
// that waits for window space is not due: the ACK that makes room retries
// it.
func (e *Endpoint) ctrlDue() bool {
	for i := e.ctrlQ.front(); i >= 0; i = e.ctrlQ.next[i] {
		if e.conns[i].ctrl != ctrlClose {
			return true
		}
	}
	return false
}

// Stop implements lcore.Stopper: it drops every connection without
// telling the peer or the ULP (their handles read StateFailed and
// ErrStopped), frees every frame the endpoint holds and flushes its mbuf
// cache. Later Polls do nothing.
func (e *Endpoint) Stop(now clock.Time) {
	if e.stopped {
		return
	}
	if now > e.now {
		e.now = now
	}
	for i := range e.conns {
		if c := &e.conns[i]; c.state != StateFree {
			e.freeConn(c, StateFailed, ErrStopped)
		}
	}
	e.freeBuf = append(e.freeBuf, e.pending...)
	e.pending = e.pending[:0]
	e.nOrphans = 0
	e.flushFrees()
	e.cache.Flush()
	e.stopped = true
	e.cnt.publish()
}

// Close stops the endpoint if needed and releases its mbuf cache. The
// port stays the caller's. Close is idempotent.
func (e *Endpoint) Close() error {
	if e.closed {
		return nil
	}
	e.Stop(e.now)
	e.cache.Close()
	e.closed = true
	return nil
}

func (e *Endpoint) freeFrame(h mbuf.Handle) {
	e.freeBuf = append(e.freeBuf, h)
	if len(e.freeBuf) == cap(e.freeBuf) {
		e.flushFrees()
	}
}

func (e *Endpoint) flushFrees() {
	if len(e.freeBuf) > 0 {
		e.cache.Free(e.freeBuf)
		e.freeBuf = e.freeBuf[:0]
	}
}

// allocFrame takes one mbuf from the endpoint's cache, or NoHandle.
func (e *Endpoint) allocFrame() mbuf.Handle {
	if e.cache.AllocBurst(e.one[:]) == 0 {
		e.cnt.own[cNoBuffer]++
		return mbuf.NoHandle
	}
	return e.one[0]
}

// room returns the writable bytes of a freshly allocated frame.
func (e *Endpoint) room(h mbuf.Handle) []byte {
	return e.pool.Frame(h)[e.headroom : e.headroom+e.maxFrame]
}

// onTimer is the wheel's fire callback.
func (e *Endpoint) onTimer(id clock.TimerID, data uint64) {
	idx := int32(uint32(data))
	switch data >> 32 {
	case timerRetx:
		x := &e.ctx[idx]
		if x.timer != id {
			return
		}
		x.timer = clock.NoTimer
		e.onRetxTimeout(uint32(idx), x)
	case timerAck:
		c := &e.conns[idx]
		if c.ackTimer != id {
			return
		}
		c.ackTimer = clock.NoTimer
		c.ackNow = true
		e.ackQ.push(c.idx)
	case timerCtrl:
		c := &e.conns[idx]
		if c.ctrlTimer != id {
			return
		}
		c.ctrlTimer = clock.NoTimer
		e.onCtrlTimeout(c)
	}
}

// onCtrlTimeout resends ConnOpen or ConnAccept, gives up on setup, or ends
// a closed connection's linger.
func (e *Endpoint) onCtrlTimeout(c *conn) {
	switch c.state {
	case StateOpening:
		if c.ctrlTries > e.opts.RetryLimit {
			e.failConn(c, ErrOpenTimeout)
			return
		}
		e.wantCtrl(c, ctrlOpen)
	case StateAccepting:
		if c.ctrlTries > e.opts.RetryLimit {
			e.failConn(c, ErrOpenTimeout) // never announced: counted, not reported
			return
		}
		e.wantCtrl(c, ctrlAccept)
	case StateClosed:
		e.freeConn(c, StateClosed, nil)
	}
}

func (e *Endpoint) armCtrl(c *conn, after clock.Time) {
	if c.ctrlTimer != clock.NoTimer {
		e.wheel.Cancel(c.ctrlTimer)
	}
	id, err := e.wheel.Arm(after, uint64(timerCtrl)<<32|uint64(uint32(c.idx)))
	if err != nil {
		e.cnt.own[cInternal]++
		id = clock.NoTimer
	}
	c.ctrlTimer = id
}

// progressClose moves a connection through its close: to StateClosing
// once a close is wanted (locally or by the peer's ConnClose), queuing our
// ConnClose behind every earlier request, and to StateClosed once both
// directions are done.
func (e *Endpoint) progressClose(c *conn) {
	switch c.state {
	case StateEstablished:
		if !c.closeWanted && !c.peerClosed() {
			return
		}
		c.state = StateClosing
		c.closeWanted = true
	case StateClosing:
	default:
		return
	}
	if !c.closeSent {
		// Offset carries our final data-window NSN: Send is refused from
		// now on, so the peer knows when it has all our data.
		sh := SendHeader{Type: wire.TypeConnClose, Flags: wire.FlagAckRequested, Offset: c.tx[1].nsn}
		if _, err := e.enqueue(c, wire.WindowRequest, &sh, nil); err != nil {
			e.wantCtrl(c, ctrlClose)
			return
		}
		c.closeSent = true
	}
	if c.txIdle() && c.peerClosed() {
		c.state = StateClosed
		e.stopCtrl(c)
		e.armCtrl(c, e.now.Add(e.opts.CloseLinger))
		e.cnt.own[cConnClosed]++
		e.emit(Event{Kind: EventClosed, Conn: c.handle})
	}
}

// closeUnacked ends a close whose last ConnClose was never acknowledged:
// the peer's close arrived complete and everything else we sent was
// acknowledged, so nothing is lost; the peer most likely finished and
// freed its side (its linger ran out while our ACKs or its were lost).
func (e *Endpoint) closeUnacked(c *conn) {
	h := c.handle
	e.freeConn(c, StateClosed, nil)
	e.cnt.own[cConnClosed]++
	e.emit(Event{Kind: EventClosed, Conn: h})
}

// Abort drops the connection at once without telling the peer: every
// unacknowledged packet is discarded and the slot is freed (the handle
// reads StateFailed, ErrAborted). Use it when the peer is known to be gone;
// the peer's half stays until its own traffic times out. No event is
// emitted. Abort is idempotent.
func (h *Conn) Abort() {
	if c := h.live(); c != nil {
		h.e.freeConn(c, StateFailed, ErrAborted)
		h.e.cnt.own[cConnFailed]++
	}
}

// Close starts closing the connection: a ConnClose goes out in the
// request window behind every packet already sent, the peer answers with
// its own, and once both are acknowledged the connection is StateClosed
// (EventClosed). Sends fail with ErrClosed from now on. A connection still
// being set up is dropped at once. Close is idempotent.
func (h *Conn) Close() error {
	c := h.live()
	if c == nil {
		return nil
	}
	e := h.e
	switch c.state {
	case StateOpening, StateAccepting:
		e.freeConn(c, StateClosed, nil)
		e.cnt.own[cConnClosed]++
		e.emit(Event{Kind: EventClosed, Conn: h})
	case StateEstablished:
		c.closeWanted = true
		e.progressClose(c)
	}
	return nil
}
