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
	// BlockSize is the size of a receive-ring block and of the transmit
	// ring's blocks: a multiple of the page size. Default 64 KiB.
	BlockSize int
	// BlockCount is the number of blocks in each ring. Default 32.
	BlockCount int
	// FrameSize is the size of a transmit slot (and the receive ring's
	// nominal frame size): a multiple of 16 that divides BlockSize. A slot
	// carries frames of up to FrameSize-48 bytes. Default 2048.
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
	// added latency at low rates. Default 1 ms.
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
}

// txBlocks is the number of blocks of the transmit ring: TxSlots rounded
// up to whole blocks.
func (o *Options) txBlocks() int {
	perBlock := o.BlockSize / o.FrameSize
	return (o.TxSlots + perBlock - 1) / perBlock
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
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.BlockCount == 0 {
		o.BlockCount = DefaultBlockCount
	}
	if o.FrameSize == 0 {
		o.FrameSize = DefaultFrameSize
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
	page := os.Getpagesize()
	if o.BlockSize < page || o.BlockSize > MaxBlockSize || o.BlockSize%page != 0 {
		return fmt.Errorf("afpacket: Options.BlockSize %d is not a multiple of the page size %d in %d..%d (use %d)", o.BlockSize, page, page, MaxBlockSize, DefaultBlockSize)
	}
	if o.BlockCount < 1 || o.BlockCount > MaxBlockCount {
		return fmt.Errorf("afpacket: Options.BlockCount %d is out of range (use 1..%d)", o.BlockCount, MaxBlockCount)
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
