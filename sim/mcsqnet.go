package sim

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/sched/mcsq"
)

// MCSQNetOptions configure NewMCSQNet. The zero value is a valid small
// network.
type MCSQNetOptions struct {
	// Seed seeds every endpoint (the run is reproducible from it on the
	// virtual clock).
	Seed uint64
	// Hosts is the number of target hosts on the switch (default 8).
	Hosts int
	// Pool, if set, is used (and not closed); else the network makes and
	// closes its own of PoolFrames frames (default 16384).
	Pool       *mbuf.Pool
	PoolFrames int
	// Clock, if set, drives the network (a clock.Real for a benchmark);
	// else a clock.Virtual.
	Clock clock.Clock
	// Rate, Delay and QueueFrames configure the switch's ports.
	Rate        uint64
	Delay       time.Duration
	QueueFrames int
	// InitiatorConns and HostConns size the transports' connection tables
	// (default 1024 and 256): DC connections still closing hold slots.
	InitiatorConns, HostConns int
	// MaxOps is the initiator's txn MaxOps (default 4096).
	MaxOps int
	// MaxTargets is the engine's target table (mcsq.Options.MaxTargets).
	MaxTargets int
	// RegionSize is each host's registered region (default 64 KiB).
	RegionSize int
	// Transport adjusts every endpoint's rt options (RTOs, RetryLimit).
	Transport func(o *rt.Options)
	// Accept, if set, decides per host whether to accept a ConnOpen.
	Accept func(host int, peer rt.PeerAddr) bool
	// OnRequest, if set, sees every request a host's ULP gets.
	OnRequest func(host int, r *txn.Request)
	// OnConnEvent, if set, hears a host's connection events (post receive
	// WQEs on a new connection, say).
	OnConnEvent func(host int, ev txn.ConnEvent)
}

// MCSQNet is an initiator with an mcsq.Engine and Hosts target hosts, each
// a txn endpoint with one registered region, on one fabric.Switch: the
// many-targets network of the MCSQ's tests, benchmark and demo.
type MCSQNet struct {
	Clock   clock.Clock
	Pool    *mbuf.Pool
	Switch  *fabric.Switch
	Init    *txn.Endpoint
	Engine  *mcsq.Engine
	Hosts   []*txn.Endpoint
	Regions []txn.Region // per host: the region pushes and pulls name
	Mem     [][]byte     // per host: its memory
	Peers   []rt.PeerAddr
	// Dead hosts are no longer polled: they vanished (Kill).
	Dead     []bool
	ownPool  bool
	virt     *clock.Virtual
	initPort port.Port
}

// HostIP is host i's address (198.18.0.0/15; the initiator is 198.18.0.1).
func HostIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, byte(1 + i/250), byte(1 + i%250)})
}

// NewMCSQNet builds the network and the engine (no pools, no queues: the
// caller makes those on n.Engine).
func NewMCSQNet(o MCSQNetOptions) (n *MCSQNet, err error) {
	if o.Hosts == 0 {
		o.Hosts = 8
	}
	if o.Hosts < 1 || o.Hosts > 60000 {
		return nil, fmt.Errorf("sim: MCSQNetOptions.Hosts %d out of range (1 to 60000)", o.Hosts)
	}
	if o.InitiatorConns == 0 {
		o.InitiatorConns = 1024
	}
	if o.HostConns == 0 {
		o.HostConns = 256
	}
	if o.RegionSize == 0 {
		o.RegionSize = 64 << 10
	}
	n = &MCSQNet{Pool: o.Pool, Clock: o.Clock, Dead: make([]bool, o.Hosts)}
	if n.Pool == nil {
		frames := o.PoolFrames
		if frames == 0 {
			frames = 16384
		}
		if n.Pool, err = mbuf.New(mbuf.Options{Name: "mcsqnet", Frames: frames, CacheSize: 256}); err != nil {
			return nil, err
		}
		n.ownPool = true
	}
	if n.Clock == nil {
		n.Clock = clock.NewVirtual(1_000_000)
	}
	n.virt, _ = n.Clock.(*clock.Virtual)
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
			n = nil
		}
	}()
	ips := make([]netip.Addr, o.Hosts+1)
	ips[0] = netip.AddrFrom4([4]byte{198, 18, 0, 1})
	for i := range o.Hosts {
		ips[i+1] = HostIP(i)
	}
	if n.Switch, err = fabric.NewSwitch(n.Pool, fabric.SwitchOptions{Name: "mcsq-sw", IPs: ips, Rate: o.Rate, Delay: o.Delay, QueueFrames: o.QueueFrames}); err != nil {
		return n, err
	}
	tr := func(name string, p port.Port, ip netip.Addr, seed uint64, conns int) rt.Options {
		ro := rt.Options{Name: name, Port: p, Pool: n.Pool, Clock: n.Clock, LocalIP: ip, Seed: seed, MaxConns: conns,
			MaxRTO: 10 * time.Millisecond, CloseLinger: 2 * time.Millisecond}
		if o.Transport != nil {
			o.Transport(&ro)
		}
		return ro
	}
	n.initPort = n.Switch.Port(0)
	if n.Init, err = txn.New(txn.Options{Transport: tr("init", n.initPort, ips[0], o.Seed, o.InitiatorConns), MaxOps: o.MaxOps}); err != nil {
		return n, err
	}
	if n.Engine, err = mcsq.New(mcsq.Options{Endpoint: n.Init, MaxTargets: o.MaxTargets}); err != nil {
		return n, err
	}
	for i := range o.Hosts {
		i := i
		ro := tr(fmt.Sprintf("host%d", i), n.Switch.Port(i+1), ips[i+1], o.Seed+uint64(i)+1, o.HostConns)
		if o.Accept != nil {
			ro.Accept = func(peer rt.PeerAddr) bool { return o.Accept(i, peer) }
		}
		to := txn.Options{Transport: ro, MaxOps: 1024}
		if o.OnRequest != nil {
			to.OnRequest = func(r *txn.Request) { o.OnRequest(i, r) }
		}
		if o.OnConnEvent != nil {
			to.OnConnEvent = func(ev txn.ConnEvent) { o.OnConnEvent(i, ev) }
		}
		h, err := txn.New(to)
		if err != nil {
			return n, err
		}
		n.Hosts = append(n.Hosts, h)
		mem := make([]byte, o.RegionSize)
		r, err := h.Register(mem, txn.RemoteWrite|txn.RemoteRead)
		if err != nil {
			return n, err
		}
		n.Regions = append(n.Regions, r)
		n.Mem = append(n.Mem, mem)
		peer := rt.PeerAddr{MAC: [6]byte(n.Switch.Port(i + 1).Info().MAC), IP: ips[i+1]}
		n.Peers = append(n.Peers, peer)
	}
	return n, nil
}

// Step polls the engine, the switch and every live host once, at the
// clock's now, and returns the work done.
func (n *MCSQNet) Step() int {
	now := n.Clock.Now()
	w := n.Engine.Poll(now)
	w += n.Switch.Poll(now)
	for i, h := range n.Hosts {
		if !n.Dead[i] {
			w += h.Poll(now)
		}
	}
	return w
}

// next is the earliest deadline of anything polled.
func (n *MCSQNet) next() (clock.Time, bool) {
	t, ok := n.Engine.NextDeadline()
	if d, dok := n.Switch.NextDeadline(); dok && (!ok || d < t) {
		t, ok = d, true
	}
	for i, h := range n.Hosts {
		if n.Dead[i] {
			continue
		}
		if d, dok := h.NextDeadline(); dok && (!ok || d < t) {
			t, ok = d, true
		}
	}
	return t, ok
}

// Run steps until done reports true or the clock passes limit from now
// (virtual: it jumps to the next deadline whenever a step did nothing;
// real: it just keeps polling). It reports whether done was reached.
func (n *MCSQNet) Run(done func() bool, limit time.Duration) bool {
	end := n.Clock.Now().Add(limit)
	for !done() {
		if n.Clock.Now() > end {
			return false
		}
		if n.Step() > 0 || n.virt == nil {
			continue
		}
		if done() {
			return true
		}
		t, ok := n.next()
		now := n.virt.Now()
		if !ok || t <= now {
			t = now.Add(time.Microsecond)
		}
		_ = n.virt.Set(t)
	}
	return true
}

// Kill makes host i vanish: it is never polled again (its frames wait in
// its port until Close).
func (n *MCSQNet) Kill(i int) { n.Dead[i] = true }

// Close stops everything and returns every frame to the pool (a pool the
// network made is then closed; one passed in must be back to zero in use).
func (n *MCSQNet) Close() error {
	now := n.Clock.Now()
	var errs []error
	if n.Engine != nil {
		n.Engine.Stop(now)
	} else if n.Init != nil {
		n.Init.Stop(now)
	}
	if n.Init != nil {
		errs = append(errs, n.Init.Close())
	}
	for _, h := range n.Hosts {
		h.Stop(now)
		errs = append(errs, h.Close())
	}
	if n.Switch != nil {
		n.Switch.Stop(now)
		drain := make([]mbuf.Handle, 64)
		for i := range n.Switch.Ports() {
			p := n.Switch.Port(i)
			for k := p.RxBurst(0, drain); k > 0; k = p.RxBurst(0, drain) {
				n.Pool.Free(drain[:k])
			}
		}
		n.Switch.Stop(now)
		errs = append(errs, n.Switch.Close())
		for i := range n.Switch.Ports() {
			errs = append(errs, n.Switch.Port(i).Close())
		}
	}
	if n.Pool != nil {
		if in := n.Pool.InUse(); in != 0 {
			errs = append(errs, fmt.Errorf("sim: %d frames still in use after the network stopped", in))
		}
		if n.ownPool {
			errs = append(errs, n.Pool.Close())
		}
	}
	return errors.Join(errs...)
}
