package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// host is a sharded side of a Sim: Config.Shards endpoints, shard i on
// queue i of a multi-queue mem port (dev), each through core/shard's view of
// that port, and a NIC stage between the network's one-queue port and the
// mem pair's other end (nic). The NIC does what an XDP program or the
// NIC's flow steering does on a real port: it reads each arriving frame's
// destination CID and puts the frame on the queue of the shard the CID
// names. A frame without one (a ConnOpen) goes to the shard whose number
// the opener's own CID carries (the source CID extension), as core/shard
// reads it (shard.Owner): the shard it reaches accepts the connection,
// and a retransmitted ConnOpen reaches the same one. Both sides having the
// same shard count, opener shard i pairs with accepting shard i, as it
// does on a multi-queue port where queue i of one end delivers to queue i
// of the other (mem's SteerQueue, veth). A frame that names no shard goes
// where the RSS hash of its flow sends it. With Config.Missteer it puts
// that share of the frames that have an owner, ConnOpens included, on a
// wrong queue instead, so core/shard's software hand-off carries them
// (and counts them): a ConnOpen and its retransmission can then arrive on
// different queues, and must still open one connection. What the shards
// send on their queues the NIC passes to the network unchanged.
//
// Ownership: a frame the network's port hands the NIC is the NIC's until
// the mem ring of its queue accepts it (a full ring frees it, counted in
// Dropped); from there it is the shard's, as core/shard says; the NIC owns
// what it takes from the mem queues until the network's port accepts it.
type host struct {
	name   string
	net    port.Port // the network's port (one queue)
	dev    port.Port // the shards' side of the mem pair
	nic    port.Port // the NIC's side of the mem pair
	set    *shard.Set
	pool   *mbuf.Pool
	n      int
	bits   uint
	miss   fabric.Percent
	rng    *rand.Rand
	buf    []mbuf.Handle
	byQ    [][]mbuf.Handle
	ports  []*shardPort
	Missed uint64 // frames the NIC put on a wrong queue on purpose
	Drops  uint64 // frames a full queue ring refused
}

func newHost(name string, netPort port.Port, pool *mbuf.Pool, n int, miss fabric.Percent, seed uint64) (*host, error) {
	dev, nic, err := mem.NewPair(pool, mem.PairOptions{Name: name, Size: 4096, Queues: n})
	if err != nil {
		return nil, err
	}
	set, err := shard.New(dev, pool, n, 0)
	if err != nil {
		return nil, errors.Join(err, dev.Close(), nic.Close())
	}
	h := &host{name: name, net: netPort, dev: dev, nic: nic, set: set, pool: pool, n: n, bits: set.Bits(), miss: miss,
		rng: rand.New(rand.NewPCG(seed, 0x5ba4d)), buf: make([]mbuf.Handle, rt.MaxBurst), byQ: make([][]mbuf.Handle, n)}
	for i := range n {
		h.byQ[i] = make([]mbuf.Handle, 0, rt.MaxBurst)
		h.ports = append(h.ports, &shardPort{Port: set.Port(i), i: i, n: n, bits: h.bits, pool: pool})
	}
	return h, nil
}

// Name implements lcore.Stage.
func (h *host) Name() string { return h.name + "-nic" }

// Poll moves what arrived from the network to the shards' queues and what
// the shards sent to the network.
func (h *host) Poll(clock.Time) int {
	work := 0
	for {
		m := h.net.RxBurst(0, h.buf)
		if m == 0 {
			break
		}
		work += m
		for _, b := range h.buf[:m] {
			q := h.queue(h.pool.Data(b))
			h.byQ[q] = append(h.byQ[q], b)
		}
		for q, hs := range h.byQ {
			if k := h.nic.TxBurst(q, hs); k < len(hs) {
				h.Drops += uint64(len(hs) - k)
				h.pool.Free(hs[k:])
			}
			h.byQ[q] = hs[:0]
		}
	}
	for q := range h.n {
		for {
			m := h.nic.RxBurst(q, h.buf)
			if m == 0 {
				break
			}
			work += m
			if k := h.net.TxBurst(0, h.buf[:m]); k < m {
				h.pool.Free(h.buf[k:m])
			}
		}
	}
	port.FlushTx(h.net, 0)
	return work
}

// queue is the queue the NIC puts a frame on: its owner's (shard.Owner:
// the shard its destination CID names, or for a ConnOpen the one its
// opener's source CID names), or where the RSS hash of its flow sends a
// frame that names none. With Config.Missteer, that share of the frames
// with an owner, ConnOpens too, goes to another queue, for core/shard to
// hand over.
func (h *host) queue(b []byte) int {
	q, ok := shard.Owner(b, h.bits, h.n)
	if !ok {
		return mem.RSSQueue(mem.RSSHash(b), h.n)
	}
	if h.miss > 0 && h.rng.Float64()*100 < float64(h.miss) {
		q = (q + 1 + h.rng.IntN(h.n-1)) % h.n
		h.Missed++
	}
	return q
}

// Touched returns, per shard, the frames its endpoint received that
// another shard owns (whose CID, or a ConnOpen's source CID, names
// another shard): zero whatever the NIC did, or a shard touched another's
// packet.
func (h *host) Touched() []uint64 {
	t := make([]uint64, h.n)
	for i, p := range h.ports {
		t[i] = p.touched
	}
	return t
}

// stop returns to the pool every frame the mem queues and the hand-off
// rings still hold.
func (h *host) stop() {
	for _, p := range []port.Port{h.dev, h.nic} {
		for q := range h.n {
			for m := p.RxBurst(q, h.buf); m > 0; m = p.RxBurst(q, h.buf) {
				h.pool.Free(h.buf[:m])
			}
		}
	}
	_ = h.set.Close()
}

func (h *host) close() error {
	h.stop()
	return errors.Join(h.dev.Close(), h.nic.Close())
}

// shardPort is the port a shard's endpoint drives: core/shard's view, with
// a count of the frames it delivers that belong to another shard
// (shard.Owner: ConnOpens included).
type shardPort struct {
	port.Port
	i, n    int
	bits    uint
	pool    *mbuf.Pool
	touched uint64
}

func (p *shardPort) RxBurst(queue int, bufs []mbuf.Handle) int {
	n := p.Port.RxBurst(queue, bufs)
	for _, b := range bufs[:n] {
		if j, ok := shard.Owner(p.pool.Data(b), p.bits, p.n); ok && j != p.i {
			p.touched++
		}
	}
	return n
}

func (p *shardPort) TxFlush(queue int) { port.FlushTx(p.Port, queue) }

// shardOptions makes o the options of shard i of n.
func shardOptions(o rt.Options, name string, i, n int, seed uint64) rt.Options {
	if n <= 1 {
		o.Seed = seed
		return o
	}
	o.ShardBits, o.Shard, o.Queue = shard.Bits(n), i, i
	o.Name = fmt.Sprintf("%s%d", name, i)
	o.Seed = seed + uint64(i)<<32
	return o
}
