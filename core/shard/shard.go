// Package shard splits one port among the shards of a sharded transport:
// shard i is a transport endpoint on its own poll loop, driving queue i of
// the port, and this package gives it a view of the port (Port) that keeps
// on its queue only the frames it owns (Owner): those whose destination
// CID names it.
//
// Steering is meant to happen before a frame reaches a queue (the sender
// transmits on the queue that pairs with its peer's shard, or picks a UDP
// source port the receiver's RSS puts on the right queue); a frame that
// arrives on another shard's queue anyway is handed over here, as the last
// resort: the receiving shard reads its destination CID (wire.PeekCID, the
// top rt.Options.ShardBits bits name the shard) and moves the handle over a
// single-producer single-consumer ring to the owner, counting it
// (Stats.SteeredOut: steered_in_software). There is one ring per ordered
// pair of shards, so no ring has two producers or two consumers, and
// nothing else is shared: each shard's counters are written by its own
// loop only, on a cache line of their own, once per burst.
//
// A frame with destination CID 0 (a ConnOpen, or data its initiator sends
// before the ConnAccept) names no connection yet: it belongs to the shard
// the opener's own CID names (the source-CID extension read in the same
// bits, Owner), the same for every copy. So a retransmitted ConnOpen that
// arrives on another queue than the first (the opener moved it to
// another sending queue, the NIC's hash or a flow rule changed) still
// reaches the shard that accepted the first, which finds the connection
// in its table, instead of opening a second one on the shard it landed
// on. A frame that names no shard (not a transport datagram, a CID whose
// shard bits name no shard of the set, CID 0 without a source CID) stays
// where it arrived: the endpoint counts it.
//
// Ownership: a handle the device hands shard i is shard i's; moved to
// shard j, it belongs to the ring until j's RxBurst takes it out, then to
// j. A handle that finds j's ring full is freed to the pool at once and
// counted (Stats.HandoffDropped): a loss the transport recovers like any
// other. Close frees what the rings still hold, once every loop stopped.
package shard

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/rings"
)

// MaxShards is the most shards a Set splits a port among (the CID's shard
// bits, rt.MaxShardBits).
const MaxShards = 1 << rt.MaxShardBits

// DefaultRing is the capacity of each hand-off ring: a few bursts.
const DefaultRing = 1024

// Bits returns the CID bits n shards need (rt.Options.ShardBits): the
// ceiling of log2 n.
func Bits(n int) uint {
	if n <= 1 {
		return 0
	}
	return uint(bits.Len(uint(n - 1)))
}

// Set is a port split among n shards.
type Set struct {
	dev   port.Port
	pool  *mbuf.Pool
	bits  uint
	ports []*Port
}

// New splits dev, whose frames live in pool, among n shards: shard i
// drives queue i, so dev needs at least n queues. ring is the capacity of
// each hand-off ring (a power of two; 0: DefaultRing).
func New(dev port.Port, pool *mbuf.Pool, n, ring int) (*Set, error) {
	if dev == nil || pool == nil {
		return nil, errors.New("shard: New needs the port and its pool")
	}
	if n < 1 || n > MaxShards {
		return nil, fmt.Errorf("shard: %d shards is out of range (use 1..%d)", n, MaxShards)
	}
	if q := dev.Info().Queues; q < n {
		return nil, fmt.Errorf("shard: %d shards need %d queues, and port %s has %d (open it with queues=%d, or run at most %d shards)", n, n, dev.Info().Name, q, n, q)
	}
	if ring == 0 {
		ring = DefaultRing
	}
	s := &Set{dev: dev, pool: pool, bits: Bits(n), ports: make([]*Port, n)}
	for i := range s.ports {
		s.ports[i] = &Port{Port: dev, set: s, i: i, pool: pool, in: make([]*rings.SPSC[mbuf.Handle], n), out: make([]*rings.SPSC[mbuf.Handle], n),
			drop: make([]mbuf.Handle, 0, rt.MaxBurst)}
	}
	if n == 1 {
		return s, nil
	}
	for i, from := range s.ports {
		for j, to := range s.ports {
			if i == j {
				continue
			}
			r, err := rings.NewSPSC[mbuf.Handle](ring)
			if err != nil {
				return nil, fmt.Errorf("shard: hand-off ring: %w", err)
			}
			from.out[j], to.in[i] = r, r
		}
	}
	return s, nil
}

// Len is the number of shards.
func (s *Set) Len() int { return len(s.ports) }

// Bits is the CID bits the shards' endpoints take (rt.Options.ShardBits).
func (s *Set) Bits() uint { return s.bits }

// Port returns shard i's view of the port: give it to shard i's endpoint
// with Options.Queue i. With one shard it is the device itself.
func (s *Set) Port(i int) port.Port {
	if len(s.ports) == 1 {
		return s.dev
	}
	return s.ports[i]
}

// Stats returns shard i's counters (safe while the loops run).
func (s *Set) Stats(i int) Stats { return s.ports[i].Counters() }

// Missteered returns, per device queue, the frames the device saw arrive
// there with another shard's CID, before any hand-off (an afxdp port with
// shard_bits counts them in its XDP program); nil when the device does not
// count them.
func (s *Set) Missteered() []uint64 {
	if m, ok := s.dev.(interface{ Missteered() []uint64 }); ok {
		return m.Missteered()
	}
	return nil
}

// Total sums every shard's counters.
func (s *Set) Total() Stats {
	var t Stats
	for _, p := range s.ports {
		st := p.Counters()
		t.Received += st.Received
		t.SteeredOut += st.SteeredOut
		t.SteeredIn += st.SteeredIn
		t.HandoffDropped += st.HandoffDropped
	}
	return t
}

// SteeredFraction is the share of the frames received from the device
// that were moved to another shard in software (0 when none arrived).
func (s Stats) SteeredFraction() float64 {
	if s.Received == 0 {
		return 0
	}
	return float64(s.SteeredOut+s.HandoffDropped) / float64(s.Received)
}

// Close frees what the hand-off rings still hold. Call it once every
// loop stopped; the device is not closed (its owner closes it).
func (s *Set) Close() error {
	var buf [64]mbuf.Handle
	for _, p := range s.ports {
		for _, r := range p.in {
			if r == nil {
				continue
			}
			for n := r.DequeueBurst(buf[:]); n > 0; n = r.DequeueBurst(buf[:]) {
				s.pool.Free(buf[:n])
			}
		}
	}
	return nil
}

// Stats are one shard's counters.
type Stats struct {
	// Received frames came from the shard's device queue; of them,
	// SteeredOut named another shard and went over a ring to it, and
	// HandoffDropped found that ring full and were freed.
	Received, SteeredOut, HandoffDropped uint64
	// SteeredIn frames came from other shards' rings.
	SteeredIn uint64
}

// Port is one shard's view of the device: RxBurst keeps the frames of
// this shard, TxBurst and the rest go to the device.
type Port struct {
	port.Port
	set  *Set
	i    int
	pool *mbuf.Pool
	in   []*rings.SPSC[mbuf.Handle] // in[j]: from shard j (nil for j == i)
	out  []*rings.SPSC[mbuf.Handle] // out[j]: to shard j
	drop []mbuf.Handle
	_    [64]byte
	// Written by the shard's loop only; read by anyone.
	received, steeredOut, steeredIn, dropped atomic.Uint64
	_                                        [64]byte
}

// RxBurst takes frames other shards handed over first, then receives
// from the shard's queue and hands over those of other shards. queue is
// the shard's own (rt.Options.Queue).
func (p *Port) RxBurst(queue int, bufs []mbuf.Handle) int {
	n := 0
	for _, r := range p.in {
		if r != nil && n < len(bufs) {
			n += r.DequeueBurst(bufs[n:])
		}
	}
	in := n
	m := p.Port.RxBurst(queue, bufs[n:])
	kept, out := n, 0
	for k := n; k < n+m; k++ {
		h := bufs[k]
		if j := p.owner(p.pool.Data(h)); j != p.i {
			if p.out[j].EnqueueBurst(bufs[k:k+1]) == 1 {
				out++
			} else {
				p.drop = append(p.drop, h)
			}
			continue
		}
		bufs[kept] = h
		kept++
	}
	if m > 0 {
		p.received.Add(uint64(m))
	}
	if in > 0 {
		p.steeredIn.Add(uint64(in))
	}
	if out > 0 {
		p.steeredOut.Add(uint64(out))
	}
	if len(p.drop) > 0 {
		p.dropped.Add(uint64(len(p.drop)))
		p.pool.Free(p.drop)
		p.drop = p.drop[:0]
	}
	return kept
}

// owner is the shard that owns a frame (Owner); this one for a frame
// that names none, which the endpoint decides on.
func (p *Port) owner(b []byte) int {
	if j, ok := Owner(b, p.set.bits, len(p.set.ports)); ok {
		return j
	}
	return p.i
}

// TxFlush passes a flush to the device (port.TxFlusher).
func (p *Port) TxFlush(queue int) { port.FlushTx(p.Port, queue) }

// Close does nothing: the device belongs to its opener, the rings to the
// Set.
func (p *Port) Close() error { return nil }

// Counters returns the shard's counters (Stats are the device's).
func (p *Port) Counters() Stats {
	return Stats{Received: p.received.Load(), SteeredOut: p.steeredOut.Load(), SteeredIn: p.steeredIn.Load(), HandoffDropped: p.dropped.Load()}
}
