package afxdp

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"time"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// DriverName is the name the driver registers under.
const DriverName = "afxdp"

// Defaults and limits of Options.
const (
	DefaultRingSize = 2048
	// DefaultTxBatch is Options.TxBatch's default.
	DefaultTxBatch = 128
	MinRingSize    = 64
	MaxRingSize    = 32768
	MaxQueues      = 256
	MaxShardBits   = 8 // as the transport's rt.MaxShardBits
	MinFillLevel   = 32
	// DefaultBusyPoll and DefaultBusyBudget are what busy polling uses
	// when only the other is given: DPDK's net_af_xdp's values.
	DefaultBusyPoll   = 20 * time.Microsecond
	DefaultBusyBudget = 64
	MaxBusyPoll       = time.Second
	MaxBusyBudget     = 65535
)

// Mode selects how the XDP program is attached.
type Mode string

// Modes. The zero value is ModeAuto.
const (
	// ModeAuto attaches in native (driver) mode and falls back to generic
	// mode when the driver refuses.
	ModeAuto Mode = "auto"
	// ModeNative attaches in the driver (XDP_FLAGS_DRV_MODE) or fails.
	ModeNative Mode = "native"
	// ModeGeneric attaches in generic mode (XDP_FLAGS_SKB_MODE): slower,
	// works on every interface.
	ModeGeneric Mode = "generic"
)

// ZeroCopy selects the AF_XDP bind mode.
type ZeroCopy string

// Zero-copy policies. The zero value is ZeroCopyAuto.
const (
	// ZeroCopyAuto binds in zero-copy mode and falls back to copy mode when
	// the driver does not support it (veth, for one).
	ZeroCopyAuto ZeroCopy = "auto"
	// ZeroCopyOn binds in zero-copy mode or fails.
	ZeroCopyOn ZeroCopy = "on"
	// ZeroCopyOff binds in copy mode: the kernel copies frames between the
	// driver's buffers and the pool.
	ZeroCopyOff ZeroCopy = "off"
)

// Errors callers may test with errors.Is.
var (
	// ErrInvalidOptions is wrapped by every error about bad Options.
	ErrInvalidOptions = errors.New("afxdp: invalid options")
	// ErrNoInterface: the interface does not exist in the namespace.
	ErrNoInterface = errors.New("afxdp: no such interface")
	// ErrNoQueue: the queue asked for does not exist on the interface.
	ErrNoQueue = errors.New("afxdp: no such queue")
	// ErrForeignProgram: another XDP program is attached to the interface.
	// The driver never detaches a program it did not attach.
	ErrForeignProgram = errors.New("afxdp: interface has a foreign XDP program")
	// ErrPermission: the process lacks the privileges AF_XDP needs.
	ErrPermission = errors.New("afxdp: permission denied (needs CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK, or root)")
	// ErrFrameTooSmall: the interface's MTU does not fit the pool's frames.
	ErrFrameTooSmall = errors.New("afxdp: frames too small for the interface MTU")
	// ErrNotSupported: the interface refused a mode that was required
	// (mode=native or zerocopy=on).
	ErrNotSupported = errors.New("afxdp: not supported by the interface")
	// ErrQueueBusy: another socket or port already uses the queue.
	ErrQueueBusy = errors.New("afxdp: queue already in use")
)

// Options configure New. Zero fields take their defaults.
type Options struct {
	// Interface is the network interface to open (required).
	Interface string
	// Queue is the first interface queue the port uses; port queue i is
	// interface queue Queue+i. Default 0.
	Queue int
	// Queues is the number of queues, one AF_XDP socket each. Default 1.
	Queues int
	// Namespace is the network namespace the interface lives in; nil
	// means the caller's. Sockets are created and the program attached
	// inside it; the port may then be driven from any goroutine.
	Namespace *netns.NS
	// Mode is how the XDP program is attached. Default ModeAuto.
	Mode Mode
	// ZeroCopy is the bind policy. Default ZeroCopyAuto.
	ZeroCopy ZeroCopy
	// UDPPort, when not 0, makes the XDP program redirect only UDP
	// datagrams (IPv4 or IPv6) to this destination port; every other frame
	// goes to the kernel stack.
	UDPPort int
	// ShardBits, when not 0, makes the program read each redirected
	// datagram's destination CID and count, per queue, those whose shard
	// (the CID's top ShardBits bits, as the transport's Options.ShardBits)
	// is not the queue they arrived on (Port.Missteered); a ConnOpen's
	// shard is the one its source CID names. The frame still goes to its
	// own queue's socket. Needs UDPPort; 0..MaxShardBits.
	ShardBits int
	// RingSize is the number of entries of each of the four rings of every
	// socket, a power of two. Default 2048.
	RingSize int
	// FillLevel is how many frames each queue lends the kernel to receive
	// into, MinFillLevel..RingSize: frames on the fill ring, being
	// received, or received and waiting on the RX ring. Every RxBurst gives
	// back as many as it took, so the port holds Queues*FillLevel frames
	// of the pool while open, and a frame the application reads was
	// written at most FillLevel frames earlier. That bound is why the
	// default is half the ring, as DPDK's net_af_xdp does: with the RX
	// ring full behind a full fill ring (4096 frames), a forwarder's frames
	// had left the receiving CPU's caches before the transmit copy read
	// them, and that copy took twice testpmd's time. Fewer frames than the
	// default leave less slack for a receiver that pauses. Default
	// RingSize/2.
	FillLevel int
	// BusyPoll, when > 0, turns on busy polling: SO_BUSY_POLL of this
	// many (whole) microseconds, SO_BUSY_POLL_BUDGET of BusyBudget and,
	// unless NoPreferBusy, SO_PREFER_BUSY_POLL. Every empty RxBurst then
	// enters the kernel to poll the device queue, once the kernel has
	// delivered to the socket from a NAPI context it can busy-poll
	// (SO_INCOMING_NAPI_ID); before that such a poll would have nothing to
	// poll and is skipped. The cost: a system call per empty poll, so an
	// idle busy-polling loop stays in the kernel part of its time rather
	// than in user space (its idle policy still decides how often it
	// polls). BusyBudget > 0 alone turns it on with DefaultBusyPoll.
	// Default 0 (off): without busy polling the kernel processes received
	// frames in its softirq and the loop only reads the RX ring, entering
	// the kernel when the fill ring asks for a wakeup (need-wakeup).
	BusyPoll time.Duration
	// BusyBudget is SO_BUSY_POLL_BUDGET: the most frames one busy poll
	// processes (0 → DefaultBusyBudget when busy polling).
	BusyBudget int
	// NoPreferBusy leaves SO_PREFER_BUSY_POLL off while busy polling, so
	// the kernel's softirq keeps processing the queue between polls.
	NoPreferBusy bool
	// TxBatch is how many frames a queue may hold on its TX ring before
	// the system call that sends them, in copy mode, while TxBurst gets
	// full bursts (port.FullBurst frames or more): each call costs about
	// as much as sending a few frames, and a saturated sender (txonly, a
	// forwarder under overload) makes one per TxBatch frames instead of
	// one per burst. A shorter burst and TxFlush (port.FlushTx) send what
	// is held at once, so a sender below saturation waits for nothing.
	// 1 sends every burst at once. Default DefaultTxBatch;
	// measured sending 64-byte frames over veth: 128 gave 3 % more frames
	// per second than 1, 256 and 512 less than 128 (the frames held
	// outgrow the caches).
	TxBatch int
	// Name is Info().Name. Default "afxdp:INTERFACE".
	Name string
	// Attachments, when set, shares XDP program attachments between the
	// ports opened with it, so several ports may use different queues of
	// one interface. Nil gives the port a private attachment: a second
	// port on the same interface then fails with ErrForeignProgram.
	Attachments *Attachments
	// Logger receives fallbacks (generic mode, copy mode). Nil →
	// slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.Interface == "" {
		return bad("Options.Interface is empty (name the interface, e.g. \"eth0\")")
	}
	if o.Queues == 0 {
		o.Queues = 1
	}
	if o.RingSize == 0 {
		o.RingSize = DefaultRingSize
	}
	if o.FillLevel == 0 {
		o.FillLevel = o.RingSize / 2
	}
	if o.TxBatch == 0 {
		o.TxBatch = min(DefaultTxBatch, o.RingSize)
	}
	if o.Mode == "" {
		o.Mode = ModeAuto
	}
	if o.ZeroCopy == "" {
		o.ZeroCopy = ZeroCopyAuto
	}
	if o.Name == "" {
		o.Name = DriverName + ":" + o.Interface
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Queue < 0:
		return bad("Options.Queue %d is negative (use 0 for the first queue)", o.Queue)
	case o.Queues < 1 || o.Queues > MaxQueues:
		return bad("Options.Queues %d is out of range (use 1..%d)", o.Queues, MaxQueues)
	case o.RingSize < MinRingSize || o.RingSize > MaxRingSize:
		return bad("Options.RingSize %d is out of range (use a power of two in %d..%d)", o.RingSize, MinRingSize, MaxRingSize)
	case o.RingSize&(o.RingSize-1) != 0:
		return bad("Options.RingSize %d is not a power of two (use %d)", o.RingSize, 1<<bits.Len(uint(o.RingSize)))
	case o.FillLevel < MinFillLevel || o.FillLevel > o.RingSize:
		return bad("Options.FillLevel %d is out of range (use %d..RingSize %d, or 0 for half the ring)", o.FillLevel, MinFillLevel, o.RingSize)
	case o.UDPPort < 0 || o.UDPPort > 65535:
		return bad("Options.UDPPort %d is out of range (use 1..65535, or 0 to redirect every frame)", o.UDPPort)
	case o.ShardBits < 0 || o.ShardBits > MaxShardBits:
		return bad("Options.ShardBits %d is out of range (use 0..%d, the transport's shard_bits)", o.ShardBits, MaxShardBits)
	case o.ShardBits != 0 && o.UDPPort == 0:
		return bad("Options.ShardBits %d needs Options.UDPPort (set udp_port to the transport's port: only its datagrams carry a CID)", o.ShardBits)
	case o.TxBatch < 1 || o.TxBatch > o.RingSize:
		return bad("Options.TxBatch %d is out of range (use 1..RingSize %d, or 0 for %d)", o.TxBatch, o.RingSize, DefaultTxBatch)
	case o.BusyPoll < 0 || o.BusyPoll > MaxBusyPoll || o.BusyPoll%time.Microsecond != 0:
		return bad("Options.BusyPoll %v is out of range (use 0 for off, or whole microseconds up to %v, e.g. %v)", o.BusyPoll, MaxBusyPoll, DefaultBusyPoll)
	case o.BusyBudget < 0 || o.BusyBudget > MaxBusyBudget:
		return bad("Options.BusyBudget %d is out of range (use 1..%d, or 0 for %d)", o.BusyBudget, MaxBusyBudget, DefaultBusyBudget)
	}
	if o.BusyPoll > 0 || o.BusyBudget > 0 {
		o.BusyPoll = cmp.Or(o.BusyPoll, DefaultBusyPoll)
		o.BusyBudget = cmp.Or(o.BusyBudget, DefaultBusyBudget)
	}
	switch o.Mode {
	case ModeAuto, ModeNative, ModeGeneric:
	default:
		return bad("Options.Mode %q is not one of auto, native, generic", o.Mode)
	}
	switch o.ZeroCopy {
	case ZeroCopyAuto, ZeroCopyOn, ZeroCopyOff:
	default:
		return bad("Options.ZeroCopy %q is not one of auto, on, off", o.ZeroCopy)
	}
	return o, nil
}
