package app

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
)

// ForwardDemoPorts returns the port specs of the forward demo over mem
// pairs, in the order AddForwardDemo expects: generator out, forwarder
// in, forwarder out, sink in.
func ForwardDemoPorts() []string {
	return []string{"mem:gen-fwd/0", "mem:gen-fwd/1", "mem:fwd-sink/0", "mem:fwd-sink/1"}
}

// ForwardDemoOptions configures AddForwardDemo: generator → io forwarder
// → sink over the pipeline's first four ports.
type ForwardDemoOptions struct {
	// Burst is the frames per burst of every stage.
	Burst int
	// Sizes and Rate (frames/s, 0: as fast as possible) shape the
	// generator's traffic.
	Sizes traffic.Sizes
	Rate  float64
}

// ForwardDemo is the forward demo's three stages.
type ForwardDemo struct {
	Gen  *traffic.Generator
	Fwd  *fwd.Forwarder
	Sink *traffic.Sink
}

// AddForwardDemo adds the forward demo to p, whose ports 0..3 are the
// generator's output, the forwarder's input and output, and the sink's
// input (ForwardDemoPorts, or veth ports in that order). Loop 0 runs the
// generator and the sink, the last loop (loop 0 again on one lcore) the
// forwarder, which waits rather than drops when its output is full, so
// every frame sent must arrive; each stage and the queue halves it drives
// share its loop's cache.
func (p *Pipeline) AddForwardDemo(o ForwardDemoOptions) (*ForwardDemo, error) {
	if _, err := p.portAt("Ports", 3); err != nil {
		return nil, err
	}
	genOut, fwdIn, fwdOut, sinkIn := p.ports[0], p.ports[1], p.ports[2], p.ports[3]
	loopA, loopB := 0, p.Lcores()-1
	gen, err := traffic.NewGenerator(traffic.GeneratorOptions{Port: genOut, Pool: p.pool, Burst: o.Burst, Sizes: o.Sizes, Rate: o.Rate, Cache: p.Cache(loopA)})
	if err != nil {
		return nil, err
	}
	forwarder, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: fwdIn, Out: fwdOut, Pool: p.pool, Burst: o.Burst, OnFull: fwd.FullRetry, Cache: p.Cache(loopB)})
	if err != nil {
		return nil, err
	}
	sink, err := traffic.NewSink(traffic.SinkOptions{Port: sinkIn, Pool: p.pool, Burst: o.Burst, Latency: true, Cache: p.Cache(loopA)})
	if err != nil {
		return nil, err
	}
	for _, st := range []Stage{
		{Stage: gen, Loop: loopA, Tx: []Queue{{Port: genOut, Queue: 0}}},
		{Stage: sink, Loop: loopA, Rx: []Queue{{Port: sinkIn, Queue: 0}}},
		{Stage: forwarder, Loop: loopB, Rx: []Queue{{Port: fwdIn, Queue: 0}}, Tx: []Queue{{Port: fwdOut, Queue: 0}}},
	} {
		if err := p.Add(st); err != nil {
			return nil, err
		}
	}
	return &ForwardDemo{Gen: gen, Fwd: forwarder, Sink: sink}, nil
}

// Drain stops the generator and waits up to timeout for every frame it
// sent to reach the sink; it reports whether they all did. The loops must
// still run.
func (d *ForwardDemo) Drain(timeout time.Duration) bool {
	d.Gen.StopSending()
	return WaitFor(func() bool { return d.Gen.Done() && d.Sink.Frames() == d.Gen.Stats().Sent }, timeout)
}

// TransportDemoOptions configures AddTransportDemo: a txnload workload
// from an initiator to a target endpoint through a fabric middlebox.
type TransportDemoOptions struct {
	// Profile is the fabric's impairment profile (both directions); Seed
	// seeds the fabric and the endpoints (the target gets Seed+1).
	Profile fabric.Profile
	Seed    uint64
	// InitiatorIP and TargetIP are the endpoints' addresses.
	InitiatorIP, TargetIP netip.Addr
	// Window is the operations outstanding per connection.
	Window int
	// CongestionTarget is Swift's base delay target (0: Swift's default)
	// and MinRTO the shortest retransmit timeout.
	CongestionTarget time.Duration
	MinRTO           time.Duration
	// Capture, when set, mirrors the initiator's port to this pcap file
	// (over mem pairs; veth ports take a capture= spec parameter).
	Capture string
	// IOI configures IOI forwarding on both endpoints (nil: on, adaptive
	// threshold; demo_ioi.go).
	IOI *ioi.Config
	// GlobalQPNs runs the endpoints on global QP numbers (rt.QPNOptions;
	// demo_qpx.go).
	GlobalQPNs bool
	// Sizes are the pushes' and pulls' sizes, used in turn (nil:
	// DemoSizes, up to 1 MiB for IOI; demo_ioi.go).
	Sizes []int
}

// TransportDemo is the transport demo's stages.
type TransportDemo struct {
	Initiator, Target *txn.Endpoint
	Load              *txnload.Load
	Sends             *txnload.SendLoad // two-sided Sends placed by delivery index (demo_dix.go)
	Fabric            *fabric.Fabric
	// Sizes are the workload's push sizes.
	Sizes []int
	qpns  demoQPNs // the QPNs the target's ULP saw requests on (demo_qpx.go)

	// Samplers publish the initiator's and the target's connections' RTT
	// and windows (connset.go).
	Samplers    [2]*ConnSampler
	targetConns connSet

	profile fabric.Profile // the fabric's, for IOILines (demo_ioi.go)
}

// AddTransportDemo adds the transport demo to p. With four ports (initiator,
// fabric side A, fabric side B, target: veth ports across namespaces) the
// fabric sits between ports 1 and 2; with none, fabric.Link joins the
// endpoints over mem pairs it makes (adopted by p). Loop 0 runs the load
// and the initiator, the last loop (loop 0 on one lcore) the fabric and
// the target. The endpoints and the fabric keep caches of their own: no
// queue half is given a loop's. p owns (and Stop closes) all of them; the
// pipeline needs Options.Clock.
func (p *Pipeline) AddTransportDemo(o TransportDemoOptions) (*TransportDemo, error) {
	if p.opts.Clock == nil {
		return nil, &FieldError{"Clock", -1, errors.New("AddTransportDemo needs the pipeline's Options.Clock (the endpoints and their loops read one clock)")}
	}
	var (
		portA, portB port.Port
		fab          *fabric.Fabric
		err          error
	)
	switch len(p.ports) {
	case 4, 6: // 6: two more for the MCSQ part (MCSQDemoVeth)
		portA, portB = p.ports[0], p.ports[3]
		fab, err = fabric.New(fabric.Options{Name: "fabric", A: p.ports[1], B: p.ports[2], Pool: p.pool, AtoB: o.Profile, BtoA: o.Profile, Seed: o.Seed, Classify: fabric.TransportClassifier(0)})
		if err != nil {
			return nil, err
		}
	case 0:
		portA, portB, fab, err = fabric.Link(p.pool, fabric.Options{Name: "fabric", AtoB: o.Profile, BtoA: o.Profile, Seed: o.Seed, Classify: fabric.TransportClassifier(0)})
		if err != nil {
			return nil, err
		}
		if portA, err = p.captureDemo(o.Capture, portA); err != nil {
			return nil, errors.Join(err, fab.Close(), portB.Close())
		}
		p.AddPort(portA)
		p.AddPort(portB)
	default:
		return nil, &FieldError{"Ports", -1, fmt.Errorf("the transport demo takes four ports (initiator, fabric A, fabric B, target), six (two more for the MCSQ part's veth pair) or none (mem pairs), not %d", len(p.ports))}
	}
	// Frames an endpoint sent after the fabric's last poll wait in the
	// fabric's input rings: closing it (and Link's mem ports with it)
	// returns them before the leak check.
	p.Own(fab)

	// Google's defaults assume NIC-resident transports with microsecond
	// turnarounds. Here both ends are poll loops on a shared two-core
	// machine that may sleep when idle: the delay target and the shortest
	// retransmit timeout allow for the loops' wake-ups, or every scheduling
	// hiccup reads as congestion or loss.
	sp := swift.DefaultParams()
	if o.CongestionTarget != 0 {
		sp.BaseTarget = o.CongestionTarget
	}
	sp.MinCwnd = demoMinCwnd // demo_ioi.go
	d := &TransportDemo{Fabric: fab, Sizes: demoSizes(&o), profile: o.Profile}
	mk := func(name string, pt port.Port, ip netip.Addr, seed uint64, onRequest func(*txn.Request), onConn func(txn.ConnEvent)) (*txn.Endpoint, error) {
		ep, err := txn.New(txn.Options{
			OnRequest: onRequest, OnConnEvent: onConn,
			Transport: rt.Options{Name: name, Port: pt, Pool: p.pool, Clock: p.opts.Clock, LocalIP: ip, LocalMAC: [6]byte(pt.Info().MAC), Seed: seed, MaxConns: 16,
				// Poll loops on a shared machine can be starved for a while
				// (a slow peer is not a dead one): more retries before a
				// packet is abandoned.
				MinRTO: o.MinRTO, RetryLimit: 20, QPN: o.demoQPN(name)},
			Congestion: &sp,
			IOI:        demoIOI(&o),
		})
		if err == nil {
			p.Own(ep)
		}
		return ep, err
	}
	if d.Initiator, err = mk("initiator", portA, o.InitiatorIP, o.Seed, nil, nil); err != nil {
		return nil, err
	}
	// The target checks pushes with the load, set before the loops start.
	if d.Target, err = mk("target", portB, o.TargetIP, o.Seed+1, func(r *txn.Request) { d.qpns.note(r); d.Load.CheckRequest(r) }, func(ev txn.ConnEvent) { d.targetConns.onEvent(ev); d.onTargetConn(ev) }); err != nil {
		return nil, err
	}
	d.Load, err = txnload.New(txnload.Options{
		Initiator: d.Initiator, Target: d.Target, Conns: 4, Window: o.Window, Sizes: d.Sizes,
		Peer: rt.PeerAddr{MAC: [6]byte(portB.Info().MAC), IP: o.TargetIP},
	}, txnload.TargetMemory(o.Window, d.Sizes))
	if err != nil {
		return nil, err
	}
	if err := p.addDemoSends(d, rt.PeerAddr{MAC: [6]byte(portB.Info().MAC), IP: o.TargetIP}, o.Window); err != nil {
		return nil, err
	}
	loopA, loopB := 0, p.Lcores()-1
	for _, st := range []Stage{{Stage: d.Load, Loop: loopA}, {Stage: d.Initiator, Loop: loopA}, {Stage: fab, Loop: loopB}, {Stage: d.Target, Loop: loopB}} {
		if err := p.Add(st); err != nil {
			return nil, err
		}
	}
	if d.Samplers, err = p.addDemoSamplers(d, loopA, loopB); err != nil {
		return nil, err
	}
	return d, nil
}

// Drain stops the workload posting and waits for every outstanding
// operation to complete; it reports whether they did. Only a stall fails
// it: it gives up when stall passes with no operation completing (demo_ioi.go).
// The loops must still run.
func (d *TransportDemo) Drain(stall time.Duration) bool {
	d.Load.Stop()
	d.Sends.Stop()
	return d.waitDrained(stall)
}

// DemoMinCwnd is the least congestion window of the demo's connections, in
// packets (demo_ioi.go says why), for harnesses that run its traffic.
const DemoMinCwnd = demoMinCwnd

// FabricDrops is every frame a fabric dropped, both ways, whatever the
// reason (random and burst loss, full queues and paths, path loss, TTL,
// a link down or cut, corruption, which the receiver drops): what the
// transports had to recover. The demo's retransmissions per fabric loss
// divide by it.
func FabricDrops(fs fabric.Stats) uint64 {
	n := uint64(0)
	for _, d := range []fabric.DirStats{fs.AtoB, fs.BtoA} {
		n += d.LossRandom + d.LossBurst + d.QueueFull + d.LimitFull + d.TTLExpired + d.Corrupted +
			d.LinkDown + d.LinkCut + d.PathQueueFull + d.PathLossDrops
	}
	return n
}
