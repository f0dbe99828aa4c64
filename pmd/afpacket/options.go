package afpacket

import (
	"fmt"
	"os"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
)

// DriverName is the name the driver registers under.
const DriverName = "afpacket"

// Defaults and limits of Options.
const (
	DefaultQueues       = 1
	MaxQueues           = 64
	DefaultBlockSize    = 1 << 16
	MaxBlockSize        = 1 << 22
	DefaultBlockCount   = 32
	MaxBlockCount       = 1 << 16
	DefaultFrameSize    = 2048
	MinFrameSize        = 128
	DefaultTxSlots      = 256
	DefaultTxBatch      = 128
	MaxTxSlots          = 1 << 16
	DefaultBlockTimeout = time.Millisecond
)

// RingVersion selects the layout of the receive ring (PACKET_VERSION).
type RingVersion int

const (
	// RingV2 is TPACKET_V2: a ring of fixed-size slots, one frame each.
	// A frame is the application's as soon as the kernel has written it,
	// so a lone frame waits for nothing: the latency-sensitive choice and
	// the default.
	RingV2 RingVersion = iota
	// RingV3 is TPACKET_V3: the kernel packs frames into blocks and hands
	// a block over when it is full or Options.BlockTimeout after its first
	// frame. Fewer status handovers per frame make it the capture
	// (rxonly) choice at high rates; at low rates every frame waits up to
	// the block timeout (1 ms at each hop it crosses).
	RingV3
)

// ringVersions is the number of RingVersion values.
const ringVersions = 2

// String returns the name used in specs: v2 or v3.
func (r RingVersion) String() string {
	switch r {
	case RingV2:
		return "v2"
	case RingV3:
		return "v3"
	}
	return fmt.Sprintf("RingVersion(%d)", int(r))
}

// Fanout selects how the kernel spreads received frames over the queues
// (PACKET_FANOUT modes).
type Fanout int

const (
	// FanoutHash keeps each flow on one queue (PACKET_FANOUT_HASH).
	FanoutHash Fanout = iota
	// FanoutLB deals frames round-robin (PACKET_FANOUT_LB).
	FanoutLB
	// FanoutCPU picks the queue by the CPU that received the frame.
	FanoutCPU
	// FanoutQM picks the queue by the device's receive queue (PACKET_FANOUT_QM).
	FanoutQM
)

// fanoutCount is the number of Fanout modes.
const fanoutCount = 4

// String returns the name used in specs: hash, lb, cpu or qm.
func (f Fanout) String() string {
	switch f {
	case FanoutHash:
		return "hash"
	case FanoutLB:
		return "lb"
	case FanoutCPU:
		return "cpu"
	case FanoutQM:
		return "qm"
	}
	return fmt.Sprintf("Fanout(%d)", int(f))
}

// Options configure New. Zero fields take their defaults.
type Options struct {
	// Interface is the name of the network interface (required).
	Interface string
	// Netns, when set, is the named network namespace (`ip netns`) the
	// interface lives in; the sockets are created there.
	Netns string
	// Name is Info().Name. Default "afpacket:" + Interface.
	Name string
	// Queues is the number of queue pairs, one socket each. Default 1.
	Queues int
	// Ring is the receive ring's layout. Default RingV2.
	Ring RingVersion
	// BlockSize is the size of a receive-ring block and of the transmit
	// ring's blocks: a multiple of the page size. Default 64 KiB, or one
	// FrameSize when that is larger.
	BlockSize int
	// BlockCount is the number of blocks in each ring. Default 32.
	BlockCount int
	// FrameSize is the size of a transmit slot and, with RingV2, of a
	// receive slot: a multiple of 16 that divides BlockSize. A transmit
	// slot carries frames of up to FrameSize-58 bytes (RingV3) or
	// FrameSize-42 (RingV2), a receive slot up to FrameSize-76. Default:
	// 2048, or the power of two that holds a frame of the interface's MTU
	// when that is larger (jumbo frames).
	FrameSize int
	// TxSlots is the number of transmit-ring slots, rounded up to whole
	// blocks. TxBurst writes slots in ring order and the kernel frees them
	// as it sends (over veth, before sendto returns), so the ring is the
	// transmit copy's working set: 256 slots of 2 KiB (512 KiB) stay in a
	// CPU's L2 cache, 1024 (the receive ring's size, used before) do not;
	// measured forwarding 1518-byte frames over veth, 1024 slots moved
	// 10-20 % fewer. A burst larger than the free slots is cut short.
	// Default 256.
	TxSlots int
	// TxBatch is how many frames may wait in transmit slots before the
	// system call that sends them, while TxBurst gets full bursts
	// (port.FullBurst frames or more): a saturated sender makes one call
	// per TxBatch frames instead of one per burst. A shorter burst and
	// TxFlush (port.FlushTx) send what waits at once. 1 sends every burst
	// at once. Default DefaultTxBatch, at most half of TxSlots.
	TxBatch int
	// BlockTimeout is how long the kernel keeps filling a receive block
	// before handing it over part-full, in whole milliseconds: the worst
	// added latency at low rates. RingV3 only. Default 1 ms.
	BlockTimeout time.Duration
	// QdiscBypass sends straight to the device, skipping the qdisc layer
	// (PACKET_QDISC_BYPASS): faster, but no traffic control and drops
	// rather than queueing when the device is busy.
	QdiscBypass bool
	// Promisc puts the interface in promiscuous mode while the port is open.
	Promisc bool
	// Fanout is how received frames are spread over several queues.
	Fanout Fanout
	// Clock stamps Meta.RxTime. nil → a real clock.
	Clock clock.Clock

	// autoFrame and autoBlock: FrameSize and BlockSize were left to
	// sizeSlots, which sizes them again once the MTU is known.
	autoFrame, autoBlock bool
	// mtu is the interface's, once openRings has looked (0 before).
	mtu int
}

// txBlocks is the number of blocks of the transmit ring: TxSlots rounded
// up to whole blocks.
func (o *Options) txBlocks() int {
	perBlock := o.BlockSize / o.FrameSize
	return (o.TxSlots + perBlock - 1) / perBlock
}

// frameOverhead is what a receive slot holds besides the frame: the
// tpacket header and sockaddr_ll, aligned, and the virtio-net header
// (76 bytes on V2), rounded up, with room for a VLAN tag.
const frameOverhead = 96 + vlanTagLen

// sizeSlots fills in FrameSize and BlockSize when they were left 0: 2048
// and 64 KiB, or, for an interface MTU (0 when not known yet) whose
// frames do not fit 2048, the power of two that holds one, and blocks of
// at least one frame. Sizes given are kept.
func (o *Options) sizeSlots(mtu int) {
	if o.FrameSize == 0 || o.autoFrame {
		o.autoFrame = true
		o.FrameSize = DefaultFrameSize
		for o.FrameSize < mtu+etherHeaderLen+frameOverhead && o.FrameSize < MaxBlockSize {
			o.FrameSize *= 2
		}
	}
	if o.BlockSize == 0 || o.autoBlock {
		o.autoBlock = true
		o.BlockSize = max(DefaultBlockSize, o.FrameSize)
	}
}

func (o *Options) validate() error {
	if o.Interface == "" {
		return fmt.Errorf("afpacket: Options.Interface is empty (name the interface, e.g. \"eth0\")")
	}
	if len(o.Interface) > 15 {
		return fmt.Errorf("afpacket: Options.Interface %q is longer than 15 characters (IFNAMSIZ-1)", o.Interface)
	}
	if o.Name == "" {
		o.Name = DriverName + ":" + o.Interface
	}
	if o.Queues == 0 {
		o.Queues = DefaultQueues
	}
	if o.BlockCount == 0 {
		o.BlockCount = DefaultBlockCount
	}
	if o.BlockTimeout == 0 {
		o.BlockTimeout = DefaultBlockTimeout
	}
	if o.TxSlots == 0 {
		o.TxSlots = DefaultTxSlots
	}
	if o.TxBatch == 0 {
		o.TxBatch = max(1, min(DefaultTxBatch, o.TxSlots/2))
	}
	if o.Queues < 1 || o.Queues > MaxQueues {
		return fmt.Errorf("afpacket: Options.Queues %d is out of range (use 1..%d)", o.Queues, MaxQueues)
	}
	o.sizeSlots(o.mtu)
	page := os.Getpagesize()
	if o.BlockSize < page || o.BlockSize > MaxBlockSize || o.BlockSize%page != 0 {
		return fmt.Errorf("afpacket: Options.BlockSize %d is not a multiple of the page size %d in %d..%d (use %d)", o.BlockSize, page, page, MaxBlockSize, DefaultBlockSize)
	}
	if o.BlockCount < 1 || o.BlockCount > MaxBlockCount {
		return fmt.Errorf("afpacket: Options.BlockCount %d is out of range (use 1..%d)", o.BlockCount, MaxBlockCount)
	}
	if o.Ring < 0 || o.Ring >= ringVersions {
		return fmt.Errorf("afpacket: Options.Ring %d is not a known layout (use RingV2, or RingV3 for capture)", int(o.Ring))
	}
	if o.FrameSize < MinFrameSize || o.FrameSize%16 != 0 || o.FrameSize > o.BlockSize || o.BlockSize%o.FrameSize != 0 {
		return fmt.Errorf("afpacket: Options.FrameSize %d must be a multiple of 16, at least %d, dividing BlockSize %d (use %d)", o.FrameSize, MinFrameSize, o.BlockSize, DefaultFrameSize)
	}
	if o.TxSlots < 1 || o.TxSlots > MaxTxSlots {
		return fmt.Errorf("afpacket: Options.TxSlots %d is out of range (use 1..%d, e.g. %d)", o.TxSlots, MaxTxSlots, DefaultTxSlots)
	}
	if o.TxBatch < 1 || o.TxBatch > o.TxSlots {
		return fmt.Errorf("afpacket: Options.TxBatch %d is out of range (use 1..TxSlots %d, or 0 for %d)", o.TxBatch, o.TxSlots, DefaultTxBatch)
	}
	if o.BlockTimeout < time.Millisecond || o.BlockTimeout%time.Millisecond != 0 || o.BlockTimeout > time.Minute {
		return fmt.Errorf("afpacket: Options.BlockTimeout %v must be whole milliseconds in 1ms..1m (use 1ms)", o.BlockTimeout)
	}
	if o.Fanout < 0 || o.Fanout >= fanoutCount {
		return fmt.Errorf("afpacket: Options.Fanout %d is not a known mode (use FanoutHash)", int(o.Fanout))
	}
	return nil
}
