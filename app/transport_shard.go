package app

import (
	"fmt"
	"sync"

	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/shard"
)

// ShardedTransport is what AddShardedTransport built: one Transport per
// shard, each on its own loop and queue, sharing nothing per packet.
type ShardedTransport struct {
	// Shards are the shards' transports, shard i on queue i.
	Shards []*Transport
	// Steer is the port split among them: per-shard counters of what the
	// software hand-off moved (shard package).
	Steer *shard.Set
}

// AddShardedTransport builds len(loops) shards of the transport o
// describes: shard i is a transaction endpoint (and, for an initiator, its
// workload) on loop loops[i], driving queue i of port o.Port, with the
// shard in the top bits of its CIDs (rt.Options.ShardBits). The port needs
// at least that many queues. Connection setup picks the shard: an
// initiator's o.Conns connections are dealt round robin (connection c to
// shard c mod N), each shard keeping o.Window operations outstanding on
// its own and posting its share of o.Count. A target's shard i accepts the
// connections whose ConnOpen's source CID names shard i (shard.Owner), the
// connections of the initiator's shard i when both have N shards, on
// whatever queue a copy arrives: with mem's steer=queue (and veth), an
// initiator's shard i transmits on queue i, which is the target's queue i,
// so shard i pairs with the peer's shard i and nothing crosses loops. The
// initiator's shards push into areas of their own of
// the target's region, so a target sizes its region for the same shard
// count (txnload.TargetMemoryFor), whether the connections land on one
// target shard or spread. Frames that land on the wrong queue are handed over in
// software and counted (shard.Stats.SteeredOut). Errors name the
// TransportOptions field to blame ("Shards" for the count).
func (p *Pipeline) AddShardedTransport(o TransportOptions, loops []int) (*ShardedTransport, error) {
	n := len(loops)
	if n < 1 || n > shard.MaxShards {
		return nil, &FieldError{"Shards", -1, fmt.Errorf("%d: use 1..%d", n, shard.MaxShards)}
	}
	pt, err := p.portAt("Port", o.Port)
	if err != nil {
		return nil, err
	}
	if q := pt.Info().Queues; q < n {
		return nil, &FieldError{"Shards", -1, fmt.Errorf("%d shards need a queue each, and port %s has %d: open it with queues=%d (mem:NAME/END?queues=%[4]d, afxdp:IF?queues=%[4]d) or run %[3]d shards", n, pt.Info().Name, q, n)}
	}
	if o.Role == "initiator" && o.Conns < n {
		return nil, &FieldError{"Conns", -1, fmt.Errorf("%d connections for %d shards: give each shard at least one (use %d or more)", o.Conns, n, n)}
	}
	if o.Count > 0 && o.Count < uint64(n) {
		return nil, &FieldError{"Count", -1, fmt.Errorf("%d operations for %d shards: give each shard at least one (use %d or more, or 0 for no end)", o.Count, n, n)}
	}
	set, err := shard.New(pt, p.pool, n, 0)
	if err != nil {
		return nil, &FieldError{"Shards", -1, err}
	}
	p.Own(set) // closed after the endpoints (Own closes in reverse)
	st := &ShardedTransport{Steer: set}
	for i, loop := range loops {
		so := o
		so.Loop, so.queue, so.dev, so.shardBits, so.shard, so.parts = loop, i, set.Port(i), set.Bits(), i, n
		if n > 1 {
			so.name = fmt.Sprintf("%s%d", o.Role, i)
		}
		so.Conns = o.Conns / n
		if i < o.Conns%n {
			so.Conns++
		}
		if o.Count > 0 {
			so.Count = o.Count / uint64(n)
			if uint64(i) < o.Count%uint64(n) {
				so.Count++
			}
		}
		if o.Seed != 0 { // the shards draw different CID generations and PSNs
			so.Seed = o.Seed + uint64(i)<<32
		}
		t, err := p.AddTransport(so)
		if err != nil {
			return nil, err
		}
		st.Shards = append(st.Shards, t)
	}
	return st, nil
}

// LoadStats sums the shards' workload counters (an initiator's; zero for
// a target).
func (s *ShardedTransport) LoadStats() txnload.Stats {
	var t txnload.Stats
	for _, sh := range s.Shards {
		if sh.Load != nil {
			t = t.Add(sh.Load.Stats())
		}
	}
	return t
}

// EndpointStats sums the shards' endpoint counters that a target reports.
func (s *ShardedTransport) EndpointStats() txn.Stats {
	var t txn.Stats
	for _, sh := range s.Shards {
		st := sh.Endpoint.Stats()
		t.RequestsDelivered += st.RequestsDelivered
		t.BytesPlaced += st.BytesPlaced
		t.BytesServed += st.BytesServed
		t.RefusedUnregistered += st.RefusedUnregistered
		t.RefusedAccess += st.RefusedAccess
		t.RefusedTooSmall += st.RefusedTooSmall
	}
	return t
}

// TransportStats sums the shards' reliable-transport counters that the
// summaries print.
func (s *ShardedTransport) TransportStats() rt.Stats {
	var t rt.Stats
	for _, sh := range s.Shards {
		st := sh.Endpoint.Transport().Stats()
		t.TxData += st.TxData
		t.TxRetransmit += st.TxRetransmit
		t.TxEarlyRetransmit += st.TxEarlyRetransmit
		t.RxFrames += st.RxFrames
		t.RxBadChecksum += st.RxBadChecksum
		t.RxDuplicate += st.RxDuplicate
		t.RxStalePSN += st.RxStalePSN
		t.RxUnknownCID += st.RxUnknownCID
		t.RxStaleCID += st.RxStaleCID
	}
	return t
}

// Pushes sums what the target shards received (Transport.Pushes).
func (s *ShardedTransport) Pushes() (received, wrong uint64) {
	for _, sh := range s.Shards {
		r, w := sh.Pushes()
		received, wrong = received+r, wrong+w
	}
	return received, wrong
}

// Latency merges the shards' workload latencies (read after the loops
// stop).
func (s *ShardedTransport) Latency() *hist.Histogram {
	h := &hist.Histogram{}
	for _, sh := range s.Shards {
		if sh.Load != nil {
			h.Merge(&sh.Load.Latency)
		}
	}
	return h
}

// ConnErr is the first shard's connection failure, or nil.
func (s *ShardedTransport) ConnErr() error {
	for _, sh := range s.Shards {
		if err := sh.ConnErr(); err != nil {
			return err
		}
	}
	return nil
}

// Down reports whether every shard's connections all failed.
func (s *ShardedTransport) Down() bool {
	for _, sh := range s.Shards {
		if sh.Load == nil || !sh.Load.Down() {
			return false
		}
	}
	return true
}

// Drain drains every shard at once (Transport.Drain): true when all did.
func (s *ShardedTransport) Drain() bool {
	ok := make([]bool, len(s.Shards))
	var wg sync.WaitGroup
	for i, sh := range s.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = sh.Drain()
		}()
	}
	wg.Wait()
	for _, d := range ok {
		if !d {
			return false
		}
	}
	return true
}
