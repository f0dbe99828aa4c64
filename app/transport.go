package app

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// TransportOptions configures AddTransport: one transaction endpoint on
// a port, either a target serving a registered region or an initiator
// driving a txnload workload at a target. `peregrine transport` and
// (later) a config file's transport stage build through it.
type TransportOptions struct {
	// Role is "initiator" or "target"; it also names the endpoint.
	Role string
	// Port is the index of the port the endpoint sends and receives on.
	Port int
	// Loop is the index of the loop that polls the endpoint (and load).
	Loop int
	// LocalIP is the endpoint's IPv4 address.
	LocalIP netip.Addr
	// Window (operations per connection) and Sizes (message sizes) shape
	// the workload; a target sizes its region for the same values.
	Window int
	Sizes  []int
	// RegionLen is the target region's length (0: what Window and Sizes
	// need, txnload.TargetMemoryLen).
	RegionLen int
	// Initiator only: RegionKey is the target's region key (from its
	// READY line), Peer the target's addresses, Conns the connections
	// opened, PullEvery every how many operations one is a pull (0: none),
	// Count operations in all (0: no end).
	RegionKey uint32
	Peer      rt.PeerAddr
	Conns     int
	PullEvery int
	Count     uint64
	// OpTimeout is the initiator's per-operation timeout
	// (txn.ConnOptions.OpTimeout, 0: none): an operation not completed
	// this long after posting ends with txn.StatusTimeout.
	OpTimeout time.Duration
	// CongestionTarget is Swift's base delay target (0:
	// DefaultCongestionTarget); MinRTO (0: DefaultMinRTO), Seed and
	// RTWindow (PSN window, 0: default) configure the reliable transport.
	CongestionTarget time.Duration
	MinRTO           time.Duration
	Seed             uint64
	RTWindow         int
	// MinCwnd is Swift's least congestion window in packets (0:
	// DefaultMinCwnd). A software transport's round trip holds both hosts'
	// scheduling delays, which Swift cannot tell from fabric queueing: the
	// delay cuts take every window to the floor, and below one packet the
	// connection is paced at SRTT/cwnd — at Swift's own 0.01, a packet per
	// hundred round trips. Set 0.01 for Swift's floor.
	MinCwnd float64
	// IOI configures IOI forwarding (zero: off).
	IOI ioi.Config
	// Sends (initiator) keeps that many two-sided Sends outstanding on one
	// more, unordered connection with a 16-bit delivery index; PostRecv
	// (target) keeps that many receive WQEs posted on every connection and
	// checks each Send byte for byte. Both sides must use the same Sizes.
	// 0: none (transport_dix.go).
	Sends    int
	PostRecv int
	// GlobalQPNs runs the endpoint on global QP numbers (docs/qp-translation.md,
	// rt.QPNOptions): every reliable packet carries the QPN extension and
	// is checked through the endpoint's core/qpx CAM. It changes the wire:
	// both ends must set it.
	GlobalQPNs bool

	// Set by AddShardedTransport for each shard: the port view, queue and
	// CID shard bits the endpoint drives, and its name.
	dev       port.Port
	queue     int
	shardBits uint
	shard     int
	parts     int // the initiator shards that share a target region
	name      string
}

// InitiatorMinOps is the fewest transactions an initiator's endpoint is
// sized for (txn.Options.MaxOps): twice its window and Sends, at least
// this.
const InitiatorMinOps = 64

// Transport is what AddTransport built.
type Transport struct {
	// Endpoint is the transaction endpoint; the pipeline owns it.
	Endpoint *txn.Endpoint
	// Load is the initiator's workload (nil for a target).
	Load *txnload.Load
	// Region is the target's registered region (zero for an initiator).
	Region txn.Region
	// Sampler publishes the endpoint's connections' RTT and window: the
	// initiator's workload's, or the target's as they connect (connset.go).
	Sampler *ConnSampler
	conns   connSet
	// Sends (initiator) and Recv (target): the two-sided workload, when
	// TransportOptions.Sends or PostRecv asked for it.
	Sends *txnload.SendLoad
	Recv  *txnload.RecvPoster

	pushes, badPushes atomic.Uint64
	connErr           atomic.Pointer[error] // the first connection failure
}

// ConnErr returns why the first of the endpoint's connections that failed
// did (rt.ErrRetryExhausted when the peer went silent, rt.ErrPeerReset
// when it restarted…), or nil (safe while the loop runs).
func (t *Transport) ConnErr() error {
	if p := t.connErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Pushes reports how many pushes the target received and how many of
// them carried wrong bytes (safe while the loop runs).
func (t *Transport) Pushes() (received, wrong uint64) {
	return t.pushes.Load(), t.badPushes.Load()
}

// AddTransport builds a transaction endpoint on port o.Port and, for an
// initiator, its txnload workload, and adds them (load first) to loop
// o.Loop. A target registers its region (readable and writable by peers)
// before returning, so its key is known before Start. The endpoint keeps
// caches of its own: no queue half is given the loop's. The pipeline
// needs Options.Clock: the endpoint and its loop read the same clock.
// Errors are *FieldError naming a TransportOptions field where one is to
// blame.
func (p *Pipeline) AddTransport(o TransportOptions) (*Transport, error) {
	if o.Role != "initiator" && o.Role != "target" {
		return nil, &FieldError{"Role", -1, fmt.Errorf("%q: use initiator or target", o.Role)}
	}
	pt, err := p.portAt("Port", o.Port)
	if err != nil {
		return nil, err
	}
	if o.Window < 1 || o.Window > 4096 {
		return nil, &FieldError{"Window", -1, fmt.Errorf("%d: use 1..4096", o.Window)}
	}
	if o.OpTimeout < 0 {
		return nil, &FieldError{"OpTimeout", -1, fmt.Errorf("%v is negative: use a positive timeout, or 0 for none", o.OpTimeout)}
	}
	if len(o.Sizes) == 0 {
		return nil, &FieldError{"Sizes", -1, errors.New("none given (give at least one message size)")}
	}
	if p.opts.Clock == nil {
		return nil, &FieldError{"Clock", -1, errors.New("AddTransport needs the pipeline's Options.Clock (the endpoint and its loop read one clock)")}
	}
	// A target serves up to 64 initiators' connections; an initiator opens
	// Conns. The retransmission CAM holds MaxConns × 2 windows × the PSN
	// window entries, and a table sized for 64 connections (64 Ki entries,
	// 4 MiB) spreads an initiator's few hundred outstanding packets over
	// more memory than the caches hold: every send and ACK missed.
	// The same holds for the reorder engine's CAM, sized by MaxOps (two
	// entries an operation at a quarter load: 512 KiB at txn's default of
	// 4096): an initiator has no more than its window and its Sends in
	// progress, so its table is sized to them (the top entry of a profile
	// of 64 B pushes); a target serves any number of initiators' windows
	// and keeps the default.
	maxConns, maxOps := 64, 0
	if o.Role == "initiator" {
		maxConns = max(2*o.Conns, 4)
		maxOps = max(2*(o.Window+o.Sends), InitiatorMinOps)
	}
	sp := transportSwift(o)
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	if o.dev != nil {
		pt = o.dev
	}
	name := o.Role
	if o.name != "" {
		name = o.name
	}
	t := &Transport{}
	ep, err := txn.New(txn.Options{
		OnConnEvent: t.onConnEvent,
		OnRequest: func(r *txn.Request) {
			if r.Kind == txn.OpPush {
				t.pushes.Add(1)
				if !txnload.PushIntact(r.Data) {
					t.badPushes.Add(1)
				}
			}
		},
		Transport: rt.Options{Name: name, Port: pt, Queue: o.queue, ShardBits: o.shardBits, Shard: o.shard, Pool: p.pool, Clock: p.opts.Clock, LocalIP: o.LocalIP,
			LocalMAC: [6]byte(pt.Info().MAC), MaxConns: maxConns, MinRTO: cmp.Or(o.MinRTO, DefaultMinRTO), RetryLimit: 20, Seed: o.Seed, WindowSize: o.RTWindow,
			QPN: rt.QPNOptions{Enabled: o.GlobalQPNs}},
		Congestion: &sp,
		IOI:        o.IOI,
		MaxOps:     maxOps,
	})
	if err != nil {
		return nil, err
	}
	p.Own(ep)
	t.Endpoint = ep
	regionLen := o.RegionLen
	if regionLen == 0 {
		regionLen = txnload.TargetMemoryLenFor(o.Window, o.Sizes, o.parts)
	}
	pullEvery := -1 // txnload: negative means no pulls
	if o.PullEvery > 0 {
		pullEvery = o.PullEvery
	}
	if o.Role == "target" {
		mem := txnload.TargetMemoryFor(o.Window, o.Sizes, max(o.parts, 1))
		if regionLen > len(mem) {
			mem = append(mem, make([]byte, regionLen-len(mem))...)
		}
		if t.Region, err = ep.Register(mem, txn.RemoteWrite|txn.RemoteRead); err != nil {
			return nil, err
		}
	} else {
		t.Load, err = txnload.New(txnload.Options{
			Initiator: ep, TargetRegion: txn.Region{Key: o.RegionKey, Len: regionLen}, Peer: o.Peer,
			Conns: o.Conns, Window: o.Window, Sizes: o.Sizes, PullEvery: pullEvery, Count: o.Count,
			OpTimeout: o.OpTimeout, Parts: o.parts, Part: o.shard,
		}, nil)
		if err != nil {
			return nil, err
		}
		if err := p.Add(Stage{Stage: t.Load, Loop: o.Loop}); err != nil {
			return nil, err
		}
	}
	if err := p.addTransportSends(t, o); err != nil {
		return nil, err
	}
	if err := p.Add(Stage{Stage: ep, Loop: o.Loop}); err != nil {
		return nil, err
	}
	conns := t.conns.list
	if t.Load != nil {
		conns = t.Load.Conns
	}
	if t.Sampler, err = p.addSampler(conns, o.Loop); err != nil {
		return nil, err
	}
	return t, nil
}

// Drain ends an initiator's workload: it stops posting, waits up to 5s
// for every outstanding operation to complete (reported), then up to 1s
// for its connections to close, so the target frees its side now rather
// than when its retransmissions to a vanished peer run out. The loops
// must still run. A target has nothing to drain (true).
func (t *Transport) Drain() bool {
	if t.Load == nil {
		return true
	}
	t.Load.Stop()
	if t.Sends != nil {
		t.Sends.Stop()
	}
	drained := WaitFor(func() bool { return t.Load.Idle() && (t.Sends == nil || t.Sends.Idle()) }, 5*time.Second)
	WaitFor(t.Load.Closed, time.Second)
	return drained
}

// DefaultMinCwnd is a transport stage's least congestion window in packets
// when its options leave it 0: the software endpoints' (swift.SoftwareMinCwnd
// says why).
const DefaultMinCwnd = swift.SoftwareMinCwnd

// DefaultCongestionTarget and DefaultMinRTO are a transport stage's Swift
// base target and least retransmit timeout when its options leave them 0
// — the defaults of `transport`, `demo` and the configs' target_delay and
// min_rto: the software endpoints' (swift.SoftwareBaseTarget and
// rt.SoftwareMinRTO say why).
const (
	DefaultCongestionTarget = swift.SoftwareBaseTarget
	DefaultMinRTO           = rt.SoftwareMinRTO
)

// transportSwift is the congestion control of a transport stage with
// options o.
func transportSwift(o TransportOptions) swift.Params {
	sp := swift.DefaultParams()
	sp.BaseTarget = cmp.Or(o.CongestionTarget, DefaultCongestionTarget)
	floor := o.MinCwnd
	if floor == 0 {
		floor = DefaultMinCwnd
	}
	sp.MinCwnd = floor
	sp.InitialCwnd = max(sp.InitialCwnd, floor)
	return sp
}
