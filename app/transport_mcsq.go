package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched/mcsq"
)

// MCSQInitiatorOptions configure AddMCSQInitiator: `peregrine transport
// initiator --targets N --dc-sqs M`.
type MCSQInitiatorOptions struct {
	// Port and Loop: the port the endpoint uses and the loop that polls
	// the engine (which polls the endpoint).
	Port, Loop int
	LocalIP    netip.Addr
	// Peer is the target process; RegionKey and RegionLen its region
	// (its READY line). Targets slices of it, one per target.
	Peer      rt.PeerAddr
	RegionKey uint32
	RegionLen int
	// Targets are the DC targets (flows) the posters pick from; DCSQs the
	// DC pool's size (the target accepts 64 connections: keep it below).
	Targets, DCSQs int
	// Posters goroutines each post bursts of Burst pushes of Size bytes
	// for one random target, until Count WRs are posted (0: no end).
	Posters, Burst, Size int
	Count                uint64
	MinRTO               time.Duration
	Seed                 uint64
}

// MCSQInitiator is an initiator whose client goroutines post through one
// DC MCSQ (ordered CQ) to many targets on one peer.
type MCSQInitiator struct {
	Endpoint *txn.Endpoint
	Engine   *mcsq.Engine
	Pool     *mcsq.Pool
	Queue    *mcsq.Queue
	// Sampler publishes the DC connections' RTT and window (connset.go).
	Sampler  *ConnSampler
	conns    connSet
	opts     MCSQInitiatorOptions
	targets  []mcsq.Target
	src      txn.Region
	stop     chan struct{}
	readStop chan struct{}
	posters  sync.WaitGroup
	readers  sync.WaitGroup
	posted   atomic.Uint64
	ok       atomic.Uint64
	failed   atomic.Uint64
	covered  atomic.Uint64
	cqes     atomic.Uint64
	disorder atomic.Uint64
}

// AddMCSQInitiator builds the endpoint, the engine (a stage on o.Loop), a
// DC pool of o.DCSQs and an ordered queue, and o.Targets targets: slices
// of the peer's region. Start the posters with Start after p.Start.
func (p *Pipeline) AddMCSQInitiator(o MCSQInitiatorOptions) (*MCSQInitiator, error) {
	pt, err := p.portAt("Port", o.Port)
	if err != nil {
		return nil, err
	}
	if p.opts.Clock == nil {
		return nil, &FieldError{"Clock", -1, errors.New("AddMCSQInitiator needs the pipeline's Options.Clock")}
	}
	if o.Posters == 0 {
		o.Posters = 4
	}
	if o.Burst == 0 {
		o.Burst = 8
	}
	if o.Size == 0 {
		o.Size = 512
	}
	switch {
	case o.Targets < 1 || o.Targets > 1<<20:
		return nil, &FieldError{"Targets", -1, fmt.Errorf("%d: use 1..%d", o.Targets, 1<<20)}
	case o.DCSQs < 1 || o.DCSQs > 60:
		return nil, &FieldError{"DCSQs", -1, fmt.Errorf("%d: use 1..60 (a target accepts 64 connections)", o.DCSQs)}
	case o.Size < 16 || o.Size > o.RegionLen:
		return nil, &FieldError{"Size", -1, fmt.Errorf("%d: use 16..%d (the target's region length)", o.Size, o.RegionLen)}
	}
	m := &MCSQInitiator{opts: o, stop: make(chan struct{}), readStop: make(chan struct{})}
	m.Endpoint, err = txn.New(txn.Options{OnConnEvent: m.conns.onEvent, Transport: rt.Options{Name: "initiator", Port: pt, Pool: p.pool, Clock: p.opts.Clock,
		LocalIP: o.LocalIP, LocalMAC: [6]byte(pt.Info().MAC), MaxConns: 2 * o.DCSQs, MinRTO: cmp.Or(o.MinRTO, DefaultMinRTO), RetryLimit: 20, Seed: o.Seed}})
	if err != nil {
		return nil, err
	}
	p.Own(m.Endpoint)
	if m.src, err = m.Endpoint.Register(make([]byte, o.Posters*o.Size), 0); err != nil {
		return nil, err
	}
	if m.Engine, err = mcsq.New(mcsq.Options{Endpoint: m.Endpoint, MaxTargets: o.Targets}); err != nil {
		return nil, err
	}
	if m.Pool, err = m.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: o.DCSQs, IdleTimeout: time.Millisecond}); err != nil {
		return nil, err
	}
	if m.Queue, err = m.Engine.NewQueue(mcsq.QueueOptions{DC: m.Pool, Ordered: true, Depth: 4096}); err != nil {
		return nil, err
	}
	for range o.Targets {
		t, err := m.Engine.AddTarget(o.Peer)
		if err != nil {
			return nil, err
		}
		m.targets = append(m.targets, t)
	}
	if err := p.Add(Stage{Stage: m.Engine, Loop: o.Loop}); err != nil {
		return nil, err
	}
	if m.Sampler, err = p.addSampler(m.conns.list, o.Loop); err != nil {
		return nil, err
	}
	return m, nil
}

// Start runs the posters and the CQ reader.
func (m *MCSQInitiator) Start(ctx context.Context) {
	slots := m.opts.RegionLen / m.opts.Size
	for g := range m.opts.Posters {
		m.posters.Add(1)
		go func() {
			defer m.posters.Done()
			rng := rand.New(rand.NewPCG(m.opts.Seed, uint64(g)))
			for {
				t := rng.IntN(len(m.targets))
				wr := mcsq.WR{ID: mcsq.Flow(uint64(t)), Target: m.targets[t], Op: mcsq.OpPush, Local: m.src,
					LocalAddr: uint64(g * m.opts.Size), Len: m.opts.Size,
					Remote: wire.RegionRef{Key: m.opts.RegionKey, Addr: uint64(t%slots) * uint64(m.opts.Size)}}
				for range m.opts.Burst {
					if m.opts.Count > 0 && m.posted.Add(1) > m.opts.Count {
						m.posted.Add(^uint64(0))
						return
					}
					if m.opts.Count == 0 {
						m.posted.Add(1)
					}
					if err := m.Queue.PostWait(ctx, &wr); err != nil {
						m.posted.Add(^uint64(0))
						return
					}
					select {
					case <-m.stop:
						return
					default:
					}
				}
			}
		}()
	}
	m.readers.Add(1)
	go func() {
		defer m.readers.Done()
		buf := make([]mcsq.CQE, 64)
		var last uint64
		for {
			n := m.Queue.Completions(buf)
			for _, c := range buf[:n] {
				m.cqes.Add(1)
				m.covered.Add(uint64(c.Count))
				if c.Seq-uint64(c.Count) != last {
					m.disorder.Add(1)
				}
				last = c.Seq
				if c.Status == mcsq.StatusOK {
					m.ok.Add(uint64(c.Count))
				} else {
					m.failed.Add(uint64(c.Count))
				}
			}
			if n == 0 {
				select {
				case <-m.readStop:
					return
				case <-time.After(50 * time.Microsecond): // idle back-off of a client
				}
			}
		}
	}()
}

// Done reports whether Count WRs have all completed.
func (m *MCSQInitiator) Done() bool {
	return m.opts.Count > 0 && m.covered.Load() >= m.opts.Count
}

// Drain stops the posters and waits up to timeout for every posted WR's
// CQE; it reports whether they all came.
func (m *MCSQInitiator) Drain(timeout time.Duration) bool {
	close(m.stop)
	m.posters.Wait() // PostWait returns once the CQ reader makes room
	ok := WaitFor(func() bool { return m.covered.Load() >= m.posted.Load() }, timeout)
	close(m.readStop)
	m.readers.Wait()
	return ok && m.covered.Load() == m.posted.Load()
}

// MCSQInitiatorStats are the client-side counts.
type MCSQInitiatorStats struct {
	Posted, Covered, OK, Failed, CQEs, OutOfOrder uint64
}

// Stats returns the client-side counts.
func (m *MCSQInitiator) Stats() MCSQInitiatorStats {
	return MCSQInitiatorStats{Posted: m.posted.Load(), Covered: m.covered.Load(), OK: m.ok.Load(), Failed: m.failed.Load(),
		CQEs: m.cqes.Load(), OutOfOrder: m.disorder.Load()}
}
