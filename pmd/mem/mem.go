package mem

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/internal/portstat"
	"github.com/peregrine-net/peregrine/rings"
)

// DriverName is the name the driver registers under.
const DriverName = "mem"

// Defaults and limits of PairOptions.
const (
	DefaultQueues = 1
	DefaultSize   = 1024
	DefaultMTU    = 9000
	MaxQueues     = 256
	MaxSize       = 1 << 24
	MinMTU        = 68
	MaxMTU        = 65535
)

// ErrEndInUse is returned when an end of a mem pair is opened while it is
// already open.
var ErrEndInUse = errors.New("mem: pair end already open")

// PairOptions configure NewPair. Zero fields take their defaults.
type PairOptions struct {
	// Name names the pair in Info().Name ("mem:NAME/0") and seeds the MACs.
	// Default "mem".
	Name string
	// Queues is the number of queue pairs of each end. Default 1.
	Queues int
	// Size is the number of ring slots per queue per direction, a power of
	// two. Default 1024.
	Size int
	// MTU is advertised in Info. The pair does not enforce it. Default 9000.
	MTU int
}

func (o PairOptions) withDefaults() PairOptions {
	if o.Name == "" {
		o.Name = "mem"
	}
	if o.Queues == 0 {
		o.Queues = DefaultQueues
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	return o
}

func (o PairOptions) validate() error {
	if o.Queues < 1 || o.Queues > MaxQueues {
		return fmt.Errorf("mem: PairOptions.Queues %d is out of range (use 1..%d)", o.Queues, MaxQueues)
	}
	if o.Size < 2 || o.Size > MaxSize {
		return fmt.Errorf("mem: PairOptions.Size %d is out of range (use a power of two in 2..%d)", o.Size, MaxSize)
	}
	if o.Size&(o.Size-1) != 0 {
		return fmt.Errorf("mem: PairOptions.Size %d is not a power of two (use %d)", o.Size, 1<<bits.Len(uint(o.Size)))
	}
	if o.MTU < MinMTU || o.MTU > MaxMTU {
		return fmt.Errorf("mem: PairOptions.MTU %d is out of range (use %d..%d)", o.MTU, MinMTU, MaxMTU)
	}
	return nil
}

// Port is one end of a mem pair. It implements port.Port.
type Port struct {
	pool   *mbuf.Pool
	info   port.Info
	rx     []*rings.SPSC[mbuf.Handle] // this end consumes
	tx     []*rings.SPSC[mbuf.Handle] // this end produces; the peer's rx
	stats  *portstat.Counters
	peer   *Port
	closed atomic.Bool
	// ends counts the pair's ends not yet closed; shared by both ends.
	ends *atomic.Int32
	// onClose, if set, runs once after Close; the registry uses it to
	// release the pair's name.
	onClose func()
}

var _ port.Port = (*Port)(nil)

// NewPair returns the two ends of a new pair whose packets live in pool.
// Packets sent on a's TX queue q arrive on b's RX queue q and vice versa.
func NewPair(pool *mbuf.Pool, opts PairOptions) (a, b *Port, err error) {
	if pool == nil {
		return nil, nil, errors.New("mem: NewPair: pool is nil (pass the pool the packets live in)")
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, nil, err
	}
	aToB, err := newRings(opts)
	if err != nil {
		return nil, nil, err
	}
	bToA, err := newRings(opts)
	if err != nil {
		return nil, nil, err
	}
	ends := new(atomic.Int32)
	ends.Store(2)
	a = newEnd(pool, opts, 0, bToA, aToB, ends)
	b = newEnd(pool, opts, 1, aToB, bToA, ends)
	a.peer, b.peer = b, a
	return a, b, nil
}

func newRings(opts PairOptions) ([]*rings.SPSC[mbuf.Handle], error) {
	rs := make([]*rings.SPSC[mbuf.Handle], opts.Queues)
	for i := range rs {
		r, err := rings.NewSPSC[mbuf.Handle](opts.Size)
		if err != nil {
			return nil, fmt.Errorf("mem: queue ring: %w", err)
		}
		rs[i] = r
	}
	return rs, nil
}

func newEnd(pool *mbuf.Pool, opts PairOptions, end int, rx, tx []*rings.SPSC[mbuf.Handle], ends *atomic.Int32) *Port {
	return &Port{
		pool: pool,
		info: port.Info{
			Name:   fmt.Sprintf("%s:%s/%d", DriverName, opts.Name, end),
			Driver: DriverName,
			Queues: opts.Queues,
			MTU:    opts.MTU,
			MAC:    pairMAC(opts.Name, end),
			Caps:   port.CapZeroCopy,
		},
		rx:    rx,
		tx:    tx,
		stats: portstat.New(opts.Queues),
		ends:  ends,
	}
}

// pairMAC derives a stable, locally administered unicast MAC from the pair
// name and end, so captures and logs of a simulation are reproducible.
func pairMAC(name string, end int) net.HardwareAddr {
	h := fnv.New32a()
	h.Write([]byte(name))
	sum := h.Sum32()
	return net.HardwareAddr{0x02, byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum), byte(end)}
}

// RxBurst dequeues up to len(bufs) handles the peer sent on queue. The
// caller owns bufs[:n].
func (p *Port) RxBurst(queue int, bufs []mbuf.Handle) int {
	if uint(queue) >= uint(len(p.rx)) || p.closed.Load() {
		return 0
	}
	n := p.rx[queue].DequeueBurst(bufs)
	if n > 0 {
		p.stats.Queue(queue).AddRx(n, portstat.Bytes(p.pool, bufs[:n]))
	}
	return n
}

// TxBurst enqueues as many of bufs as fit in queue's ring towards the peer
// and owns bufs[:n]; the caller keeps bufs[n:]. It returns 0 once either end
// is closed.
func (p *Port) TxBurst(queue int, bufs []mbuf.Handle) int {
	if uint(queue) >= uint(len(p.tx)) || len(bufs) == 0 || p.closed.Load() {
		return 0
	}
	q := p.stats.Queue(queue)
	if p.peer.closed.Load() {
		q.AddTxDropped(len(bufs))
		return 0
	}
	// Lengths are read before the enqueue: once a handle is in the ring the
	// peer may free or rewrite it.
	bytes := portstat.Bytes(p.pool, bufs)
	n := p.tx[queue].EnqueueBurst(bufs)
	if n < len(bufs) {
		bytes -= portstat.Bytes(p.pool, bufs[n:])
		q.AddTxDropped(len(bufs) - n)
	}
	q.AddTx(n, bytes)
	return n
}

// Info describes the end.
func (p *Port) Info() port.Info {
	info := p.info
	info.MAC = slices.Clone(p.info.MAC)
	return info
}

// Stats returns a snapshot of the end's counters.
func (p *Port) Stats() port.Stats { return p.stats.Snapshot() }

// Close frees the handles waiting in this end's receive rings; the peer's
// TxBurst returns 0 from now on. Closing the second end also frees what the
// first end's rings still hold. Close is idempotent and always returns nil.
func (p *Port) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	p.drain(p.rx)
	if p.ends.Add(-1) == 0 {
		// Both ends are closed, so no burst runs on either: whatever a
		// racing TxBurst slipped into a ring after its consumer drained it
		// is freed here.
		p.drain(p.rx)
		p.drain(p.peer.rx)
	}
	if p.onClose != nil {
		p.onClose()
	}
	return nil
}

func (p *Port) drain(rs []*rings.SPSC[mbuf.Handle]) {
	var buf [64]mbuf.Handle
	for _, r := range rs {
		for {
			n := r.DequeueBurst(buf[:])
			if n == 0 {
				break
			}
			p.pool.Free(buf[:n])
		}
	}
}

// Peer returns the other end of the pair.
func (p *Port) Peer() *Port { return p.peer }

// table is the per-Env set of named pairs the registry opens ends from.
type table struct {
	mu    sync.Mutex
	pairs map[string]*entry
}

type entry struct {
	opts   PairOptions
	ends   [2]*Port
	opened [2]bool
	closed [2]bool
}
