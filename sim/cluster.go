package sim

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/fabric"
)

// Peer is one incarnation of a node's transport: an rt.Endpoint, a
// txn.Endpoint, or anything else polled on the cluster's clock that owns
// the node's port while it lives.
type Peer interface {
	lcore.Stage
	NextDeadline() (clock.Time, bool)
	Stop(now clock.Time)
	Close() error
}

// NodeConfig describes one station of a Cluster.
type NodeConfig struct {
	// Name names the node (default "nI").
	Name string
	// Up is the profile of the link from the node to the switch, Down the
	// one from the switch to the node.
	Up, Down fabric.Profile
	// Transport is the base of every incarnation's options; Name, Port,
	// Pool, Clock, LocalIP and Seed are filled in.
	Transport rt.Options
	// Make builds an incarnation from o (Transport, filled in); nil makes
	// a bare rt.Endpoint. It runs at New and at every Restart, so a test
	// that keeps a handle on the incarnation records it here.
	Make func(n *Node, o rt.Options) (Peer, error)
	// Shards makes the node a sharded host (shards.go) of that many
	// incarnations, one per shard, Make called for each with its
	// ShardBits, Shard, Queue and port filled in; 0 or 1: one.
	Shards int
}

// ClusterConfig describes a Cluster: N nodes, each joined to an emulated
// switch by a link with a fabric Profile per direction, on a virtual
// clock, with a scripted fault timeline.
type ClusterConfig struct {
	// Seed seeds everything: node I's first incarnation gets NodeSeed(Seed,
	// I), its link the fabric seed derived from both.
	Seed uint64
	// Pool is the pool every frame lives in; nil makes one of Frames
	// frames (default DefaultFrames) that Close checks for leaks.
	Pool   *mbuf.Pool
	Frames int
	Nodes  []NodeConfig
	// Faults is the timeline (see Fault).
	Faults []Fault
	// Start is the virtual clock's initial reading; Fault.At counts from it.
	Start clock.Time
	// Check: 0 none, 1 the transports' window invariants after every Poll,
	// 2 also the deep CAM cross-check every 64th Poll.
	Check int
	// MaxSteps bounds Run (default 50 million).
	MaxSteps int
	// Trace, when set, receives a line for every frame each node sends or
	// receives.
	Trace io.Writer
}

// NodeSeed is the seed of node i's first incarnation in a cluster of seed.
func NodeSeed(seed uint64, i int) uint64 {
	return seed*0x9e3779b97f4a7c15 + uint64(i)*0x2545f4914f6cdd1d + 1
}

// Node is one station: its port, its link to the switch, and its current
// incarnation.
type Node struct {
	Index int
	Name  string
	IP    netip.Addr
	// Port is the node's port (its transport's); Link the fabric between it
	// and the switch, whose AtoB direction is node→switch.
	Port port.Port
	Link *fabric.Fabric
	// Peer is the live incarnation; nil once killed with its state
	// discarded, until Restart.
	Peer Peer
	// Incarnation counts Restarts (0 for the first); Seed is the current
	// incarnation's.
	Incarnation int
	Seed        uint64
	// Dead: the node was killed: not polled, its timers frozen, and every
	// frame that reaches it dropped (DeadDrops).
	Dead      bool
	DeadDrops uint64

	cfg  NodeConfig
	wrap *watchPort
	host *host     // nil unless NodeConfig.Shards > 1
	sw   port.Port // the switch's side of the link
}

// Addr is the address peers open connections to.
func (n *Node) Addr() rt.PeerAddr { return rt.PeerAddr{MAC: [6]byte(n.Port.Info().MAC), IP: n.IP} }

// Transport returns the current incarnation's rt.Endpoint (the Peer
// itself, or what its Transport method returns; shard 0's on a sharded
// node), or nil.
func (n *Node) Transport() *rt.Endpoint { return transportOf(n.Peer) }

// Transports returns every shard's rt.Endpoint (one on a node that is not
// sharded), or nil.
func (n *Node) Transports() []*rt.Endpoint {
	if sp, ok := n.Peer.(*ShardedPeer); ok {
		eps := make([]*rt.Endpoint, 0, len(sp.Shards))
		for _, p := range sp.Shards {
			if e := transportOf(p); e != nil {
				eps = append(eps, e)
			}
		}
		return eps
	}
	if e := n.Transport(); e != nil {
		return []*rt.Endpoint{e}
	}
	return nil
}

// Touched returns, per shard of a sharded node, the frames its incarnation
// received whose CID names another shard (nil when not sharded), and the
// frames the node's software hand-off moved between shards.
func (n *Node) Touched() (perShard []uint64, handedOver uint64) {
	if n.host == nil {
		return nil, 0
	}
	return n.host.Touched(), n.host.set.Total().SteeredOut
}

// ShardedPeer is the incarnation of a sharded node: one Peer per shard and
// the node's NIC, polled in turn.
type ShardedPeer struct {
	Shards []Peer
	host   *host
}

func (p *ShardedPeer) Name() string { return p.host.Name() }

func (p *ShardedPeer) Poll(now clock.Time) int {
	work := p.host.Poll(now)
	for _, s := range p.Shards {
		work += s.Poll(now)
	}
	return work + p.host.Poll(now)
}

func (p *ShardedPeer) NextDeadline() (clock.Time, bool) {
	var e earliest
	for _, s := range p.Shards {
		e.consider(s.NextDeadline())
	}
	return e.t, e.ok
}

func (p *ShardedPeer) Stop(now clock.Time) {
	for _, s := range p.Shards {
		s.Stop(now)
	}
}

func (p *ShardedPeer) Close() error {
	var err error
	for _, s := range p.Shards {
		err = errors.Join(err, s.Close())
	}
	return err
}

// Transport is shard 0's.
func (p *ShardedPeer) Transport() *rt.Endpoint { return transportOf(p.Shards[0]) }

type transporter interface{ Transport() *rt.Endpoint }

func transportOf(p Peer) *rt.Endpoint {
	switch x := p.(type) {
	case *rt.Endpoint:
		return x
	case transporter:
		return x.Transport()
	}
	return nil
}

// Cluster runs N nodes joined through an emulated switch on a virtual
// clock, with a fault timeline, in the same loop as Sim: poll every stage
// at one instant until none moves, then jump to the earliest deadline. A
// run is fully determined by its ClusterConfig.
type Cluster struct {
	Clock  *clock.Virtual
	Pool   *mbuf.Pool
	Nodes  []*Node
	Switch *fabric.Switch
	// OnTransmit, when set, sees every frame a node's port accepted from
	// its incarnation (raw is valid during the call): what the transport
	// put on the wire, before any impairment.
	OnTransmit func(node int, raw []byte)
	// OnForward, when set, sees every frame the switch forwards, from
	// node from to node to, after from's uplink (raw valid during the
	// call).
	OnForward func(from, to int, raw []byte)

	cfg        ClusterConfig
	ownPool    bool
	timeline   *timeline
	recordings []*Recording
	loop       loop
	closed     bool
	drain      []mbuf.Handle
}

// NewCluster builds a cluster: a link and a switch port per node, and each
// node's first incarnation.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	c := &Cluster{cfg: cfg, Clock: clock.NewVirtual(cfg.Start), drain: make([]mbuf.Handle, 64)}
	c.loop = newLoop(c.Clock, c, cfg.Check, cfg.MaxSteps)
	if len(cfg.Nodes) < 2 {
		return nil, fmt.Errorf("sim: a cluster needs at least two nodes, got %d", len(cfg.Nodes))
	}
	if len(cfg.Nodes) > 250 {
		return nil, fmt.Errorf("sim: a cluster has at most 250 nodes (10.0.0.1-250), got %d", len(cfg.Nodes))
	}
	var err error
	if c.Pool, c.ownPool, err = ownPool("cluster", cfg.Pool, cfg.Frames); err != nil {
		return nil, err
	}
	var swPorts []port.Port
	var macs [][6]byte
	var ips []netip.Addr
	for i, nc := range cfg.Nodes {
		if nc.Name == "" {
			nc.Name = fmt.Sprintf("n%d", i)
		}
		n := &Node{Index: i, Name: nc.Name, IP: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), Seed: NodeSeed(cfg.Seed, i), cfg: nc}
		a, b, f, err := fabric.Link(c.Pool, fabric.Options{Name: "link-" + nc.Name, AtoB: nc.Up, BtoA: nc.Down,
			Seed: cfg.Seed ^ uint64(i+1)*0xfab1e5, LinkRing: 4096})
		if err != nil {
			return nil, c.fail(fmt.Errorf("sim: node %s's link: %w", nc.Name, err))
		}
		n.Port, n.Link, n.sw = a, f, b
		n.wrap = &watchPort{Port: a, c: c, node: i}
		if nc.Shards > 1 {
			if n.host, err = newHost("host-"+nc.Name, n.wrap, c.Pool, nc.Shards, 0, n.Seed); err != nil {
				return nil, c.fail(err)
			}
		}
		c.Nodes = append(c.Nodes, n)
		swPorts = append(swPorts, b)
		macs = append(macs, [6]byte(a.Info().MAC))
		ips = append(ips, n.IP)
	}
	// The fabric's N-port switch, on the nodes' links: no rate and no
	// delay of its own (the links carry the impairments), so a frame
	// leaves in the Poll that took it; by MAC, then by IP.
	sw, err := fabric.NewSwitch(c.Pool, fabric.SwitchOptions{Name: "switch", IPs: ips, MACs: macs, Ports: swPorts})
	if err != nil {
		return nil, c.fail(err)
	}
	c.Switch = sw
	c.Switch.Observe = c.observe
	tl, err := newTimeline(c, cfg.Faults)
	if err != nil {
		return nil, c.fail(err)
	}
	c.timeline = tl
	for _, n := range c.Nodes {
		if err := c.incarnate(n, n.Seed); err != nil {
			return nil, c.fail(err)
		}
	}
	return c, nil
}

func (c *Cluster) fail(err error) error { return errors.Join(err, c.Close()) }

// incarnate makes a new incarnation of n with seed.
func (c *Cluster) incarnate(n *Node, seed uint64) error {
	o := n.cfg.Transport
	o.Port, o.Pool, o.Clock, o.LocalIP, o.Seed = n.wrap, c.Pool, c.Clock, n.IP, seed
	o.Name = n.Name
	if n.Incarnation > 0 {
		o.Name = fmt.Sprintf("%s#%d", n.Name, n.Incarnation)
	}
	mk := n.cfg.Make
	if mk == nil {
		mk = func(_ *Node, o rt.Options) (Peer, error) { return rt.NewEndpoint(o) }
	}
	var p Peer
	var err error
	if n.host == nil {
		p, err = mk(n, o)
	} else {
		sp := &ShardedPeer{host: n.host}
		for i := range n.host.n {
			oi := shardOptions(o, o.Name+"/", i, n.host.n, seed)
			oi.Port = n.host.ports[i]
			var pi Peer
			if pi, err = mk(n, oi); err != nil {
				err = errors.Join(err, sp.Close())
				break
			}
			sp.Shards = append(sp.Shards, pi)
		}
		p = sp
	}
	if err != nil {
		return fmt.Errorf("sim: node %s incarnation %d: %w", n.Name, n.Incarnation, err)
	}
	n.Peer, n.Seed, n.Dead = p, seed, false
	return nil
}

// Kill stops node i answering: it is no longer polled (its timers are
// frozen) and every frame that reaches it is dropped. With discard its
// incarnation is stopped and closed (its state and frames gone); without,
// it is kept for Revive.
func (c *Cluster) Kill(i int, discard bool) error {
	n := c.Nodes[i]
	n.Dead = true
	if discard && n.Peer != nil {
		n.Peer.Stop(c.Clock.Now())
		err := n.Peer.Close()
		n.Peer = nil
		return err
	}
	return nil
}

// Revive resumes a node killed with its state kept: it is polled again at
// the current time (its timers fire late, as after a long pause).
func (c *Cluster) Revive(i int) error {
	n := c.Nodes[i]
	if n.Peer == nil {
		return fmt.Errorf("sim: Revive node %s: it was killed with its state discarded (use Restart)", n.Name)
	}
	n.Dead = false
	return nil
}

// Restart replaces node i's incarnation by a fresh one with seed (the
// same as before, or a new one) on the same port and address: the old
// one, if any, is stopped and closed first, so its state is gone.
func (c *Cluster) Restart(i int, seed uint64) error {
	n := c.Nodes[i]
	if n.Peer != nil {
		n.Peer.Stop(c.Clock.Now())
		if err := n.Peer.Close(); err != nil {
			return err
		}
		n.Peer = nil
	}
	n.Incarnation++
	return c.incarnate(n, seed)
}

// AddStage adds a stage polled before the nodes at every instant; if it
// has a NextDeadline method the clock also stops there.
func (c *Cluster) AddStage(st lcore.Stage) { c.loop.add(st) }

// Polls returns how many instants were polled.
func (c *Cluster) Polls() uint64 { return c.loop.polls }

// Poll polls every stage once at the current time: the timeline, the added
// stages, the live nodes, the links and the switch; frames that reached a
// dead node are dropped. It checks the transports' invariants
// (ClusterConfig.Check) and returns the work done.
func (c *Cluster) Poll() (int, error) { return c.loop.poll() }

// Step polls at the current instant; when nothing moved it advances the
// clock to the next deadline. It returns false when nothing is left to do.
func (c *Cluster) Step() (bool, error) { return c.loop.step() }

// Run steps until cond holds, for at most limit of virtual time.
func (c *Cluster) Run(cond func() bool, limit time.Duration) error { return c.loop.run(cond, limit) }

// Idle runs for d of virtual time (or until nothing is left to do).
func (c *Cluster) Idle(d time.Duration) error { return c.loop.idle(d) }

func (c *Cluster) pollStages(now clock.Time) (int, error) {
	work, err := c.timeline.poll(now)
	if err != nil {
		return work, err
	}
	work += c.loop.pollAdded(now)
	for _, n := range c.Nodes {
		switch {
		case !n.Dead && n.Peer != nil:
			work += n.Peer.Poll(now)
		case n.Dead:
			for {
				k := n.Port.RxBurst(0, c.drain)
				if k == 0 {
					break
				}
				n.DeadDrops += uint64(k)
				c.Pool.Free(c.drain[:k])
				work += k
			}
		}
	}
	for _, n := range c.Nodes {
		work += n.Link.Poll(now)
	}
	work += c.Switch.Poll(now)
	return work, nil
}

func (c *Cluster) deadlines(e *earliest) {
	e.consider(c.timeline.nextDeadline())
	for _, n := range c.Nodes {
		if !n.Dead && n.Peer != nil {
			e.consider(n.Peer.NextDeadline())
		}
		e.consider(n.Link.NextDeadline())
	}
}

// check checks the live nodes' transports.
func (c *Cluster) check(deep bool) error {
	for _, n := range c.Nodes {
		if n.Dead {
			continue
		}
		for _, e := range n.Transports() {
			if err := checkTransport(e, deep); err != nil {
				return fmt.Errorf("node %s at %v (poll %d): %w", e.Name(), c.Clock.Now(), c.loop.polls, err)
			}
		}
	}
	return nil
}

// Stop stops every incarnation (dead ones kept too) and empties the links,
// the switch and the ports: every frame goes back to the pool.
func (c *Cluster) Stop() {
	now := c.Clock.Now()
	for _, n := range c.Nodes {
		if n.Peer != nil {
			n.Peer.Stop(now)
		}
	}
	// Frames already handed to a port sit in its ring until a link takes
	// them: let the links take everything, then flush.
	for {
		work := 0
		for _, n := range c.Nodes {
			if n.Link != nil {
				work += n.Link.Poll(now)
			}
		}
		if c.Switch != nil {
			c.Switch.Stop(now)
		}
		for _, n := range c.Nodes {
			for {
				k := n.Port.RxBurst(0, c.drain)
				if k == 0 {
					break
				}
				c.Pool.Free(c.drain[:k])
				work += k
			}
		}
		if work == 0 {
			break
		}
	}
	for _, n := range c.Nodes {
		if n.Link != nil {
			n.Link.Stop(now)
		}
		if n.host != nil {
			n.host.stop()
		}
	}
}

// Close stops everything, closes the incarnations, links and ports, and,
// when the cluster made its pool, checks it for leaks and closes it. It is
// idempotent.
func (c *Cluster) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.Stop()
	var err error
	for _, n := range c.Nodes {
		if n.Peer != nil {
			err = errors.Join(err, n.Peer.Close())
		}
		if n.host != nil {
			err = errors.Join(err, n.host.close())
		}
		err = errors.Join(err, n.Link.Close(), n.Port.Close(), n.sw.Close())
	}
	return errors.Join(err, closeOwnedPool(c.Pool, c.ownPool))
}

// watchPort is a node's port as its incarnations see it: it tells the
// cluster of every frame the port accepted, and traces.
type watchPort struct {
	port.Port
	c    *Cluster
	node int
}

func (p *watchPort) TxBurst(q int, hs []mbuf.Handle) int {
	n := p.Port.TxBurst(q, hs)
	if p.c.OnTransmit != nil || p.c.cfg.Trace != nil {
		for _, h := range hs[:n] {
			raw := p.c.Pool.Data(h)
			if p.c.OnTransmit != nil {
				p.c.OnTransmit(p.node, raw)
			}
			if p.c.cfg.Trace != nil {
				traceFrame(p.c.cfg.Trace, p.c.Clock.Now(), p.c.Nodes[p.node].Name, "tx", raw)
			}
		}
	}
	return n
}

func (p *watchPort) RxBurst(q int, hs []mbuf.Handle) int {
	n := p.Port.RxBurst(q, hs)
	if p.c.cfg.Trace != nil {
		for _, h := range hs[:n] {
			traceFrame(p.c.cfg.Trace, p.c.Clock.Now(), p.c.Nodes[p.node].Name, "rx", p.c.Pool.Data(h))
		}
	}
	return n
}
