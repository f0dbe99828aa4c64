package rt

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Defaults and limits of Options.
const (
	DefaultMaxConns   = 64
	MaxMaxConns       = 1 << 20 // leaves at least 4 generation bits in a 24-bit CID
	DefaultWindowSize = 128     // matches the 128-bit bitmaps of an extended ACK
	MinWindowSize     = 64
	MaxWindowSize     = 4096
	DefaultAckEvery   = 4
	DefaultAckDelay   = 10 * time.Microsecond
	DefaultMinRTO     = 100 * time.Microsecond
	// SoftwareMinRTO is the least retransmit timeout of an endpoint driven
	// by a software poll loop (the appliance's transport stages, the
	// public package's endpoints): DefaultMinRTO suits a hardware
	// endpoint; a loop on a shared core is descheduled for longer, and a
	// lossless row timed out 20-40 packets a second it had not lost.
	SoftwareMinRTO    = time.Millisecond
	DefaultMaxRTO     = 100 * time.Millisecond
	DefaultInitialRTO = 1 * time.Millisecond
	DefaultRetryLimit = 7
	MaxRetryLimit     = 255
	DefaultEarlyRetx  = 3
	DefaultBurst      = 32
	MaxBurst          = 256
	DefaultRNRTimeout = 100 * time.Microsecond
	DefaultTimerTick  = 1 * time.Microsecond
	// DefaultBadCIDNackRate and DefaultBadCIDNackBurst: Options.BadCIDNackRate
	// and BadCIDNackBurst.
	DefaultBadCIDNackRate  = 1000
	DefaultBadCIDNackBurst = 16
	// DefaultKeepAlive and DefaultIdleTimeout: Options.KeepAlive and
	// IdleTimeout.
	DefaultKeepAlive   = time.Second
	DefaultIdleTimeout = 10 * time.Second
	// DefaultReplayWindow: Options.ReplayWindow.
	DefaultReplayWindow = 10 * time.Second
	MaxCAMCapacity      = cam.MaxCapacity
	defaultCAMCapLimit  = 1 << 20
)

// MaxShardBits bounds Options.ShardBits (256 shards); MinGenerationBits is
// what the slot and shard bits must leave of a 24-bit CID, so that a reused
// slot's stale CIDs still miss.
const (
	MaxShardBits      = 8
	MinGenerationBits = 4
)

// ErrInvalidOptions is wrapped by every error NewEndpoint returns for bad
// Options.
var ErrInvalidOptions = errors.New("rt: invalid options")

// PeerAddr is where a connection's peer lives: the MAC, IP and UDP port its
// frames go to.
type PeerAddr struct {
	MAC  [6]byte
	IP   netip.Addr
	Port uint16 // 0 means wire.DefaultPort
}

func (p PeerAddr) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x/%v:%d", p.MAC[0], p.MAC[1], p.MAC[2], p.MAC[3], p.MAC[4], p.MAC[5], p.IP, portOrDefault(p.Port))
}

func portOrDefault(p uint16) uint16 {
	if p == 0 {
		return wire.DefaultPort
	}
	return p
}

// Options configure NewEndpoint. Port, Pool, Clock and LocalIP are
// required; zero values of the others select the documented defaults.
type Options struct {
	// Name names the endpoint's stage (default "rt").
	Name string
	// Port and Queue are the device queue the endpoint drives: it alone
	// calls RxBurst and TxBurst on it.
	Port  port.Port
	Queue int
	// Pool is the pool the port's frames live in; the endpoint allocates
	// its frames from it through its own Cache.
	Pool *mbuf.Pool
	// Clock gives the timer wheel its start; every later time comes from
	// Poll's now, which must be read from the same clock.
	Clock clock.Clock

	// LocalMAC (zero: the port's MAC), LocalIP (required, IPv4 or IPv6) and
	// LocalPort (0: wire.DefaultPort) are the endpoint's own address.
	// Frames to another IP or UDP port are dropped and counted.
	LocalMAC  [6]byte
	LocalIP   netip.Addr
	LocalPort uint16
	// NoUDPChecksum sends IPv4 frames without a UDP checksum. The checksum
	// is what catches corrupted frames: leave it on unless the link
	// guarantees integrity.
	NoUDPChecksum bool
	// NoSeal turns the per-connection integrity tag off (seal.go): the
	// endpoint offers no sealing key at setup, so neither direction of its
	// connections is sealed, and it ignores the tags of peers that seal.
	NoSeal bool

	// MaxConns is the size of the connection table, 1..MaxMaxConns
	// (default 64). A CID is a slot index plus a generation in 24 bits.
	MaxConns int
	// ShardBits and Shard make the endpoint shard Shard of 1<<ShardBits:
	// every CID it allocates carries Shard in its top ShardBits bits,
	// taken from the generation (CIDShard reads them back), so whoever
	// receives a frame finds the owning shard from wire.PeekCID alone.
	// ShardBits 0..MaxShardBits, leaving at least MinGenerationBits
	// generation bits above the slot; Shard 0..1<<ShardBits-1. A peer only
	// echoes the CIDs it was given: the bits are this side's business.
	ShardBits uint
	Shard     int
	// QPN turns on global QP numbers (docs/qp-translation.md, qpn.go): off by default,
	// since it changes the wire.
	QPN QPNOptions
	// WindowSize is the PSN span of each sliding window (and its bitmap), a
	// multiple of 64 in 64..4096 (default 128, the width of an extended
	// ACK's bitmaps; a larger window is acknowledged 128 PSNs at a time
	// beyond the cumulative BSN).
	WindowSize int
	// MaxOutstanding caps unacknowledged packets per connection and window
	// under the default fixed congestion window, 1..WindowSize (default
	// WindowSize).
	MaxOutstanding int
	// AckEvery and AckDelay coalesce ACKs: one goes out after AckEvery
	// reliable packets or AckDelay after the first unacknowledged one,
	// whichever comes first, and at once for AckRequested, duplicates and
	// out-of-window packets. A sender sets AckRequested on resends, when
	// its window closes, and on a push's last packet before it goes idle
	// with fewer than its own AckEvery in flight (a lone push's completion
	// would otherwise wait the peer's AckDelay). AckEvery 1..WindowSize
	// (default 4); AckDelay default 10µs.
	AckEvery int
	AckDelay time.Duration
	// MinRTO, MaxRTO and InitialRTO bound and seed the retransmit timeout
	// (defaults 100µs, 100ms, 1ms). The timeout adapts to the smoothed
	// RTT; each timeout of a packet doubles its own next one.
	MinRTO, MaxRTO, InitialRTO time.Duration
	// RetryLimit is how many timeouts a packet survives (1..255, default
	// 7). Past it a resync stands in for the packet, with the same limit;
	// when that runs out too the connection fails. Connection setup uses
	// the same limit. A packet goes on the wire at most RetryLimit+1
	// times, early resends included (so lost refusal NACKs cannot make it
	// resend forever) and a timeout's ask for an ACK counting as one, but it is given up only when its timer expired
	// RetryLimit+1 times (the RTO doubling each time): early resends spend
	// the transmissions sooner, never the time, so a packet whose ACK is
	// merely slow (a slower path, a queue) is not abandoned because of
	// them — it is abandoned no sooner than with early retransmission off.
	RetryLimit int
	// EarlyRetransmitDistance turns on early retransmission, RACK-style
	// (RFC 8985): a hole is resent without waiting for its timer once a
	// packet sent after it was acknowledged, a PSN this far past it was
	// acknowledged, and the RTT of the most recently sent acknowledged
	// packet plus a reordering window has passed since the hole was sent.
	// The window adapts per connection to the reordering it sees (how
	// late overtaken packets come, widened by each spurious early resend,
	// decaying back; at least a quarter of the least RTT), so packets
	// sprayed over paths of different delays, or queued on an ordered
	// path, are not taken for lost. The distance is a second condition:
	// it keeps a hole overtaken by one or two packets from being resent
	// while the window is still learning (with 1, a sprayed 1 MiB push
	// resent 4 packets the peer had, and bench ioi's lossy push twice as
	// many as it lost); after an acknowledged resend the time rule alone
	// decides. Default 3; negative disables.
	EarlyRetransmitDistance int
	// NoDupReports runs loss recovery as it was before duplicate reports:
	// the receiver does not tell the sender of copies it had already
	// (wire.AckBody.Dup) and the sender ignores such reports, so it learns
	// of a spurious early resend only when the ACK comes too soon for the
	// resend (Stats.SpuriousEarlyRetransmit). For comparisons (bench
	// integrity); off by default.
	NoDupReports bool
	// CAMCapacity is the number of packets the retransmission engine can
	// track across all connections (default MaxConns × 2 × MaxOutstanding,
	// at most 2^20). A Send beyond it is refused with ErrCAMFull.
	CAMCapacity int
	// Burst is the most frames one Poll receives, and the most it
	// transmits, 1..256 (default 32).
	Burst int
	// CloseLinger is how long a closed connection keeps its slot to
	// acknowledge retransmissions of the peer's last packets (default
	// 2 × MaxRTO).
	CloseLinger time.Duration
	// RNRTimeout is the back-off announced in the NACK sent when the
	// deliver function refuses a packet (default 100µs).
	RNRTimeout time.Duration
	// TimerTick is the timer wheel's resolution (default 1µs).
	TimerTick time.Duration

	// BadCIDNackRate and BadCIDNackBurst bound the bad-CID NACKs that
	// answer frames to a CID naming no connection here (a peer restarted,
	// or the connection was aborted or timed out): a token bucket of
	// BadCIDNackBurst tokens (default 16) refilled at BadCIDNackRate per
	// second (default 1000; negative: never send them). The NACK makes the
	// peer fail its half at once (ErrPeerReset) instead of retrying for
	// RetryLimit timeouts; the bucket keeps a flood of such frames (or a
	// spoofed one, reflected) from turning into a flood of NACKs. Those
	// held back are counted (Stats.BadCIDNackSuppressed).
	BadCIDNackRate  int
	BadCIDNackBurst int
	// KeepAlive sends a probe (an ACK asking for an ACK) on a connection
	// that received nothing for KeepAlive, and again every KeepAlive while
	// it stays silent (default 1 s; negative: none). IdleTimeout fails a
	// connection that received nothing (probes' answers included) for
	// IdleTimeout, with ErrIdleTimeout (default 10 s, at least 4 ×
	// KeepAlive; negative: never); it must exceed KeepAlive. Both are on
	// by default so that no half of a connection outlives its peer: a
	// peer that restarted answers the first probe with a bad-CID NACK
	// (ErrPeerReset), one that vanished is dropped after IdleTimeout, and
	// a table full of such halves cannot refuse newcomers for long (see
	// the package doc, Failure semantics). A live peer answers, so an idle
	// connection whose ends are both alive stays open, at the cost of one
	// small probe and its answer per KeepAlive each way (two frames a
	// second per idle connection by default: nothing a link carrying
	// millions notices; a busy connection sends none, its traffic answers
	// for it). Work in progress needs neither: packets outstanding have
	// their retransmission timers and a ULP that awaits its peer has
	// Conn.SetAwaiting's probes, which find a dead peer within MaxRTOs.
	// An endpoint with a connection open always has a timer pending
	// (NextDeadline), so a simulation that runs until nothing is pending
	// turns both off.
	KeepAlive   time.Duration
	IdleTimeout time.Duration

	// ReplayWindow and ReplayCache bound the target's memory of early
	// connects (OpenEarly; dcconnect.go, Replay): a copy of an early
	// ConnOpen is refused as a replay while its initiator's incarnation is
	// remembered, at least ReplayWindow after its latest connect (default
	// 10 s: it must exceed the longest a network may hold a frame), in a
	// cache of ReplayCache records, one per initiator incarnation (default
	// 4×MaxConns, at least 256).
	ReplayWindow time.Duration
	ReplayCache  int

	// Seed seeds the endpoint's random choices: initial PSNs, CID
	// generations and the CAMs' hash keys. The same seed and the same
	// inputs replay the same packets. 0 (the default) draws a fresh seed
	// from crypto/rand, so that a restarted endpoint neither reuses its
	// CIDs and initial PSNs (an old incarnation's packets still in flight
	// would land in the new connection) nor lets an off-path host predict
	// them — except under a clock.Virtual Clock, where 0 is a seed like any
	// other: a simulation must replay. Set a seed only in simulations and
	// tests.
	Seed uint64
	// FixedInitialPSN makes every receive window start at InitialPSN
	// instead of a random PSN (tests of the wrap-around at 2^32).
	FixedInitialPSN bool
	InitialPSN      uint32

	// Accept decides whether to accept a peer's ConnOpen; nil accepts all.
	// It runs on the polling goroutine.
	Accept func(peer PeerAddr) bool
	// Congestion makes the congestion controller of a new connection; nil
	// selects a fixed window of MaxOutstanding. It runs on the goroutine
	// that opens or accepts the connection.
	Congestion func() CongestionControl
}

// seed returns the seed of the endpoint's random choices (see Seed).
func (o *Options) seed() uint64 {
	if _, virtual := o.Clock.(*clock.Virtual); o.Seed != 0 || virtual {
		return o.Seed
	}
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return binary.LittleEndian.Uint64(b[:])
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

// withDefaults validates o and fills in every default.
func (o Options) withDefaults() (Options, error) {
	if o.Name == "" {
		o.Name = "rt"
	}
	if o.Port == nil {
		return o, invalid("Options.Port is nil (pass the port the endpoint drives)")
	}
	if q := o.Port.Info().Queues; o.Queue < 0 || o.Queue >= q {
		return o, invalid("Options.Queue %d is out of range: port %s has %d queues (use 0..%d)", o.Queue, o.Port.Info().Name, q, q-1)
	}
	if o.Pool == nil {
		return o, invalid("Options.Pool is nil (pass the pool the port's frames live in)")
	}
	if o.Clock == nil {
		return o, invalid("Options.Clock is nil (pass the clock Poll's now is read from)")
	}
	if !o.LocalIP.IsValid() {
		return o, invalid("Options.LocalIP is not set (the endpoint's IPv4 or IPv6 address)")
	}
	o.LocalIP = o.LocalIP.Unmap()
	if o.LocalMAC == [6]byte{} {
		if mac := o.Port.Info().MAC; len(mac) == 6 {
			o.LocalMAC = [6]byte(mac)
		}
	}
	if o.LocalPort == 0 {
		o.LocalPort = wire.DefaultPort
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxConns < 1 || o.MaxConns > MaxMaxConns {
		return o, invalid("Options.MaxConns %d is out of range (use 1..%d)", o.MaxConns, MaxMaxConns)
	}
	if o.ShardBits > MaxShardBits {
		return o, invalid("Options.ShardBits %d is out of range (use 0..%d: up to %d shards)", o.ShardBits, MaxShardBits, 1<<MaxShardBits)
	}
	if o.Shard < 0 || o.Shard >= 1<<o.ShardBits {
		return o, invalid("Options.Shard %d is out of range for ShardBits %d (use 0..%d)", o.Shard, o.ShardBits, 1<<o.ShardBits-1)
	}
	if g := 24 - int(o.ShardBits) - bits.Len32(uint32(o.MaxConns-1)); g < MinGenerationBits {
		return o, invalid("Options.ShardBits %d with MaxConns %d leaves %d generation bits in a 24-bit CID (need %d: lower MaxConns to %d or ShardBits)",
			o.ShardBits, o.MaxConns, g, MinGenerationBits, 1<<(24-MinGenerationBits-int(o.ShardBits)))
	}
	if o.WindowSize == 0 {
		o.WindowSize = DefaultWindowSize
	}
	if o.WindowSize < MinWindowSize || o.WindowSize > MaxWindowSize || o.WindowSize%64 != 0 {
		return o, invalid("Options.WindowSize %d is not a multiple of 64 in %d..%d (use %d)", o.WindowSize, MinWindowSize, MaxWindowSize, min(max(MinWindowSize, (o.WindowSize+63)/64*64), MaxWindowSize))
	}
	if o.MaxOutstanding == 0 {
		o.MaxOutstanding = o.WindowSize
	}
	if o.MaxOutstanding < 1 || o.MaxOutstanding > o.WindowSize {
		return o, invalid("Options.MaxOutstanding %d is out of range (use 1..WindowSize %d)", o.MaxOutstanding, o.WindowSize)
	}
	if o.AckEvery == 0 {
		o.AckEvery = DefaultAckEvery
	}
	if o.AckEvery < 1 || o.AckEvery > o.WindowSize {
		return o, invalid("Options.AckEvery %d is out of range (use 1..WindowSize %d)", o.AckEvery, o.WindowSize)
	}
	if o.AckDelay == 0 {
		o.AckDelay = DefaultAckDelay
	}
	if o.MinRTO == 0 {
		o.MinRTO = DefaultMinRTO
	}
	if o.MaxRTO == 0 {
		o.MaxRTO = max(DefaultMaxRTO, o.MinRTO)
	}
	if o.InitialRTO == 0 {
		o.InitialRTO = min(max(DefaultInitialRTO, o.MinRTO), o.MaxRTO)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"AckDelay", o.AckDelay}, {"MinRTO", o.MinRTO}, {"MaxRTO", o.MaxRTO}, {"InitialRTO", o.InitialRTO}} {
		if d.v < 0 {
			return o, invalid("Options.%s %v is negative (use a positive duration, or 0 for the default)", d.name, d.v)
		}
	}
	if o.MinRTO > o.MaxRTO {
		return o, invalid("Options.MinRTO %v exceeds MaxRTO %v", o.MinRTO, o.MaxRTO)
	}
	if o.InitialRTO < o.MinRTO || o.InitialRTO > o.MaxRTO {
		return o, invalid("Options.InitialRTO %v is outside [MinRTO %v, MaxRTO %v]", o.InitialRTO, o.MinRTO, o.MaxRTO)
	}
	if o.RetryLimit == 0 {
		o.RetryLimit = DefaultRetryLimit
	}
	if o.RetryLimit < 1 || o.RetryLimit > MaxRetryLimit {
		return o, invalid("Options.RetryLimit %d is out of range (use 1..%d)", o.RetryLimit, MaxRetryLimit)
	}
	switch {
	case o.EarlyRetransmitDistance == 0:
		o.EarlyRetransmitDistance = DefaultEarlyRetx
	case o.EarlyRetransmitDistance < 0:
		o.EarlyRetransmitDistance = 0
	case o.EarlyRetransmitDistance >= o.WindowSize:
		return o, invalid("Options.EarlyRetransmitDistance %d is not below WindowSize %d (use a small distance such as 3, or -1 to disable)", o.EarlyRetransmitDistance, o.WindowSize)
	}
	if o.CAMCapacity == 0 {
		o.CAMCapacity = min(o.MaxConns*2*o.MaxOutstanding, defaultCAMCapLimit)
	}
	if o.CAMCapacity < 1 || o.CAMCapacity > MaxCAMCapacity {
		return o, invalid("Options.CAMCapacity %d is out of range (use 1..%d)", o.CAMCapacity, MaxCAMCapacity)
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Burst < 1 || o.Burst > MaxBurst {
		return o, invalid("Options.Burst %d is out of range (use 1..%d)", o.Burst, MaxBurst)
	}
	if o.CloseLinger == 0 {
		o.CloseLinger = 2 * o.MaxRTO
	}
	if o.RNRTimeout == 0 {
		o.RNRTimeout = DefaultRNRTimeout
	}
	if o.TimerTick == 0 {
		o.TimerTick = DefaultTimerTick
	}
	if o.CloseLinger < 0 || o.RNRTimeout < 0 || o.TimerTick < 0 {
		return o, invalid("Options.CloseLinger %v, RNRTimeout %v and TimerTick %v must not be negative", o.CloseLinger, o.RNRTimeout, o.TimerTick)
	}
	if o.BadCIDNackRate == 0 {
		o.BadCIDNackRate = DefaultBadCIDNackRate
	}
	if o.BadCIDNackBurst == 0 {
		o.BadCIDNackBurst = DefaultBadCIDNackBurst
	}
	if o.BadCIDNackBurst < 0 {
		return o, invalid("Options.BadCIDNackBurst %d is negative (use a positive burst, or a negative BadCIDNackRate to send none)", o.BadCIDNackBurst)
	}
	switch {
	case o.KeepAlive == 0 && o.IdleTimeout > 0:
		o.KeepAlive = min(DefaultKeepAlive, o.IdleTimeout/4)
	case o.KeepAlive == 0:
		o.KeepAlive = DefaultKeepAlive
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = max(DefaultIdleTimeout, 4*o.KeepAlive)
	}
	// Negative turns either off; the endpoint reads 0 as off.
	o.KeepAlive, o.IdleTimeout = max(o.KeepAlive, 0), max(o.IdleTimeout, 0)
	if o.KeepAlive > 0 && o.IdleTimeout > 0 && o.IdleTimeout <= o.KeepAlive {
		return o, invalid("Options.IdleTimeout %v does not exceed KeepAlive %v: no probe could be answered in time (use a few KeepAlive intervals, e.g. %v)", o.IdleTimeout, o.KeepAlive, 4*o.KeepAlive)
	}
	if o.ReplayWindow == 0 {
		o.ReplayWindow = DefaultReplayWindow
	}
	if o.ReplayCache == 0 {
		o.ReplayCache = min(max(4*o.MaxConns, 256), MaxCAMCapacity)
	}
	if o.ReplayWindow < 0 || o.ReplayCache < 1 || o.ReplayCache > MaxCAMCapacity {
		return o, invalid("Options.ReplayWindow %v must not be negative and ReplayCache %d must be in 1..%d", o.ReplayWindow, o.ReplayCache, MaxCAMCapacity)
	}
	room := o.Pool.FrameSize() - o.Pool.Headroom()
	if room < minFrameRoom {
		return o, invalid("Options.Pool %q leaves %d bytes per frame after its headroom, below the %d a transport frame needs (lower the pool's Headroom)", o.Pool.Name(), room, minFrameRoom)
	}
	return o, nil
}

// minFrameRoom is the room a frame needs for the largest control packet:
// IPv6 headers, an extended ACK.
const minFrameRoom = wire.EthHeaderLen + wire.IPv6HeaderLen + wire.UDPHeaderLen + wire.BaseHeaderLen + wire.ExtendedAckBodyLen + 16

// cidLayout splits a 24-bit CID into a slot index (low bits), a
// generation (above it), so that a CID of a closed connection misses once
// its slot is reused, and the shard (the top shardBits bits).
type cidLayout struct {
	idxBits uint
	idxMask uint32
	genMax  uint32 // generations run 1..genMax
	shard   uint32 // the shard, in place
}

func newCIDLayout(maxConns int, shardBits uint, shard int) cidLayout {
	b := uint(bits.Len32(uint32(maxConns - 1)))
	return cidLayout{idxBits: b, idxMask: 1<<b - 1, genMax: wire.MaxCID >> (b + shardBits), shard: uint32(shard) << (24 - shardBits) & wire.MaxCID}
}

// CIDShard returns the shard a local CID names under shardBits bits (0
// when shardBits is 0): the top bits, where Options.Shard put them.
func CIDShard(cid uint32, shardBits uint) int {
	if shardBits == 0 {
		return 0
	}
	return int(cid&wire.MaxCID) >> (24 - shardBits)
}

func (l cidLayout) make(gen uint32, idx int32) uint32 { return l.shard | gen<<l.idxBits | uint32(idx) }
func (l cidLayout) index(cid uint32) uint32           { return cid & l.idxMask }
