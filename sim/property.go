package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/fabric"
)

// Scenario is one randomized property run: a simulation, its traffic, and
// whether to close the connections at the end.
type Scenario struct {
	Seed     uint64
	Sim      Config
	Workload WorkloadConfig
	Close    bool
}

func (sc Scenario) String() string {
	return fmt.Sprintf("seed %d: a→b {%v} b→a {%v} window %d/%d ackEvery %d/%d early %d conns %d+%d packets %d close %v",
		sc.Seed, sc.Sim.AtoB, sc.Sim.BtoA, sc.Sim.A.WindowSize, sc.Sim.B.WindowSize, sc.Sim.A.AckEvery, sc.Sim.B.AckEvery,
		sc.Sim.A.EarlyRetransmitDistance, sc.Workload.Conns, sc.Workload.ReverseConns, sc.Workload.Packets, sc.Close)
}

// RandomScenario derives a scenario from seed: impairments of 0–10 % loss
// (sometimes in bursts), duplication, reordering, corruption, delay and
// jitter in each direction; random window sizes, ACK coalescing and early
// retransmit distances; one to three connections each way with packets in
// both windows; sometimes PSNs that wrap through 2^32; sometimes a close at
// the end. packets is the number each side sends per connection.
func RandomScenario(seed uint64, packets int) Scenario {
	r := rand.New(rand.NewPCG(seed, 0xa11ce))
	pct := func(maxPct float64) fabric.Percent {
		if r.IntN(3) == 0 {
			return 0
		}
		return fabric.Percent(r.Float64() * maxPct)
	}
	us := func(maxUs int) time.Duration { return time.Duration(r.IntN(maxUs+1)) * time.Microsecond }
	profile := func() fabric.Profile {
		p := fabric.Profile{
			Loss:    pct(10),
			Dup:     pct(5),
			Corrupt: pct(2),
			Delay:   us(50),
			Jitter:  us(20),
		}
		if r.IntN(3) == 0 {
			p.Reorder, p.ReorderDelay = pct(10), us(100)+time.Microsecond
		}
		if r.IntN(6) == 0 {
			p.Burst = fabric.GilbertElliott{P: fabric.Percent(0.5 + r.Float64()), R: fabric.Percent(30 + r.Float64()*50), BadLoss: 100}
		}
		if r.IntN(5) == 0 {
			p.Order = fabric.OrderFree
		}
		if r.IntN(6) == 0 {
			p.Paths, p.Spread = 2+r.IntN(3), us(30)
		}
		return p
	}
	windows := []int{64, 128, 128, 256}
	ep := func() rt.Options {
		o := rt.Options{
			MaxConns:                8,
			WindowSize:              windows[r.IntN(len(windows))],
			AckEvery:                1 + r.IntN(16),
			AckDelay:                time.Duration(2+r.IntN(40)) * time.Microsecond,
			MinRTO:                  time.Duration(100+r.IntN(200)) * time.Microsecond,
			MaxRTO:                  20 * time.Millisecond,
			RetryLimit:              12,
			EarlyRetransmitDistance: []int{-1, 1, 2, 3, 5, 8}[r.IntN(6)],
			Burst:                   []int{4, 16, 32, 64}[r.IntN(4)],
			CloseLinger:             10 * time.Millisecond,
		}
		o.MaxOutstanding = 1 + r.IntN(o.WindowSize)
		if r.IntN(4) == 0 {
			o.FixedInitialPSN, o.InitialPSN = true, ^uint32(0)-uint32(r.IntN(2*packets+10))
		}
		return o
	}
	sc := Scenario{Seed: seed}
	sc.Sim = Config{Seed: seed, AtoB: profile(), BtoA: profile(), Check: 2, Start: 1_000_000}
	sc.Sim.A, sc.Sim.B = ep(), ep()
	sc.Workload = WorkloadConfig{
		Conns:        1 + r.IntN(2),
		ReverseConns: r.IntN(2),
		Packets:      packets,
		MaxPayload:   16 + r.IntN(600),
		PerPoll:      1 + r.IntN(16),
		Seed:         seed,
	}
	if r.IntN(3) == 0 {
		sc.Workload.Gap = us(40)
	}
	sc.Close = r.IntN(2) == 0
	return sc
}

// Report summarizes a property run.
type Report struct {
	Sent, Delivered, Abandoned int
	Virtual                    time.Duration
	Polls                      uint64
	A, B                       rt.Stats
}

// Check runs a scenario and verifies the properties: every packet
// delivered exactly once (or reported abandoned), windows and bitmaps
// consistent after every Poll, nothing outstanding at the end, every
// connection closed when asked, and every frame back in the pool after the
// simulation stops. pool may be nil (the simulation makes one) or shared
// between runs. The error names the seed to replay.
func Check(sc Scenario, pool *mbuf.Pool) (rep Report, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("%v\n  replay: go test ./sim -run TestProperty -seed=%d\n  %w", sc, sc.Seed, err)
		}
	}()
	cfg := sc.Sim
	cfg.Pool = pool
	s, err := New(cfg)
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if err == nil && s.Pool.InUse() != 0 {
			err = fmt.Errorf("%d frames still in use after the simulation stopped", s.Pool.InUse())
		}
	}()
	start := s.Clock.Now()
	w := NewWorkload(s, sc.Workload)
	if err := w.Open(); err != nil {
		return rep, err
	}
	if err := s.Run(func() bool { return w.Err() != nil || w.Done() }, 60*time.Second); err != nil {
		return rep, fmt.Errorf("transfer: %w (sent %d delivered %d, outstanding a %d b %d)", err, w.sent, w.delivered, s.A.Outstanding(), s.B.Outstanding())
	}
	if err := w.Verify(); err != nil {
		return rep, err
	}
	if sc.Close {
		w.CloseAll()
		if err := s.Run(func() bool { return w.Err() != nil || w.AllClosed() }, 60*time.Second); err != nil {
			return rep, fmt.Errorf("close: %w (closed a %d b %d of %d)", err, w.closed[0], w.closed[1], w.Connections())
		}
		if w.Err() != nil {
			return rep, w.Err()
		}
		if err := s.Idle(2 * max(sc.Sim.A.CloseLinger, sc.Sim.B.CloseLinger)); err != nil {
			return rep, err
		}
		if s.A.Conns() != 0 || s.B.Conns() != 0 {
			return rep, fmt.Errorf("connections left after close and linger: a %d b %d", s.A.Conns(), s.B.Conns())
		}
	}
	for _, e := range []*rt.Endpoint{s.A, s.B} {
		if err := e.CheckInvariants(); err != nil {
			return rep, fmt.Errorf("endpoint %s at the end: %w", e.Name(), err)
		}
		if st := e.Stats(); st.Internal != 0 || st.AckForged != 0 {
			// Nothing forges in a simulation, and the fabric's one-bit
			// corruption never passes the checksums.
			return rep, fmt.Errorf("endpoint %s: %d internal inconsistencies, %d forged acknowledgements", e.Name(), st.Internal, st.AckForged)
		}
	}
	rep = Report{Sent: w.sent, Delivered: w.delivered, Abandoned: w.abandoned, Virtual: s.Clock.Now().Sub(start), Polls: s.Polls(), A: s.A.Stats(), B: s.B.Stats()}
	return rep, nil
}
