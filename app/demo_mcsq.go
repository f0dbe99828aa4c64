package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/sched/mcsq"
)

// MCSQDemoOptions configure AddMCSQDemo; zero values pick the defaults.
type MCSQDemoOptions struct {
	Seed uint64
	// Hosts are the target hosts on the switch (default 4); one more host
	// refuses every connection, so the blacklist has something to do.
	Hosts int
	// Targets are the DC targets (flows), spread over the hosts (default
	// 256); DCSQs the DC pool's size (default 16).
	Targets, DCSQs int
	// QPs are the RC QPs, spread over the hosts (default 2 per host).
	QPs int
	// Posters are the goroutines that post WRs (default 4); each posts
	// one burst every Interval (default 5ms, 20ms over veth), so that the
	// MCSQ shares the demo's loops with the main workload rather than
	// taking them over.
	Posters  int
	Interval time.Duration
	// Veth, if set, puts the initiator on a veth port (pipeline port
	// Veth.InitiatorPort, in another namespace) and the switch's port 0
	// behind a bridge stage on the pair's other end (Veth.TargetPort):
	// every WR crosses the veth pair on real packets.
	Veth *MCSQDemoVeth
}

// MCSQDemoVeth places the MCSQ demo's initiator across a veth pair
// (VethTopology.AddMCSQPair) from its switch.
type MCSQDemoVeth struct {
	// InitiatorPort and TargetPort are the pipeline's port indexes of the
	// pair's ends.
	InitiatorPort, TargetPort int
	// InitiatorIP is the initiator's address; TargetMAC the target end's
	// MAC (the next hop to every host).
	InitiatorIP netip.Addr
	TargetMAC   [6]byte
}

// MCSQDemo is the multi-channel send queue part of the demo: an initiator
// whose client goroutines post WRs through two MCSQs — a DC one (flows to
// Targets targets over DCSQs DC SQs, ordered CQ) and an RC one (QPs QPs,
// unordered CQ) — to target hosts on an N-port switch (fabric.Switch).
type MCSQDemo struct {
	Engine        *mcsq.Engine
	DC, RC        *mcsq.Pool
	DCQ, RCQ      *mcsq.Queue
	Switch        *fabric.Switch
	Initiator     *txn.Endpoint
	Hosts         []*txn.Endpoint
	opts          MCSQDemoOptions
	targets       []mcsq.Target
	targetHost    []int
	qpHost        []int
	regions       []txn.Region
	src, dst      txn.Region
	refusing      int           // the host index that refuses
	bridge        *portBridge   // with Veth: the veth end <-> switch port 0
	stop          chan struct{} // posters stop
	readStop      chan struct{} // readers stop (after the posters and the last CQE)
	posters       sync.WaitGroup
	readers       sync.WaitGroup
	posted        atomic.Uint64
	covered       atomic.Uint64
	ok, failed    atomic.Uint64
	cqes          atomic.Uint64
	outOfOrder    atomic.Uint64
	wrongFailures atomic.Uint64 // errors for an identifier of a host that does not refuse
}

// MCSQDemoStats are the demo's client-side counts.
type MCSQDemoStats struct {
	Posted, Covered, OK, Failed, CQEs, OutOfOrder, WrongFailures uint64
}

// AddMCSQDemo adds the MCSQ demo to p on in-memory ports: a switch with
// the initiator and the hosts, the engine on loop 0, the switch and the
// hosts on the last loop. Start the posters with Start after p.Start.
func (p *Pipeline) AddMCSQDemo(o MCSQDemoOptions) (*MCSQDemo, error) {
	if p.opts.Clock == nil {
		return nil, &FieldError{"Clock", -1, errors.New("AddMCSQDemo needs the pipeline's Options.Clock")}
	}
	if o.Hosts == 0 {
		o.Hosts = 4
	}
	if o.Targets == 0 {
		o.Targets = 256
	}
	if o.DCSQs == 0 {
		o.DCSQs = 16
	}
	if o.QPs == 0 {
		o.QPs = 2 * o.Hosts
	}
	if o.Posters == 0 {
		o.Posters = 4
	}
	if o.Interval == 0 {
		o.Interval = 5 * time.Millisecond
		if o.Veth != nil {
			// Every frame crosses the kernel twice: a lighter load leaves
			// the transport demo beside it its share of the loops.
			o.Interval = 20 * time.Millisecond
		}
	}
	d := &MCSQDemo{opts: o, refusing: o.Hosts, stop: make(chan struct{}), readStop: make(chan struct{})}
	var vethI, vethT port.Port
	if v := o.Veth; v != nil {
		var err error
		if vethI, err = p.portAt("Veth.InitiatorPort", v.InitiatorPort); err != nil {
			return nil, err
		}
		if vethT, err = p.portAt("Veth.TargetPort", v.TargetPort); err != nil {
			return nil, err
		}
		if !v.InitiatorIP.Is4() {
			return nil, &FieldError{"Veth.InitiatorIP", -1, fmt.Errorf("%v: an IPv4 address in 198.18.0.0/15", v.InitiatorIP)}
		}
	}
	ips := []netip.Addr{netip.AddrFrom4([4]byte{198, 19, 0, 1})}
	if o.Veth != nil {
		ips[0] = o.Veth.InitiatorIP
	}
	for i := range o.Hosts + 1 {
		ips = append(ips, netip.AddrFrom4([4]byte{198, 19, 1, byte(1 + i)}))
	}
	sw, err := fabric.NewSwitch(p.pool, fabric.SwitchOptions{Name: "mcsq-switch", IPs: ips, Delay: 5 * time.Microsecond})
	if err != nil {
		return nil, err
	}
	d.Switch = sw
	p.Own(sw)
	for i := range ips {
		p.AddPort(sw.Port(i))
	}
	mk := func(name string, i int, conns int, accept func(rt.PeerAddr) bool) (*txn.Endpoint, error) {
		pt := sw.Port(i)
		if i == 0 && vethI != nil {
			pt = vethI // the switch's port 0 is the bridge's
		}
		ep, err := txn.New(txn.Options{Transport: rt.Options{Name: name, Port: pt, Pool: p.pool, Clock: p.opts.Clock, LocalIP: ips[i],
			LocalMAC: [6]byte(pt.Info().MAC), Seed: o.Seed + uint64(i)*7919, MaxConns: conns, RetryLimit: 20, Accept: accept,
			CloseLinger: 2 * time.Millisecond}})
		if err == nil {
			p.Own(ep)
		}
		return ep, err
	}
	if d.Initiator, err = mk("mcsq-initiator", 0, 1024, nil); err != nil {
		return nil, err
	}
	for h := range o.Hosts + 1 {
		var accept func(rt.PeerAddr) bool
		if h == d.refusing {
			accept = func(rt.PeerAddr) bool { return false }
		}
		ep, err := mk(fmt.Sprintf("mcsq-host%d", h), h+1, 512, accept)
		if err != nil {
			return nil, err
		}
		r, err := ep.Register(make([]byte, 64<<10), txn.RemoteWrite|txn.RemoteRead)
		if err != nil {
			return nil, err
		}
		d.Hosts = append(d.Hosts, ep)
		d.regions = append(d.regions, r)
	}
	if d.src, err = d.Initiator.Register(make([]byte, 64<<10), 0); err != nil {
		return nil, err
	}
	if d.dst, err = d.Initiator.Register(make([]byte, 64<<10), 0); err != nil {
		return nil, err
	}
	if d.Engine, err = mcsq.New(mcsq.Options{Endpoint: d.Initiator, Name: "mcsq"}); err != nil {
		return nil, err
	}
	if d.DC, err = d.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: o.DCSQs, Name: "dc", IdleTimeout: 2 * time.Millisecond}); err != nil {
		return nil, err
	}
	if d.RC, err = d.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC, SQs: o.QPs + 1, Name: "rc"}); err != nil {
		return nil, err
	}
	if d.DCQ, err = d.Engine.NewQueue(mcsq.QueueOptions{Name: "dc-mcsq", DC: d.DC, Ordered: true, Depth: 1024}); err != nil {
		return nil, err
	}
	if d.RCQ, err = d.Engine.NewQueue(mcsq.QueueOptions{Name: "rc-mcsq", RC: d.RC, Depth: 1024}); err != nil {
		return nil, err
	}
	peer := func(h int) rt.PeerAddr {
		if o.Veth != nil {
			// The switch forwards by IP; the frame's first hop is the
			// pair's target end.
			return rt.PeerAddr{MAC: o.Veth.TargetMAC, IP: ips[h+1]}
		}
		return rt.PeerAddr{MAC: [6]byte(sw.Port(h + 1).Info().MAC), IP: ips[h+1]}
	}
	for t := range o.Targets {
		h := t % (o.Hosts + 1) // every (Hosts+1)th target is on the refusing host
		tg, err := d.Engine.AddTarget(peer(h))
		if err != nil {
			return nil, err
		}
		d.targets = append(d.targets, tg)
		d.targetHost = append(d.targetHost, h)
	}
	for qp := range o.QPs {
		h := qp % o.Hosts // RC QPs only on hosts that accept
		if err := d.RC.AddRC(uint32(0x100+qp), peer(h)); err != nil {
			return nil, err
		}
		d.qpHost = append(d.qpHost, h)
	}
	loopA, loopB := 0, p.Lcores()-1
	stages := []Stage{{Stage: d.Engine, Loop: loopA}, {Stage: sw, Loop: loopB}}
	if vethT != nil {
		d.bridge = &portBridge{name: "mcsq-bridge", a: vethT, b: sw.Port(0), pool: p.pool, buf: make([]mbuf.Handle, 64)}
		stages = append(stages, Stage{Stage: d.bridge, Loop: loopB})
	}
	for _, h := range d.Hosts {
		stages = append(stages, Stage{Stage: h, Loop: loopB})
	}
	for _, st := range stages {
		if err := p.Add(st); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Start runs the posters (Posters goroutines, each posting bursts of one
// to eight WRs for a random DC target, and every fourth burst to a random
// RC QP) and one CQ reader per queue, until Drain.
func (d *MCSQDemo) Start(ctx context.Context) {
	for g := range d.opts.Posters {
		d.posters.Add(1)
		go func() {
			defer d.posters.Done()
			d.post(ctx, g)
		}()
	}
	for _, q := range []*mcsq.Queue{d.DCQ, d.RCQ} {
		d.readers.Add(1)
		go func() {
			defer d.readers.Done()
			d.read(q)
		}()
	}
}

func (d *MCSQDemo) post(ctx context.Context, g int) {
	rng := rand.New(rand.NewPCG(d.opts.Seed, uint64(g)))
	tick := time.NewTicker(d.opts.Interval)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-d.stop:
			return
		case <-tick.C:
		}
		var wr mcsq.WR
		var q *mcsq.Queue
		var h int
		if k%4 == 3 {
			qp := rng.IntN(len(d.qpHost))
			h = d.qpHost[qp]
			q, wr.ID = d.RCQ, mcsq.QPN(uint32(0x100+qp))
		} else {
			t := rng.IntN(len(d.targets))
			h = d.targetHost[t]
			q, wr.ID, wr.Target = d.DCQ, mcsq.Flow(uint64(t)), d.targets[t]
		}
		off := uint64(g%16) * 4096
		wr.Op, wr.Local, wr.LocalAddr, wr.Len = mcsq.OpPush, d.src, off, 512
		if rng.IntN(4) == 0 {
			wr.Op, wr.Local = mcsq.OpPull, d.dst
		}
		wr.Remote = wire.RegionRef{Key: d.regions[h].Key, Addr: off}
		wr.Cookie = uint64(h)
		for range 1 + rng.IntN(8) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err := q.PostWait(pctx, &wr)
			cancel()
			if err != nil {
				select {
				case <-d.stop:
					return
				default:
				}
				continue
			}
			d.posted.Add(1)
		}
	}
}

func (d *MCSQDemo) read(q *mcsq.Queue) {
	buf := make([]mcsq.CQE, 64)
	var last uint64
	// An idle reader naps a millisecond: a demo client that woke every few
	// microseconds took CPU from the two poll loops it shares the machine
	// with (under -race, enough to stall the transport demo beside it).
	nap := time.NewTimer(time.Millisecond)
	defer nap.Stop()
	for {
		n := q.Completions(buf)
		for _, c := range buf[:n] {
			d.cqes.Add(1)
			d.covered.Add(uint64(c.Count))
			if q.Ordered() {
				if c.Seq-uint64(c.Count) != last {
					d.outOfOrder.Add(1)
				}
				last = c.Seq
			}
			if c.Status == mcsq.StatusOK {
				d.ok.Add(uint64(c.Count))
				continue
			}
			d.failed.Add(uint64(c.Count))
			if int(c.Cookie) != d.refusing {
				d.wrongFailures.Add(1)
			}
		}
		if n == 0 {
			nap.Reset(time.Millisecond)
			select {
			case <-d.readStop:
				return
			case <-nap.C:
			}
		}
	}
}

// Drain stops the posters and waits up to timeout for every posted WR to
// be covered by a CQE; it reports whether they were. The loops must still
// run.
func (d *MCSQDemo) Drain(timeout time.Duration) bool {
	close(d.stop)
	d.posters.Wait() // a PostWait gives up within a second
	ok := WaitFor(func() bool { return d.covered.Load() >= d.posted.Load() }, timeout)
	close(d.readStop)
	d.readers.Wait()
	return ok && d.covered.Load() == d.posted.Load()
}

// Stats returns the client-side counts.
func (d *MCSQDemo) Stats() MCSQDemoStats {
	return MCSQDemoStats{Posted: d.posted.Load(), Covered: d.covered.Load(), OK: d.ok.Load(), Failed: d.failed.Load(),
		CQEs: d.cqes.Load(), OutOfOrder: d.outOfOrder.Load(), WrongFailures: d.wrongFailures.Load()}
}

// Refusing returns the index of the host that refuses connections.
func (d *MCSQDemo) Refusing() int { return d.refusing }

// Bridged returns the frames the bridge moved from the veth pair to the
// switch and back, and those it dropped (a full ring); zeros in memory.
func (d *MCSQDemo) Bridged() (in, out, dropped uint64) {
	if d.bridge == nil {
		return 0, 0, 0
	}
	return d.bridge.ab.Load(), d.bridge.ba.Load(), d.bridge.drops.Load()
}

// OverVeth reports whether the initiator is across a veth pair.
func (d *MCSQDemo) OverVeth() bool { return d.bridge != nil }

// portBridge is a stage that moves frames both ways between two ports (a
// veth end and a switch station's port), as a cable would: a frame the
// far side's ring refuses is freed and counted. It owns a frame from the
// RxBurst that takes it until the TxBurst that accepts it.
type portBridge struct {
	name   string
	a, b   port.Port
	pool   *mbuf.Pool
	buf    []mbuf.Handle
	ab, ba atomic.Uint64
	drops  atomic.Uint64
}

func (br *portBridge) Name() string { return br.name }

func (br *portBridge) Poll(clock.Time) int {
	return br.move(br.a, br.b, &br.ab) + br.move(br.b, br.a, &br.ba)
}

func (br *portBridge) move(from, to port.Port, moved *atomic.Uint64) int {
	n := from.RxBurst(0, br.buf)
	if n == 0 {
		port.FlushTx(to, 0)
		return 0
	}
	k := to.TxBurst(0, br.buf[:n])
	if k < n {
		br.pool.Free(br.buf[k:n])
		br.drops.Add(uint64(n - k))
	}
	moved.Add(uint64(k))
	return n
}

// Stop flushes what the ports hold for transmission.
func (br *portBridge) Stop(clock.Time) {
	port.FlushTx(br.a, 0)
	port.FlushTx(br.b, 0)
}
