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
	Clock  *clock.Virtual
	Pool   *mbuf.Pool
	A, B   *rt.Endpoint
	PortA  port.Port
	PortB  port.Port
	Fabric *fabric.Fabric // nil when Scripted
	Tap    *Tap           // nil unless Scripted

	cfg     Config
	ownPool bool
	net     middle
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
	oa, ob := cfg.A, cfg.B
	pa, pb := s.PortA, s.PortB
	if cfg.Trace != nil {
		pa = &tracePort{Port: pa, name: "a", pool: s.Pool, clk: s.Clock, w: cfg.Trace}
		pb = &tracePort{Port: pb, name: "b", pool: s.Pool, clk: s.Clock, w: cfg.Trace}
	}
	oa.Port, oa.Pool, oa.Clock, oa.LocalIP, oa.Seed = pa, s.Pool, s.Clock, IPA(), cfg.Seed
	ob.Port, ob.Pool, ob.Clock, ob.LocalIP, ob.Seed = pb, s.Pool, s.Clock, IPB(), cfg.Seed+1
	if oa.Name == "" {
		oa.Name = "a"
	}
	if ob.Name == "" {
		ob.Name = "b"
	}
	if s.A, err = rt.NewEndpoint(oa); err != nil {
		return nil, s.fail(err)
	}
	if s.B, err = rt.NewEndpoint(ob); err != nil {
		return nil, s.fail(err)
	}
	return s, nil
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
	work += s.A.Poll(now)
	work += s.net.Poll(now)
	work += s.B.Poll(now)
	return work, nil
}

func (s *Sim) deadlines(e *earliest) {
	e.consider(s.A.NextDeadline())
	e.consider(s.B.NextDeadline())
	e.consider(s.net.NextDeadline())
}

func (s *Sim) check(deep bool) error {
	for _, e := range []*rt.Endpoint{s.A, s.B} {
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
	if s.A != nil {
		s.A.Stop(now)
	}
	if s.B != nil {
		s.B.Stop(now)
	}
	if s.net != nil {
		s.net.Stop(now)
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
	if s.A != nil {
		err = errors.Join(err, s.A.Close())
	}
	if s.B != nil {
		err = errors.Join(err, s.B.Close())
	}
	if s.net != nil {
		err = errors.Join(err, s.net.Close())
	}
	for _, p := range []port.Port{s.PortA, s.PortB} {
		if p != nil {
			err = errors.Join(err, p.Close())
		}
	}
	return errors.Join(err, closeOwnedPool(s.Pool, s.ownPool))
}
