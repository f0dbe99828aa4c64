package rt

import (
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// openKey identifies a ConnOpen on the target: the initiator's CID and a
// hash of its IP and UDP port (the full address is checked in the
// connection, so a hash collision is refused, not confused).
type openKey struct {
	PeerCID  uint32
	AddrHash uint32
}

// orphanNack is a NACK to a peer that has no connection here: a refused
// ConnOpen (destCID: the initiator's CID), or a frame to a CID that names
// no connection (bad-CID: destCID 0, srcCID the CID the frame named, so
// that the peer finds its connection by its peer CID and our address).
type orphanNack struct {
	addrs   wire.Addrs
	destCID uint32
	srcCID  uint32
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
	// sealSecret derives each connection's sealing key (seal.go); sealN
	// counts the keys derived.
	sealSecret wire.SealKey
	sealN      uint64

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
	// badCIDAt is the bad-CID NACK token bucket as a virtual schedule: the
	// bucket holds (now-badCIDAt)/badCIDEvery tokens, at most
	// BadCIDNackBurst (badCIDEvery 0: none are sent).
	badCIDAt    clock.Time
	badCIDEvery time.Duration

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

	ulp ULP // SetULP; nil: packets accepted and dropped, nothing told

	cnt     counters
	sink    byte // keeps touch's loads
	stopped bool
	closed  bool

	qpn *qpnState // global QP numbers (qpn.go); nil when off

	// Early connects (dcconnect.go): this endpoint's incarnation and its
	// last connect number as an initiator; as a target, the replay cache.
	incarnation uint32
	connects    uint32
	replay      replayCache
	// reclaimAt: the earliest next pass of reclaimSlots.
	reclaimAt clock.Time
	// pathCnt: multipath health (paths.go).
	pathCnt pathCounters
}

// NewEndpoint validates opts and builds an endpoint. Everything it will
// use is allocated here: the connection table and its bitmaps, the
// retransmission CAM and its context array, the timer wheel, the queues.
func NewEndpoint(opts Options) (*Endpoint, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.seed(), 0x9e3779b97f4a7c15))
	e := &Endpoint{
		opts:      o,
		port:      o.Port,
		queue:     o.Queue,
		pool:      o.Pool,
		headroom:  o.Pool.Headroom(),
		localIP:   o.LocalIP,
		localPort: o.LocalPort,
		layout:    newCIDLayout(o.MaxConns, o.ShardBits, o.Shard),
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
	if err := e.initQPN(); err != nil {
		return nil, err
	}
	// The incarnation mixes the clock into the seed's hash key, so that a
	// restarted endpoint (a later time) differs even under the same seed;
	// drawing it from rng would move every later draw.
	e.incarnation = uint32(cam.HashWords(uint64(o.Clock.Now()), 0x1c4a, e.hashSeed)) | 1
	e.initSeal()
	if e.replay, err = newReplayCache(o.ReplayCache, e.hashSeed^0x7e91a7, o.Name); err != nil {
		return nil, invalid("Options.ReplayCache: %v", err)
	}

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
	if o.BadCIDNackRate > 0 {
		e.badCIDEvery = max(time.Second/time.Duration(o.BadCIDNackRate), 1)
		e.badCIDAt = e.now.Add(-time.Duration(o.BadCIDNackBurst) * e.badCIDEvery) // a full bucket
	}
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

// Stats returns the counters as published by the last Poll that did work,
// or the last Open, Close or Abort since. It may be called from
// any goroutine.
func (e *Endpoint) Stats() Stats { return e.cnt.snapshot() }

// Now returns the time of the latest Poll.
func (e *Endpoint) Now() clock.Time { return e.now }

// Conns returns the number of connections in the table.
func (e *Endpoint) Conns() int { return len(e.conns) - len(e.freeConns) }

// Outstanding returns the packets the retransmission engine tracks.
func (e *Endpoint) Outstanding() int { return e.retx.Len() }

// Poll implements lcore.Stage: it receives one burst and processes it
// (ACKs retire packets, reliable packets go to ULP.Deliver),
// fires due timers (retransmissions, delayed ACKs, setup retries), then
// builds and transmits up to one burst: control packets, ACKs,
// retransmissions, then new packets. Frames the port refuses are offered
// again first on the next Poll. It returns the frames received plus the
// timers fired plus the frames built and sent.
func (e *Endpoint) Poll(now clock.Time) int {
	if e.stopped {
		return 0
	}
	e.Tick(now)
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
		e.publish()
	}
	return work
}

// publish makes the counters Stats and QPNStats read current. Poll does it
// when it did work; the calls that end or start a connection between
// Polls (Open, OpenEarly, Close, Abort) do it before they return, so what
// they counted is never left unpublished behind an idle Poll (a refused
// Send's CAMFull waits for the Poll its retry needs anyway).
func (e *Endpoint) publish() {
	e.cnt.publish()
	e.publishQPN()
}

// Tick moves the endpoint's time to now (never back) without polling. A
// ULP that calls the transport in the same round before Poll — the
// transaction layer's scheduler sends, then polls — calls it first, so
// what those calls time (a connection's silence measured from
// Conn.SetAwaiting, say) is measured from now and not from the last Poll.
func (e *Endpoint) Tick(now clock.Time) {
	if now > e.now {
		e.now = now
		e.now32 = stamp(now)
	}
}

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

// WakeFDs implements lcore.Waker: the port queue's descriptor, when it
// has one (AF_XDP, AF_PACKET).
func (e *Endpoint) WakeFDs(fds []int) []int {
	return append(fds, port.RxWaitFD(e.port, e.queue))
}

// TakeBell implements lcore.BellTaker: the port queue's producer rings
// the loop, when the port has no descriptor to sleep on (mem).
func (e *Endpoint) TakeBell(ring func()) { port.SetRxBell(e.port, e.queue, ring) }

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
	e.publish()
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
