package sim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
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
	// Flap takes the link down both ways at Start+At for For (0: never),
	// mid-transfer: every packet sent meanwhile is lost and retransmitted.
	Flap Flap
}

// Flap is a link outage of a Scenario.
type Flap struct{ At, For time.Duration }

// flapper is the stage that takes a Sim's link down and up again.
type flapper struct {
	f            *fabric.Fabric
	down, up     time.Duration
	start        clock.Time
	isDown, done bool
}

func (f *flapper) Name() string { return "flap" }

func (f *flapper) Poll(now clock.Time) int {
	switch {
	case !f.isDown && !f.done && now >= f.start.Add(f.down):
		f.f.SetLinkDown(fabric.Both, true)
		f.isDown = true
		return 1
	case f.isDown && now >= f.start.Add(f.up):
		f.f.SetLinkDown(fabric.Both, false)
		f.isDown, f.done = false, true
		return 1
	}
	return 0
}

func (f *flapper) NextDeadline() (clock.Time, bool) {
	switch {
	case f.done:
		return 0, false
	case f.isDown:
		return f.start.Add(f.up), true
	}
	return f.start.Add(f.down), true
}

func (sc Scenario) String() string {
	return fmt.Sprintf("seed %d: a→b {%v} b→a {%v} window %d/%d ackEvery %d/%d early %d conns %d+%d packets %d close %v shards %d missteer %v flap %+v",
		sc.Seed, sc.Sim.AtoB, sc.Sim.BtoA, sc.Sim.A.WindowSize, sc.Sim.B.WindowSize, sc.Sim.A.AckEvery, sc.Sim.B.AckEvery,
		sc.Sim.A.EarlyRetransmitDistance, sc.Workload.Conns, sc.Workload.ReverseConns, sc.Workload.Packets, sc.Close,
		max(sc.Sim.Shards, 1), sc.Sim.Missteer, sc.Flap)
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
	// A and B sum each side's shards' counters.
	A, B rt.Stats
	// Missteered and HandedOver: frames each sharded side's NIC put on a
	// wrong queue, and those core/shard moved to their shard in software.
	Missteered, HandedOver [2]uint64
}

// Sharded returns the scenario run on hosts of n shards (Config.Shards),
// a missteer share of the frames arriving on a wrong shard's queue, and
// n times the connections each way, so that every shard of the opening
// side opens some.
func (sc Scenario) Sharded(n int, missteer fabric.Percent) Scenario {
	if n <= 1 {
		return sc
	}
	sc.Sim.Shards, sc.Sim.Missteer = n, missteer
	sc.Workload.Conns *= n
	sc.Workload.ReverseConns *= n
	return sc
}

// sumStats adds every counter of b into a.
func sumStats(a *rt.Stats, b rt.Stats) {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b)
	for i := range av.NumField() {
		if f := av.Field(i); f.Kind() == reflect.Uint64 && f.CanSet() {
			f.SetUint(f.Uint() + bv.Field(i).Uint())
		}
	}
}

// sideStats sums the counters of a side's shards.
func sideStats(eps []*rt.Endpoint) rt.Stats {
	var st rt.Stats
	for _, e := range eps {
		sumStats(&st, e.Stats())
	}
	return st
}

// checkShards verifies what sharding promises: every shard of a side that
// opened at least as many connections as it has shards opened some, and,
// when the NIC steers every frame right, every shard of the other side
// accepted some; no endpoint received a frame of another shard's
// connection; and nothing was handed over in software unless the NIC
// missteered it.
func checkShards(s *Sim, w *Workload) error {
	if len(s.As) <= 1 {
		return nil
	}
	opens := [2]int{w.cfg.Conns, w.cfg.ReverseConns}
	for side := range 2 {
		for i, e := range s.Side(side) {
			st := e.Stats()
			if opens[side] >= len(s.Side(side)) && st.ConnOpened == 0 {
				return fmt.Errorf("endpoint %s opened no connection of the %d opened round robin", e.Name(), opens[side])
			}
			if s.cfg.Missteer == 0 && opens[1-side] >= len(s.Side(side)) && st.ConnAccepted == 0 {
				return fmt.Errorf("endpoint %s accepted no connection of the %d its peer's shards opened", e.Name(), opens[1-side])
			}
			if t := s.Touched()[side][i]; t != 0 {
				return fmt.Errorf("endpoint %s received %d frames another shard owns", e.Name(), t)
			}
		}
	}
	nic, handed := s.Missteered()
	for side := range 2 {
		if handed[side] > nic[side] {
			return fmt.Errorf("side %d: %d frames handed over in software, and the NIC missteered only %d", side, handed[side], nic[side])
		}
	}
	return nil
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
			flags := ""
			if sc.Sim.Shards > 1 {
				flags = fmt.Sprintf(" -shards=%d", sc.Sim.Shards)
			}
			err = fmt.Errorf("%v\n  replay: go test ./sim -run TestProperty -seed=%d%s\n  %w", sc, sc.Seed, flags, err)
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
	if sc.Flap.For > 0 && s.Fabric != nil {
		s.AddStage(&flapper{f: s.Fabric, down: sc.Flap.At, up: sc.Flap.At + sc.Flap.For, start: start})
	}
	w := NewWorkload(s, sc.Workload)
	if err := w.Open(); err != nil {
		return rep, err
	}
	if err := s.Run(func() bool { return w.Err() != nil || w.Done() }, 60*time.Second); err != nil {
		return rep, fmt.Errorf("transfer: %w (sent %d delivered %d, outstanding %d)", err, w.sent, w.delivered, s.Outstanding())
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
		for _, e := range s.Endpoints() {
			if e.Conns() != 0 {
				return rep, fmt.Errorf("connections left after close and linger: %s %d", e.Name(), e.Conns())
			}
		}
	}
	if err := checkShards(s, w); err != nil {
		return rep, err
	}
	for _, e := range s.Endpoints() {
		if err := e.CheckInvariants(); err != nil {
			return rep, fmt.Errorf("endpoint %s at the end: %w", e.Name(), err)
		}
		if st := e.Stats(); st.Internal != 0 || st.AckForged != 0 {
			// Nothing forges in a simulation, and the fabric's one-bit
			// corruption never passes the checksums.
			return rep, fmt.Errorf("endpoint %s: %d internal inconsistencies, %d forged acknowledgements", e.Name(), st.Internal, st.AckForged)
		}
	}
	rep = Report{Sent: w.sent, Delivered: w.delivered, Abandoned: w.abandoned, Virtual: s.Clock.Now().Sub(start), Polls: s.Polls(),
		A: sideStats(s.As), B: sideStats(s.Bs)}
	rep.Missteered, rep.HandedOver = s.Missteered()
	return rep, nil
}
