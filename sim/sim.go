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
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// IPA and IPB return the addresses of the two simulated endpoints.
func IPA() netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, 1}) }
func IPB() netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, 2}) }

// DefaultFrames is the size of the pool New makes when Config.Pool is nil.
const DefaultFrames = 16384

// Config describes a simulation: two endpoints, a and b, joined by a
// network: the fabric emulator with a Profile per direction, or a scripted
// Tap.
type Config struct {
	// Seed seeds everything: the endpoints (Seed, Seed+1), the fabric
	// and, through Workload, the traffic.
	Seed uint64
	// Pool is the pool every frame lives in; nil makes one of Frames frames
	// (default DefaultFrames) that Close checks for leaks and closes.
	Pool   *mbuf.Pool
	Frames int
	// Scripted joins the endpoints with a Tap instead of the fabric.
	Scripted bool
	// TapDelay is the Tap's one-way delay.
	TapDelay time.Duration
	// AtoB and BtoA are the fabric's impairments.
	AtoB, BtoA fabric.Profile
	// A and B tune the endpoints' options; Port, Pool, Clock, LocalIP and
	// Seed are filled in by New.
	A, B rt.Options
	// Start is the virtual clock's initial reading.
	Start clock.Time
	// Check: 0 none, 1 cheap invariants after every Poll, 2 also the deep
	// CAM cross-check every 64th Poll and at the end.
	Check int
	// MaxSteps bounds Run (default 50 million).
	MaxSteps int
	// Trace, when set, receives a line for every frame each endpoint sends
	// or receives (replaying a failed seed).
	Trace io.Writer
	// Shards makes each side a sharded host of that many endpoints
	// (shards.go; 0 or 1: one endpoint), a power of two up to 256. A's
	// connections are opened round robin over its shards, B's likewise.
	Shards int
	// Missteer is the share of arriving frames a sharded host's NIC puts
	// on a wrong shard's queue, for core/shard's software hand-off to carry
	// (ConnOpens too: a retransmission may arrive on another queue than
	// the first copy, and must still open one connection).
	Missteer fabric.Percent
}

// middle is the network between the endpoints.
type middle interface {
	lcore.Stage
	NextDeadline() (clock.Time, bool)
	Stop(now clock.Time)
	Close() error
}

// Sim runs two endpoints and the network between them on a virtual clock,
// in the loop it shares with Cluster: poll every stage at one instant until
// nothing moves, then jump the clock to the earliest deadline of any of
// them. It never spins through idle virtual time, and a run is fully
// determined by its Config.
type Sim struct {
	Clock *clock.Virtual
	Pool  *mbuf.Pool
	// A and B are shard 0 of each side; As and Bs every shard (one
	// endpoint each when the sides are not sharded).
	A, B   *rt.Endpoint
	As, Bs []*rt.Endpoint
	PortA  port.Port
	PortB  port.Port
	Fabric *fabric.Fabric // nil when Scripted
	Tap    *Tap           // nil unless Scripted

	cfg     Config
	ownPool bool
	net     middle
	hosts   [2]*host // nil unless Config.Shards > 1
	loop    loop
	closed  bool
}

// New builds a simulation.
func New(cfg Config) (*Sim, error) {
	s := &Sim{cfg: cfg, Clock: clock.NewVirtual(cfg.Start)}
	s.loop = newLoop(s.Clock, s, cfg.Check, cfg.MaxSteps)
	var err error
	if s.Pool, s.ownPool, err = ownPool("sim", cfg.Pool, cfg.Frames); err != nil {
		return nil, err
	}
	if cfg.Scripted {
		endA, sideA, err := mem.NewPair(s.Pool, mem.PairOptions{Name: "sim-a", Size: 4096})
		if err != nil {
			return nil, s.fail(err)
		}
		sideB, endB, err := mem.NewPair(s.Pool, mem.PairOptions{Name: "sim-b", Size: 4096})
		if err != nil {
			return nil, s.fail(errors.Join(err, endA.Close(), sideA.Close()))
		}
		s.PortA, s.PortB = endA, endB
		s.Tap = newTap(s.Pool, sideA, sideB)
		s.Tap.Delay = cfg.TapDelay
		s.net = s.Tap
	} else {
		a, b, f, err := fabric.Link(s.Pool, fabric.Options{Name: "sim", AtoB: cfg.AtoB, BtoA: cfg.BtoA, Seed: cfg.Seed ^ 0xfab, LinkRing: 4096})
		if err != nil {
			return nil, s.fail(err)
		}
		s.PortA, s.PortB, s.Fabric, s.net = a, b, f, f
	}
	n := max(cfg.Shards, 1)
	for side, o := range []rt.Options{cfg.A, cfg.B} {
		name, netPort, ip, seed := "a", s.PortA, IPA(), cfg.Seed
		if side == 1 {
			name, netPort, ip, seed = "b", s.PortB, IPB(), cfg.Seed+1
		}
		if o.Name == "" {
			o.Name = name
		}
		if n > 1 {
			h, err := newHost("sim-"+name, netPort, s.Pool, n, cfg.Missteer, seed)
			if err != nil {
				return nil, s.fail(err)
			}
			s.hosts[side] = h
		}
		o.Pool, o.Clock, o.LocalIP = s.Pool, s.Clock, ip
		eps := make([]*rt.Endpoint, n)
		for i := range n {
			oi := shardOptions(o, o.Name, i, n, seed)
			oi.Port = netPort
			if h := s.hosts[side]; h != nil {
				oi.Port = h.ports[i]
			}
			if cfg.Trace != nil {
				oi.Port = &tracePort{Port: oi.Port, name: oi.Name, pool: s.Pool, clk: s.Clock, w: cfg.Trace}
			}
			if eps[i], err = rt.NewEndpoint(oi); err != nil {
				return nil, s.fail(err)
			}
			if side == 0 {
				s.As = append(s.As, eps[i])
			} else {
				s.Bs = append(s.Bs, eps[i])
			}
		}
	}
	s.A, s.B = s.As[0], s.Bs[0]
	return s, nil
}

// Side returns the endpoints of side 0 (a) or 1 (b), shard by shard.
func (s *Sim) Side(side int) []*rt.Endpoint {
	if side == 0 {
		return s.As
	}
	return s.Bs
}

// Endpoints returns every endpoint: a's shards, then b's.
func (s *Sim) Endpoints() []*rt.Endpoint {
	return append(append([]*rt.Endpoint(nil), s.As...), s.Bs...)
}

// Outstanding sums the endpoints' unacknowledged packets.
func (s *Sim) Outstanding() int {
	n := 0
	for _, e := range s.Endpoints() {
		n += e.Outstanding()
	}
	return n
}

// Missteered returns, per side, the frames its host's NIC put on a wrong
// queue and core/shard handed over in software (zero unless sharded).
func (s *Sim) Missteered() (nic, handedOver [2]uint64) {
	for side, h := range s.hosts {
		if h != nil {
			nic[side], handedOver[side] = h.Missed, h.set.Total().SteeredOut
		}
	}
	return nic, handedOver
}

// Touched returns, per side and shard, the frames a shard's endpoint
// received that another shard owns (nil unless sharded).
func (s *Sim) Touched() [2][]uint64 {
	var t [2][]uint64
	for side, h := range s.hosts {
		if h != nil {
			t[side] = h.Touched()
		}
	}
	return t
}

func (s *Sim) fail(err error) error {
	return errors.Join(err, s.Close())
}

// PeerA and PeerB are the addresses to Open.
func (s *Sim) PeerA() rt.PeerAddr { return rt.PeerAddr{MAC: [6]byte(s.PortA.Info().MAC), IP: IPA()} }
func (s *Sim) PeerB() rt.PeerAddr { return rt.PeerAddr{MAC: [6]byte(s.PortB.Info().MAC), IP: IPB()} }

// AddStage adds a stage (a workload) polled before the endpoints at every
// instant; if it has a NextDeadline method the clock also stops there.
func (s *Sim) AddStage(st lcore.Stage) { s.loop.add(st) }

// Polls returns how many instants were polled.
func (s *Sim) Polls() uint64 { return s.loop.polls }

// Poll polls every stage once at the current time and checks the
// endpoints' invariants (Config.Check). It returns the work done.
func (s *Sim) Poll() (int, error) { return s.loop.poll() }

// Step polls at the current instant; when nothing moved it advances the
// clock to the next deadline. It returns false when no stage has anything
// left to do.
func (s *Sim) Step() (bool, error) { return s.loop.step() }

// Run steps until cond holds, for at most limit of virtual time.
func (s *Sim) Run(cond func() bool, limit time.Duration) error { return s.loop.run(cond, limit) }

// Idle runs for d of virtual time (or until nothing is left to do).
func (s *Sim) Idle(d time.Duration) error { return s.loop.idle(d) }

// pollStages polls the added stages, then a, the network and b.
func (s *Sim) pollStages(now clock.Time) (int, error) {
	work := s.loop.pollAdded(now)
	for _, e := range s.As {
		work += e.Poll(now)
	}
	if h := s.hosts[0]; h != nil {
		work += h.Poll(now)
	}
	work += s.net.Poll(now)
	if h := s.hosts[1]; h != nil {
		work += h.Poll(now)
	}
	for _, e := range s.Bs {
		work += e.Poll(now)
	}
	return work, nil
}

func (s *Sim) deadlines(e *earliest) {
	for _, ep := range s.As {
		e.consider(ep.NextDeadline())
	}
	for _, ep := range s.Bs {
		e.consider(ep.NextDeadline())
	}
	e.consider(s.net.NextDeadline())
}

func (s *Sim) check(deep bool) error {
	for _, e := range s.Endpoints() {
		if err := checkTransport(e, deep); err != nil {
			return fmt.Errorf("endpoint %s at %v (poll %d): %w", e.Name(), s.Clock.Now(), s.loop.polls, err)
		}
	}
	return nil
}

// Stop stops the endpoints and the network: every frame goes back to the
// pool. It reports a leak when the simulation owns its pool.
func (s *Sim) Stop() error {
	now := s.Clock.Now()
	for _, e := range s.Endpoints() {
		e.Stop(now)
	}
	if s.net != nil {
		s.net.Stop(now)
	}
	for _, h := range s.hosts {
		if h != nil {
			h.stop()
		}
	}
	// Frames an endpoint sent after the network's last Poll sit in the
	// rings; the network's Stop drains its inputs (the tap) or a final
	// drain below returns them.
	drain := make([]mbuf.Handle, 64)
	for _, p := range []port.Port{s.PortA, s.PortB} {
		if p == nil {
			continue
		}
		for {
			n := p.RxBurst(0, drain)
			if n == 0 {
				break
			}
			s.Pool.Free(drain[:n])
		}
	}
	return nil
}

// Close stops everything, closes the ports and, if the simulation made its
// pool, checks it for leaks and closes it. Close is idempotent.
func (s *Sim) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.Stop()
	for _, e := range s.Endpoints() {
		err = errors.Join(err, e.Close())
	}
	if s.net != nil {
		err = errors.Join(err, s.net.Close())
	}
	for _, h := range s.hosts {
		if h != nil {
			err = errors.Join(err, h.close())
		}
	}
	for _, p := range []port.Port{s.PortA, s.PortB} {
		if p != nil {
			err = errors.Join(err, p.Close())
		}
	}
	return errors.Join(err, closeOwnedPool(s.Pool, s.ownPool))
}
