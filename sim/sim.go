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

// waker is a stage that knows when it next has work (a paced workload).
type waker interface {
	NextDeadline() (clock.Time, bool)
}

// Sim runs two endpoints and the network between them on a virtual clock,
// polling every stage at one instant until nothing moves, then jumping the
// clock to the earliest deadline of any of them. It never spins through
// idle virtual time, and a run is fully determined by its Config.
type Sim struct {
	Clock  *clock.Virtual
	Pool   *mbuf.Pool
	A, B   *rt.Endpoint
	PortA  port.Port
	PortB  port.Port
	Fabric *fabric.Fabric // nil when Scripted
	Tap    *Tap           // nil unless Scripted

	cfg      Config
	ownPool  bool
	net      middle
	extra    []lcore.Stage
	polls    uint64
	steps    uint64
	closed   bool
	checkErr error
}

// New builds a simulation.
func New(cfg Config) (*Sim, error) {
	s := &Sim{cfg: cfg, Clock: clock.NewVirtual(cfg.Start), Pool: cfg.Pool}
	if s.cfg.MaxSteps == 0 {
		s.cfg.MaxSteps = 50_000_000
	}
	if s.Pool == nil {
		frames := cfg.Frames
		if frames == 0 {
			frames = DefaultFrames
		}
		p, err := mbuf.New(mbuf.Options{Name: "sim", Frames: frames, CacheSize: 128})
		if err != nil {
			return nil, err
		}
		s.Pool, s.ownPool = p, true
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
	var err error
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
func (s *Sim) AddStage(st lcore.Stage) { s.extra = append(s.extra, st) }

// Polls returns how many instants were polled.
func (s *Sim) Polls() uint64 { return s.polls }

// Poll polls every stage once at the current time and checks the
// endpoints' invariants (Config.Check). It returns the work done.
func (s *Sim) Poll() (int, error) {
	now := s.Clock.Now()
	work := 0
	for _, st := range s.extra {
		work += st.Poll(now)
	}
	work += s.A.Poll(now)
	work += s.net.Poll(now)
	work += s.B.Poll(now)
	s.polls++
	if s.cfg.Check > 0 {
		if err := s.check(s.cfg.Check > 1 && s.polls%64 == 0); err != nil {
			return work, err
		}
	}
	return work, nil
}

func (s *Sim) check(deep bool) error {
	for _, e := range []*rt.Endpoint{s.A, s.B} {
		var err error
		if deep {
			err = e.CheckInvariants()
		} else {
			err = e.CheckWindows()
		}
		if err != nil {
			return fmt.Errorf("endpoint %s at %v (poll %d): %w", e.Name(), s.Clock.Now(), s.polls, err)
		}
	}
	return nil
}

// next returns the earliest deadline of any stage.
func (s *Sim) next() (clock.Time, bool) {
	var t clock.Time
	ok := false
	consider := func(at clock.Time, has bool) {
		if has && (!ok || at < t) {
			t, ok = at, true
		}
	}
	consider(s.A.NextDeadline())
	consider(s.B.NextDeadline())
	consider(s.net.NextDeadline())
	for _, st := range s.extra {
		if w, isW := st.(waker); isW {
			consider(w.NextDeadline())
		}
	}
	return t, ok
}

// Step polls at the current instant; when nothing moved it advances the
// clock to the next deadline. It returns false when no stage has anything
// left to do.
func (s *Sim) Step() (bool, error) {
	s.steps++
	work, err := s.Poll()
	if err != nil || work > 0 {
		return true, err
	}
	t, ok := s.next()
	if !ok {
		return false, nil
	}
	now := s.Clock.Now()
	if t <= now {
		// Something is pending but could not move (a full pool or ring):
		// let time pass.
		t = now.Add(time.Microsecond)
	}
	return true, s.Clock.Set(t)
}

// ErrStuck is returned by Run when the condition cannot be reached: the
// stages ran out of work, or the virtual time or step budget ran out.
var ErrStuck = errors.New("sim: simulation stuck")

// Run steps until cond holds, for at most limit of virtual time.
func (s *Sim) Run(cond func() bool, limit time.Duration) error {
	end := s.Clock.Now().Add(limit)
	for steps := 0; !cond(); steps++ {
		if steps >= s.cfg.MaxSteps {
			return fmt.Errorf("%w: %d steps without reaching the goal (now %v)", ErrStuck, steps, s.Clock.Now())
		}
		more, err := s.Step()
		if err != nil {
			return err
		}
		if !more {
			if cond() {
				return nil
			}
			return fmt.Errorf("%w: nothing left to do at %v", ErrStuck, s.Clock.Now())
		}
		if s.Clock.Now() > end {
			return fmt.Errorf("%w: goal not reached within %v of virtual time", ErrStuck, limit)
		}
	}
	return nil
}

// Idle runs for d of virtual time (or until nothing is left to do).
func (s *Sim) Idle(d time.Duration) error {
	end := s.Clock.Now().Add(d)
	for s.Clock.Now() < end {
		t, ok := s.next()
		if work, err := s.Poll(); err != nil {
			return err
		} else if work > 0 {
			continue
		}
		if !ok || t > end {
			return s.Clock.Set(end)
		}
		if t <= s.Clock.Now() {
			t = s.Clock.Now().Add(time.Microsecond)
		}
		if err := s.Clock.Set(t); err != nil {
			return err
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
	if s.ownPool {
		err = errors.Join(err, s.Pool.CheckLeaks(), s.Pool.Close())
	}
	return err
}
