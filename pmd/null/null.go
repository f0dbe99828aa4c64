package null

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/internal/portstat"
)

// DriverName is the name the driver registers under.
const DriverName = "null"

// Defaults and limits of Options.
const (
	DefaultQueues = 1
	DefaultSize   = 64
	MaxQueues     = 256
	// MTU is what Info advertises; the port carries any length that fits a
	// frame.
	MTU = 1500
)

// fillEtherType is IEEE 802 "local experimental" EtherType 1: frames that
// mean nothing to anyone.
const fillEtherType = 0x88b5

// Options configure New. Zero fields take their defaults.
type Options struct {
	// Name is Info().Name. Default "null:".
	Name string
	// Queues is the number of queue pairs. Default 1.
	Queues int
	// Size is the data length of received frames, at most the pool's frame
	// room (FrameSize - Headroom). Default 64.
	Size int
	// Fill writes a broadcast Ethernet frame with this port's source MAC
	// into every received frame, costing a copy per packet.
	Fill bool
	// Cache, when set, serves every queue's RX and TX instead of caches of
	// the port's own, like a DPDK lcore's mempool cache shared by all the
	// ports that lcore polls: a frame TX frees is the next one RX hands out,
	// still hot in the CPU cache. The caller must then drive every queue of
	// this port, and anything else using Cache, from one goroutine, and
	// owns Cache (the port's Close does not flush it).
	Cache *mbuf.Cache
}

// Port is a null port. It implements port.Port.
type Port struct {
	pool     *mbuf.Pool
	info     port.Info
	size     uint16
	template []byte // nil unless Options.Fill
	queues   []queue
	stats    *portstat.Counters
	closed   atomic.Bool
}

type queue struct {
	rx, tx *mbuf.Cache
	owned  bool // the caches are the port's own, closed by Close
}

var _ port.Port = (*Port)(nil)

// New opens a null port allocating from pool.
func New(pool *mbuf.Pool, opts Options) (*Port, error) {
	if pool == nil {
		return nil, errors.New("null: New: pool is nil (pass the pool received frames come from)")
	}
	if opts.Name == "" {
		opts.Name = DriverName + ":"
	}
	if opts.Queues == 0 {
		opts.Queues = DefaultQueues
	}
	if opts.Size == 0 {
		opts.Size = DefaultSize
	}
	if opts.Queues < 1 || opts.Queues > MaxQueues {
		return nil, fmt.Errorf("null: Options.Queues %d is out of range (use 1..%d)", opts.Queues, MaxQueues)
	}
	room := pool.FrameSize() - pool.Headroom()
	if opts.Size < 1 || opts.Size > room {
		return nil, fmt.Errorf("null: Options.Size %d is out of range (use 1..%d, the pool's frame size minus headroom)", opts.Size, room)
	}
	p := &Port{
		pool: pool,
		info: port.Info{
			Name:   opts.Name,
			Driver: DriverName,
			Queues: opts.Queues,
			MTU:    MTU,
			MAC:    nameMAC(opts.Name),
		},
		size:   uint16(opts.Size),
		queues: make([]queue, opts.Queues),
		stats:  portstat.New(opts.Queues),
	}
	if opts.Fill {
		p.template = fillFrame(opts.Size, p.info.MAC)
	}
	for i := range p.queues {
		if opts.Cache != nil {
			p.queues[i] = queue{rx: opts.Cache, tx: opts.Cache}
		} else {
			p.queues[i] = queue{rx: pool.NewCache(), tx: pool.NewCache(), owned: true}
		}
	}
	return p, nil
}

func nameMAC(name string) net.HardwareAddr {
	h := fnv.New32a()
	h.Write([]byte(name))
	sum := h.Sum32()
	return net.HardwareAddr{0x02, 0x6e, byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)}
}

// fillFrame builds the frame Fill copies: broadcast destination, src, the
// experimental EtherType, then a counting byte pattern. Frames shorter than
// an Ethernet header get a truncated one.
func fillFrame(size int, src net.HardwareAddr) []byte {
	f := make([]byte, max(size, 14))
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:14], fillEtherType)
	for i := 14; i < len(f); i++ {
		f[i] = byte(i)
	}
	return f[:size]
}

// RxBurst allocates up to len(bufs) frames of Options.Size bytes; the
// caller owns bufs[:n]. A short count means the pool ran dry (RxNoBuf).
func (p *Port) RxBurst(queue int, bufs []mbuf.Handle) int {
	if uint(queue) >= uint(len(p.queues)) || len(bufs) == 0 || p.closed.Load() {
		return 0
	}
	n := p.queues[queue].rx.AllocBurst(bufs)
	st := p.stats.Queue(queue)
	if n < len(bufs) {
		st.RxNoBuf.Add(1)
	}
	for _, h := range bufs[:n] {
		p.pool.Meta(h).DataLen = p.size
	}
	if p.template != nil {
		for _, h := range bufs[:n] {
			copy(p.pool.Data(h), p.template)
		}
	}
	st.AddRx(n, uint64(n)*uint64(p.size))
	return n
}

// TxBurst frees every handle in bufs and returns len(bufs).
func (p *Port) TxBurst(queue int, bufs []mbuf.Handle) int {
	if uint(queue) >= uint(len(p.queues)) || len(bufs) == 0 || p.closed.Load() {
		return 0
	}
	bytes := portstat.Bytes(p.pool, bufs)
	p.queues[queue].tx.Free(bufs)
	p.stats.Queue(queue).AddTx(len(bufs), bytes)
	return len(bufs)
}

// Info describes the port.
func (p *Port) Info() port.Info {
	info := p.info
	info.MAC = slices.Clone(p.info.MAC)
	return info
}

// Stats returns a snapshot of the port's counters.
func (p *Port) Stats() port.Stats { return p.stats.Snapshot() }

// Close returns the frames cached by the port's queues to the pool. It is
// idempotent and returns nil.
func (p *Port) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	for _, q := range p.queues {
		if q.owned {
			q.rx.Close()
			q.tx.Close()
		}
	}
	return nil
}
