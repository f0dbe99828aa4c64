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
	// MaxHashQueues bounds Queues under SteerHash, which joins every
	// sending queue to every receiving queue: Queues² rings per direction.
	MaxHashQueues = 64
)

// Steer says which of the peer's receive queues a transmitted packet
// arrives on.
type Steer int

const (
	// SteerQueue: a packet sent on queue q arrives on the peer's queue q.
	SteerQueue Steer = iota
	// SteerHash: a packet arrives on the queue the peer NIC's RSS would
	// pick, RSSQueue(RSSHash(frame), Queues), whatever queue sent it. The
	// hash is computed on the sending side, as the packet is enqueued.
	SteerHash
)

func (s Steer) String() string {
	if s == SteerHash {
		return "hash"
	}
	return "queue"
}

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
	// Steer chooses the receive queue of each packet. Default SteerQueue.
	Steer Steer
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
	if o.Steer == SteerHash && o.Queues > MaxHashQueues {
		return fmt.Errorf("mem: PairOptions.Queues %d is out of range with hash steering (use 1..%d)", o.Queues, MaxHashQueues)
	}
	if o.Steer != SteerQueue && o.Steer != SteerHash {
		return fmt.Errorf("mem: PairOptions.Steer %d is not SteerQueue or SteerHash", int(o.Steer))
	}
	if o.MTU < MinMTU || o.MTU > MaxMTU {
		return fmt.Errorf("mem: PairOptions.MTU %d is out of range (use %d..%d)", o.MTU, MinMTU, MaxMTU)
	}
	return nil
}

// Port is one end of a mem pair. It implements port.Port.
type Port struct {
	pool *mbuf.Pool
	info port.Info
	// rx[r] are the rings receive queue r consumes: one per peer sending
	// queue under SteerHash (rx[r][q] is fed by the peer's queue q), else
	// the one ring the peer's queue r feeds. tx[q] are the rings sending
	// queue q feeds, indexed by the peer's receive queue, or its one ring.
	rx     [][]*rings.SPSC[mbuf.Handle]
	tx     [][]*rings.SPSC[mbuf.Handle]
	rxNext []rxCursor // per receive queue: the ring polled first
	// rxBells[r]: the ring of the loop that consumes receive queue r
	// (SetRxBell), called by the peer's TxBurst after it enqueued frames
	// the queue receives; nil when none.
	rxBells []rxBell
	stats   *portstat.Counters
	peer    *Port
	closed  atomic.Bool
	// ends counts the pair's ends not yet closed; shared by both ends.
	ends *atomic.Int32
	// onClose, if set, runs once after Close; the registry uses it to
	// release the pair's name.
	onClose func()
}

var _ port.Port = (*Port)(nil)

// rxCursor is written by one receive queue's goroutine only; the padding
// keeps two queues' cursors off one cache line.
type rxCursor struct {
	next int
	_    [120]byte
}

// rxBell is one receive queue's bell: stored by the consuming loop, read
// by the peer's sending goroutines, on a cache line of its own.
type rxBell struct {
	ring atomic.Pointer[func()]
	_    [120]byte
}

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

// newRings returns one direction's rings indexed [sending queue][receiving
// queue]: the diagonal only under SteerQueue (a 1-element row per queue),
// the full mesh under SteerHash, so that every ring keeps one producer and
// one consumer.
func newRings(opts PairOptions) ([][]*rings.SPSC[mbuf.Handle], error) {
	rs := make([][]*rings.SPSC[mbuf.Handle], opts.Queues)
	for q := range rs {
		n := 1
		if opts.Steer == SteerHash {
			n = opts.Queues
		}
		rs[q] = make([]*rings.SPSC[mbuf.Handle], n)
		for i := range rs[q] {
			r, err := rings.NewSPSC[mbuf.Handle](opts.Size)
			if err != nil {
				return nil, fmt.Errorf("mem: queue ring: %w", err)
			}
			rs[q][i] = r
		}
	}
	return rs, nil
}

// transpose turns [sender][receiver] into [receiver][sender], the view of
// the receiving end.
func transpose(rs [][]*rings.SPSC[mbuf.Handle]) [][]*rings.SPSC[mbuf.Handle] {
	if len(rs) == 0 || len(rs[0]) == 1 {
		return rs
	}
	out := make([][]*rings.SPSC[mbuf.Handle], len(rs[0]))
	for r := range out {
		out[r] = make([]*rings.SPSC[mbuf.Handle], len(rs))
		for q := range rs {
			out[r][q] = rs[q][r]
		}
	}
	return out
}

func newEnd(pool *mbuf.Pool, opts PairOptions, end int, rx, tx [][]*rings.SPSC[mbuf.Handle], ends *atomic.Int32) *Port {
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
		rx:      transpose(rx),
		tx:      tx,
		rxNext:  make([]rxCursor, opts.Queues),
		rxBells: make([]rxBell, opts.Queues),
		stats:   portstat.New(opts.Queues),
		ends:    ends,
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

// RxBurst dequeues up to len(bufs) handles the peer steered to queue. The
// caller owns bufs[:n]. Under SteerHash it takes from the rings of every
// peer sending queue in turn, starting one further each call, so no sender
// starves another.
func (p *Port) RxBurst(queue int, bufs []mbuf.Handle) int {
	if uint(queue) >= uint(len(p.rx)) || p.closed.Load() {
		return 0
	}
	rs := p.rx[queue]
	var n int
	if len(rs) == 1 {
		n = rs[0].DequeueBurst(bufs)
	} else {
		c := &p.rxNext[queue]
		first := c.next
		for i := range rs {
			n += rs[(first+i)%len(rs)].DequeueBurst(bufs[n:])
			if n == len(bufs) {
				break
			}
		}
		c.next = (first + 1) % len(rs)
	}
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
	var n int
	if rs := p.tx[queue]; len(rs) == 1 {
		n = rs[0].EnqueueBurst(bufs)
		if n > 0 {
			p.peer.ringRx(queue)
		}
	} else {
		if n = p.steer(rs, bufs); n > 0 {
			for r := range rs {
				p.peer.ringRx(r) // the queues steered to: cheap to ask all
			}
		}
	}
	if n < len(bufs) {
		bytes -= portstat.Bytes(p.pool, bufs[n:])
		q.AddTxDropped(len(bufs) - n)
	}
	q.AddTx(n, bytes)
	return n
}

// steer enqueues each of bufs on the ring towards the receive queue its
// flow hashes to, in order, and stops at the first whose ring is full, so
// the caller keeps a suffix as TxBurst promises.
func (p *Port) steer(rs []*rings.SPSC[mbuf.Handle], bufs []mbuf.Handle) int {
	for i := range bufs {
		r := RSSQueue(RSSHash(p.pool.Data(bufs[i])), len(rs))
		if rs[r].EnqueueBurst(bufs[i:i+1]) == 0 {
			return i
		}
	}
	return len(bufs)
}

// SetRxBell implements port.RxBeller: the peer's TxBurst calls ring after
// it enqueued frames for queue (nil: no longer). A loop that sleeps with
// no descriptor for the queue to wake it hands in its Ring.
func (p *Port) SetRxBell(queue int, ring func()) {
	if uint(queue) >= uint(len(p.rxBells)) {
		return
	}
	if ring == nil {
		p.rxBells[queue].ring.Store(nil)
		return
	}
	p.rxBells[queue].ring.Store(&ring)
}

// ringRx rings the loop consuming receive queue r, if one asked.
func (p *Port) ringRx(r int) {
	if ring := p.rxBells[r].ring.Load(); ring != nil {
		(*ring)()
	}
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

func (p *Port) drain(rss [][]*rings.SPSC[mbuf.Handle]) {
	var buf [64]mbuf.Handle
	for _, r := range slices.Concat(rss...) {
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
