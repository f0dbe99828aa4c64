// Package mcsq is `peregrine bench mcsq`: the multi-channel send queue
// (sched/mcsq, docs/mcsq.md) against a naive design built in the same run —
// one connection per target, all kept open — on the same network: an
// initiator and target hosts on the fabric emulator's N-port switch
// (sim.MCSQNet), in memory.
//
//	mcsq_vs_per_target_ops_gN_burst8   WRs completed per second, N posting goroutines,
//	                                   1,000 targets, bursts of 8 WRs per target:
//	                                   64 DC SQs / one RC connection per target   (goal >= 1.0)
//	mcsq_vs_per_target_ops_gN_random   the same with a target drawn per WR      (printed)
//	mcsq_vs_per_target_bytes_per_target connection state per target, MCSQ / naive (goal <= 0.10)
//	dc_10k_targets_complete            10,000 targets through 64 DC SQs, every WR completed
//	                                   (virtual time, exact)                      (goal = 1)
//	ordered_cq_cost_vs_unordered       CPU ns per WR, ordered CQ / unordered, same
//	                                   traffic on a virtual clock               (goal <= 1.20)
//	mcsq_lookahead_vs_strict_virtual_X virtual time of the same traffic, queue kept full,
//	                                   with StrictHOL / with the lookahead (g4_burst8,
//	                                   g1_random, g1_burst8; exact)               (goal >= 1.0)
//	allocs_per_wr                      heap allocations per WR, steady state      (goal = 0)
//
// Throughput figures are real-clock and belong to a quiet machine.
package mcsq

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

// Defaults of Options.
const (
	DefaultDuration = 500 * time.Millisecond
	DefaultTargets  = 1000
	DefaultHosts    = 16
	DefaultDCSQs    = 64
)

// Options configure Run.
type Options struct {
	Out io.Writer
	// Duration of each throughput measurement.
	Duration time.Duration
	// Goroutines are the posting goroutine counts (default 1, 4, 16, 64).
	Goroutines []int
	// Targets, Hosts and DCSQs shape the network (defaults 1,000, 16, 64).
	Targets, Hosts, DCSQs int
	// BigTargets is the DC completeness run's target count (default 10,000).
	BigTargets int
	// Seed picks the random targets.
	Seed uint64
	// Rounds is how many times each real-clock comparison runs, the two
	// sides alternating; the ratio is of the medians (default 3).
	Rounds int
}

func (o *Options) defaults() {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if len(o.Goroutines) == 0 {
		o.Goroutines = []int{1, 4, 16, 64}
	}
	if o.Targets == 0 {
		o.Targets = DefaultTargets
	}
	if o.Hosts == 0 {
		o.Hosts = DefaultHosts
	}
	if o.DCSQs == 0 {
		o.DCSQs = DefaultDCSQs
	}
	if o.BigTargets == 0 {
		o.BigTargets = 10000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
}

// dcIdle is the DC SQs' idle timeout in the throughput runs: a released
// SQ keeps its connection this long, and a new identifier whose target is
// on the same peer takes it without connecting.
const dcIdle = 10 * time.Millisecond

// benchTransport is the designs' transport tuning: closing connections
// hold their table slot 200 us. Both designs run on the transport's own
// liveness policy: txn awaits (and rt probes) a peer only when the peer
// holds the next move, so a thousand connections waiting their turn in
// the transmit scheduler probe nobody (TestDesignsMove counts probes).
func benchTransport(design) func(ro *rt.Options) {
	return func(ro *rt.Options) {
		ro.CloseLinger = 200 * time.Microsecond
	}
}

// blacklist is both designs' blacklist capacity.
const blacklist = 256

// initiatorConns is the connection table each design provisions: the
// naive one a connection per target; the MCSQ its SQs and a quarter as many
// again for connections still closing (a connect that finds the table
// full waits: Stats.ConnectWaits).
func initiatorConns(o *Options, d design) int {
	if d == designPerTarget {
		return o.Targets
	}
	return o.DCSQs + o.DCSQs/4
}

// design is one side of the comparison.
type design int

const (
	designMCSQ design = iota
	designPerTarget
)

func (d design) String() string {
	if d == designMCSQ {
		return "mcsq"
	}
	return "per-target"
}

// bed is a network with one queue over either 64 DC SQs (MCSQ) or one RC
// connection per target (naive), its targets, and a source region.
type bed struct {
	n       *sim.MCSQNet
	q       *mcsq.Queue
	pool    *mcsq.Pool
	design  design
	targets []mcsq.Target
	host    []int
	srcR    txn.Region
	peak    int // most transport connections in use at once
}

// bedMod adjusts a bed's network and queue before they are built.
type bedMod func(*sim.MCSQNetOptions, *mcsq.QueueOptions)

func newBed(o *Options, d design, ordered bool, clk clock.Clock, idle time.Duration, mods ...bedMod) (*bed, error) {
	no := sim.MCSQNetOptions{Seed: o.Seed, Hosts: o.Hosts, Clock: clk, PoolFrames: 65536,
		InitiatorConns: initiatorConns(o, d), HostConns: 2 * (o.Targets/o.Hosts + 64), MaxOps: 8192, MaxTargets: o.Targets,
		Transport: benchTransport(d)}
	qo := mcsq.QueueOptions{Ordered: ordered, Depth: 16384}
	for _, m := range mods {
		m(&no, &qo)
	}
	n, err := sim.NewMCSQNet(no)
	if err != nil {
		return nil, err
	}
	b := &bed{n: n, design: d}
	src := make([]byte, 64<<10)
	if b.srcR, err = n.Init.Register(src, 0); err != nil {
		return nil, b.close(err)
	}
	if d == designMCSQ {
		if b.pool, err = n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: o.DCSQs, IdleTimeout: idle, Blacklist: blacklist}); err != nil {
			return nil, b.close(err)
		}
		qo.DC = b.pool
	} else {
		if b.pool, err = n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC, SQs: o.Targets, Blacklist: blacklist}); err != nil {
			return nil, b.close(err)
		}
		qo.RC = b.pool
	}
	if b.q, err = n.Engine.NewQueue(qo); err != nil {
		return nil, b.close(err)
	}
	for t := range o.Targets {
		h := t % o.Hosts
		b.host = append(b.host, h)
		if d == designMCSQ {
			tg, err := n.Engine.AddTarget(n.Peers[h])
			if err != nil {
				return nil, b.close(err)
			}
			b.targets = append(b.targets, tg)
		} else if err := b.pool.AddRC(uint32(t+1), n.Peers[h]); err != nil {
			return nil, b.close(err)
		}
		if d == designPerTarget && (t+1)%32 == 0 {
			// Open the naive design's connections 32 at a time: a thousand
			// handshakes at once overflow the rings and time out.
			if err := b.settle(t + 1); err != nil {
				return nil, b.close(err)
			}
		}
	}
	if d == designPerTarget {
		if err := b.settle(o.Targets); err != nil {
			return nil, b.close(err)
		}
	}
	return b, nil
}

// settle polls until want connections are established (at most 10 s).
func (b *bed) settle(want int) error {
	end := time.Now().Add(10 * time.Second)
	for int(b.n.Init.Transport().Stats().ConnEstablished) < want {
		if time.Now().After(end) {
			return fmt.Errorf("bench mcsq: only %d of %d connections established", b.n.Init.Transport().Stats().ConnEstablished, want)
		}
		b.n.Run(func() bool { return true }, 0)
		b.n.Step()
	}
	return nil
}

func (b *bed) close(err error) error {
	return joinErr(err, b.n.Close())
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return fmt.Errorf("%w; %v", a, b)
}

// wr is target t's k-th WR: a 64-byte push into its host's region.
func (b *bed) wr(t int, cookie uint64) mcsq.WR {
	w := mcsq.WR{Op: mcsq.OpPush, Local: b.srcR, LocalAddr: uint64(t%256) * 64, Len: 64,
		Remote: wire.RegionRef{Key: b.n.Regions[b.host[t]].Key, Addr: uint64(t%512) * 64}, Cookie: cookie}
	if b.design == designMCSQ {
		w.ID, w.Target = mcsq.Flow(uint64(t)), b.targets[t]
	} else {
		w.ID = mcsq.QPN(uint32(t + 1))
	}
	return w
}

// throughput runs g posting goroutines for d on the real clock while this
// goroutine polls the network, and returns WRs completed per second.
func (b *bed) throughput(ctx context.Context, g int, burst int, d time.Duration, seed uint64) (float64, error) {
	var covered atomic.Int64
	stop := make(chan struct{})
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var postErr atomic.Value
	targets := len(b.host)
	for p := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			for k := uint64(0); ; k++ {
				t := rng.IntN(targets)
				for range burst {
					w := b.wr(t, k)
					if err := b.q.PostWait(pctx, &w); err != nil {
						if pctx.Err() == nil {
							postErr.Store(err)
						}
						return
					}
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]mcsq.CQE, 64)
		for {
			k := b.q.Completions(buf)
			for _, c := range buf[:k] {
				covered.Add(int64(c.Count))
			}
			if k == 0 {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		}
	}()
	// Warm up (connections, caches), then measure.
	warm := time.Now().Add(d / 4)
	for time.Now().Before(warm) && ctx.Err() == nil {
		b.step()
	}
	c0, t0 := covered.Load(), time.Now()
	end := t0.Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		b.step()
	}
	c1, t1 := covered.Load(), time.Now()
	close(stop)
	cancel()
	// Let the posters and the reader see stop while the loop still runs.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		default:
			b.step()
		}
	}
	if err, _ := postErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(c1-c0) / t1.Sub(t0).Seconds(), ctx.Err()
}

func (b *bed) step() {
	b.n.Step()
	if c := b.n.Init.Transport().Conns(); c > b.peak {
		b.peak = c
	}
}

// measure builds a bed, runs one throughput measurement and tears it down.
func measure(ctx context.Context, o *Options, d design, ordered bool, g, burst int, round uint64) (float64, mcsq.Stats, int, error) {
	b, err := newBed(o, d, ordered, clock.NewReal(), dcIdle)
	if err != nil {
		return 0, mcsq.Stats{}, 0, err
	}
	ops, err := b.throughput(ctx, g, burst, o.Duration, o.Seed+round)
	st := b.q.Stats()
	if cerr := b.n.Close(); err == nil {
		err = cerr
	}
	return ops, st, b.peak, err
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// Run runs the scenario and prints its report.
func Run(ctx context.Context, o Options) (pass, fail int, err error) {
	o.defaults()
	rep := report.New(o.Out)
	rep.Note("mcsq: %d targets on %d hosts, %d DC SQs vs one RC connection per target; %v per measurement, median of %d alternating rounds", o.Targets, o.Hosts, o.DCSQs, o.Duration, o.Rounds)

	var mcsqPeak int
	for _, burst := range []int{8, 1} {
		for _, g := range o.Goroutines {
			var ops [2]float64
			var hol [2]mcsq.Stats
			var runs [2][]float64
			for round := range o.Rounds {
				for _, d := range []design{designMCSQ, designPerTarget} {
					v, st, peak, err := measure(ctx, &o, d, false, g, burst, uint64(round))
					if err != nil {
						return 0, 0, fmt.Errorf("%v, %d goroutines: %w", d, g, err)
					}
					runs[d] = append(runs[d], v)
					hol[d] = st
					if d == designMCSQ {
						mcsqPeak = max(mcsqPeak, peak)
					}
				}
			}
			ops[0], ops[1] = median(runs[0]), median(runs[1])
			for d, name := range []string{"mcsq", "per-target"} { // --report's figure
				fmt.Fprintln(o.Out, report.Point{Figure: fmt.Sprintf("mcsq_ops_vs_goroutines_burst%d", burst), Series: name, X: float64(g), Y: ops[d],
					XLabel: "posting_goroutines", YLabel: "WRs/s"}.Line())
			}
			r := report.Ratio{Name: fmt.Sprintf("mcsq_vs_per_target_ops_g%d_burst8", g), Value: ops[0] / ops[1], Op: report.AtLeast, Target: 1.0,
				Detail: fmt.Sprintf("mcsq %.0f WR/s, per-target %.0f WR/s; mcsq head-of-line waits: no free SQ %d polls, SQ full %d, %.1f ms total; %d WRs overtook a waiting head",
					ops[0], ops[1], hol[0].HOLNoSQ, hol[0].HOLSQFull, float64(hol[0].HOLWaitNs)/1e6, hol[0].Overtook)}
			if burst == 1 {
				// Printed, no goal: a target drawn per WR.
				rep.Note("mcsq_vs_per_target_ops_g%d_random %.3f (no goal): %s", g, r.Value, r.Detail)
				continue
			}
			rep.Add(r)
		}
	}

	if err := bytesPerTarget(&o, rep, mcsqPeak); err != nil {
		return 0, 0, err
	}
	if err := lookaheadGain(&o, rep, 20000); err != nil {
		return 0, 0, err
	}
	if err := dc10k(&o, rep); err != nil {
		return 0, 0, err
	}
	if err := orderedCost(ctx, &o, rep); err != nil {
		return 0, 0, err
	}
	if err := allocsPerWR(&o, rep); err != nil {
		return 0, 0, err
	}
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// heapOf returns the heap bytes build leaves allocated.
func heapOf(build func() (func(), error)) (uint64, error) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	release, err := build()
	if err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	release()
	return m1.HeapAlloc - m0.HeapAlloc, nil
}

// bytesPerTarget compares the connection state each design provisions
// for its targets, as heap bytes: the initiator's endpoint with the
// connection table the design runs with (initiatorConns), its pool, and
// its per-target entries (the MCSQ's target table; the naive design's
// connections, opened), less the same network with a one-connection
// endpoint and nothing else.
func bytesPerTarget(o *Options, rep *report.Report, peak int) error {
	build := func(d design, conns int, fill bool) func() (func(), error) {
		return func() (func(), error) {
			n, err := sim.NewMCSQNet(sim.MCSQNetOptions{Hosts: 1, PoolFrames: 1024, InitiatorConns: conns, HostConns: 8, MaxTargets: o.Targets})
			if err != nil {
				return nil, err
			}
			release := func() { _ = n.Close() }
			if !fill {
				return release, nil
			}
			if d == designMCSQ {
				if _, err := n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: o.DCSQs, Blacklist: blacklist}); err != nil {
					return nil, err
				}
				for range o.Targets {
					if _, err := n.Engine.AddTarget(n.Peers[0]); err != nil {
						return nil, err
					}
				}
				return release, nil
			}
			rc, err := n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC, SQs: o.Targets, Blacklist: blacklist})
			if err != nil {
				return nil, err
			}
			for t := range o.Targets {
				if err := rc.AddRC(uint32(t+1), n.Peers[0]); err != nil {
					return nil, err
				}
			}
			return release, nil
		}
	}
	base, err := heapOf(build(designMCSQ, 1, false))
	if err != nil {
		return err
	}
	var b [2]float64
	for _, d := range []design{designMCSQ, designPerTarget} {
		h, err := heapOf(build(d, initiatorConns(o, d), true))
		if err != nil {
			return err
		}
		b[d] = (float64(h) - float64(base)) / float64(o.Targets)
	}
	rep.Add(report.Ratio{Name: "mcsq_vs_per_target_bytes_per_target", Value: b[0] / b[1], Op: report.AtMost, Target: 0.10,
		Detail: fmt.Sprintf("mcsq %.0f B/target (a table of %d connections for %d DC SQs, their rings, a target table), per-target %.0f B/target (%d connections); the throughput runs peaked at %d connections open or closing",
			b[0], initiatorConns(o, designMCSQ), o.DCSQs, b[1], o.Targets, peak)})
	return nil
}

// dc10k posts two WRs for each of BigTargets targets through DCSQs DC SQs
// in virtual time and checks every WR completed.
func dc10k(o *Options, rep *report.Report) error {
	hosts := 32
	n, err := sim.NewMCSQNet(sim.MCSQNetOptions{Seed: o.Seed, Hosts: hosts, PoolFrames: 65536, InitiatorConns: 1024,
		HostConns: 1024, Delay: 2 * time.Microsecond, Transport: func(ro *rt.Options) { ro.CloseLinger = 200 * time.Microsecond }})
	if err != nil {
		return err
	}
	defer n.Close()
	src, err := n.Init.Register(make([]byte, 4096), 0)
	if err != nil {
		return err
	}
	dc, err := n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: o.DCSQs})
	if err != nil {
		return err
	}
	q, err := n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true, Depth: 1 << 16})
	if err != nil {
		return err
	}
	targets := make([]mcsq.Target, o.BigTargets)
	for t := range targets {
		if targets[t], err = n.Engine.AddTarget(n.Peers[t%hosts]); err != nil {
			return err
		}
	}
	total := 2 * o.BigTargets
	posted, covered, okN := 0, 0, 0
	buf := make([]mcsq.CQE, 256)
	start := n.Clock.Now()
	n.Run(func() bool {
		for posted < total {
			t := posted / 2
			w := mcsq.WR{ID: mcsq.Flow(uint64(t)), Target: targets[t], Op: mcsq.OpPush, Local: src, Len: 64,
				Remote: wire.RegionRef{Key: n.Regions[t%hosts].Key, Addr: uint64(t%1000) * 64}, Cookie: uint64(posted)}
			if q.Post(&w) != nil {
				break
			}
			posted++
		}
		for {
			k := q.Completions(buf)
			for _, c := range buf[:k] {
				covered += c.Count
				if c.Status == mcsq.StatusOK {
					okN += c.Count
				}
			}
			if k < len(buf) {
				break
			}
		}
		return covered == total
	}, 10*time.Second)
	ps := dc.Stats()
	v := 0.0
	if okN == total {
		v = 1
	}
	rep.Add(report.Ratio{Name: "dc_10k_targets_complete", Value: v, Op: report.AtLeast, Target: 1,
		Detail: fmt.Sprintf("%d of %d WRs completed OK for %d targets through %d DC SQs in %v virtual; %d DC connects, %d disconnects, %d binds",
			okN, total, o.BigTargets, o.DCSQs, n.Clock.Now().Sub(start), ps.DCConnects, ps.DCDisconnects, ps.Binds)})
	return nil
}

// orderedCost compares the CPU time per WR with an ordered CQ (reorder
// buffer, coalesced CQEs) and an unordered one, on the same traffic: one
// goroutine posts bursts of 8 WRs per random target and polls the whole
// network on a virtual clock (the protocol's work is the same every run;
// the wall time is what it costs), alternating the two over the rounds.
func orderedCost(_ context.Context, o *Options, rep *report.Report) error {
	const total = 20000
	var runs [2][]float64
	var cqes [2]mcsq.Stats
	for round := range o.Rounds {
		for k, ordered := range []bool{false, true} {
			b, err := newBed(o, designMCSQ, ordered, clock.NewVirtual(1_000_000), dcIdle)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := virtualRun(b, total, uint64(round)+o.Seed); err != nil {
				return b.close(err)
			}
			runs[k] = append(runs[k], float64(time.Since(start).Nanoseconds())/total)
			cqes[k] = b.q.Stats()
			if err := b.n.Close(); err != nil {
				return err
			}
		}
	}
	ns := [2]float64{median(runs[0]), median(runs[1])}
	rep.Add(report.Ratio{Name: "ordered_cq_cost_vs_unordered", Value: ns[1] / ns[0], Op: report.AtMost, Target: 1.20,
		Detail: fmt.Sprintf("ordered %.0f ns/WR (%.2f WRs per CQE), unordered %.0f ns/WR (1 WR per CQE): CPU per WR of the whole path, %d WRs in bursts of 8 per random target, virtual time",
			ns[1], float64(cqes[1].Completed+cqes[1].CompletedErr)/float64(max(cqes[1].CQEs, 1)), ns[0], total)})
	return nil
}

// virtualRun posts total WRs from this goroutine in rounds of 64 bursts of
// 8 WRs per random target and runs the network on its virtual clock until
// each round is covered by CQEs.
func virtualRun(b *bed, total int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0))
	buf := make([]mcsq.CQE, 256)
	posted, covered := 0, 0
	drain := func() bool {
		for {
			n := b.q.Completions(buf)
			for _, c := range buf[:n] {
				covered += c.Count
			}
			if n < len(buf) {
				return covered == posted
			}
		}
	}
	for posted < total {
		for range 64 {
			t := rng.IntN(len(b.host))
			for range 8 {
				w := b.wr(t, uint64(posted))
				if err := b.q.Post(&w); err != nil {
					return err
				}
				posted++
			}
		}
		if !b.n.Run(drain, time.Second) {
			return fmt.Errorf("bench mcsq: WRs did not complete (%d of %d)", covered, posted)
		}
	}
	return nil
}

// virtualClosed keeps the queue full from posters interleaved streams,
// each posting bursts of burst WRs per random target, on the bed's
// virtual clock, until total WRs are covered by CQEs; it returns the
// virtual time taken.
func virtualClosed(b *bed, total, posters, burst int, seed uint64) (time.Duration, error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	type stream struct{ t, left int }
	st := make([]stream, posters)
	buf := make([]mcsq.CQE, 256)
	posted, covered := 0, 0
	var perr error
	start := b.n.Clock.Now()
	ok := b.n.Run(func() bool {
		for {
			n := b.q.Completions(buf)
			for _, c := range buf[:n] {
				covered += c.Count
			}
			if n < len(buf) {
				break
			}
		}
		for posted < total {
			s := &st[posted%posters]
			if s.left == 0 {
				s.t, s.left = rng.IntN(len(b.host)), burst
			}
			w := b.wr(s.t, uint64(posted))
			if err := b.q.Post(&w); err != nil {
				if err != mcsq.ErrBusy {
					perr = err
					return true
				}
				break
			}
			s.left--
			posted++
		}
		return covered == total
	}, 10*time.Second)
	if perr != nil {
		return 0, perr
	}
	if !ok {
		return 0, fmt.Errorf("bench mcsq: %d of %d WRs covered in 10 s virtual", covered, total)
	}
	return b.n.Clock.Now().Sub(start), nil
}

// lookaheadGain measures the distributor's lookahead on the virtual
// clock: the same traffic (4 interleaved posting streams of bursts of 8
// WRs per random target, and one stream of a target per WR) through the
// MCSQ with its lookahead and with StrictHOL, the plain wait, on a
// switch of 100 Gb/s ports with 1 us delay. Exact: the ratio is of
// virtual times.
func lookaheadGain(o *Options, rep *report.Report, total int) error {
	net := func(no *sim.MCSQNetOptions, _ *mcsq.QueueOptions) {
		no.Rate, no.Delay = 100e9, time.Microsecond
	}
	strict := func(_ *sim.MCSQNetOptions, qo *mcsq.QueueOptions) { qo.StrictHOL = true }
	for _, c := range []struct {
		name           string
		posters, burst int
	}{{"g4_burst8", 4, 8}, {"g1_random", 1, 1}, {"g1_burst8", 1, 8}} {
		var vt [2]time.Duration
		var st [2]mcsq.Stats
		var ps [2]mcsq.Stats
		for k, mods := range [][]bedMod{{net}, {net, strict}} {
			b, err := newBed(o, designMCSQ, true, clock.NewVirtual(1_000_000), dcIdle, mods...)
			if err != nil {
				return err
			}
			vt[k], err = virtualClosed(b, total, c.posters, c.burst, o.Seed)
			st[k], ps[k] = b.q.Stats(), b.pool.Stats()
			if err = joinErr(err, b.n.Close()); err != nil {
				return err
			}
		}
		r := report.Ratio{Name: "mcsq_lookahead_vs_strict_virtual_" + c.name, Value: float64(vt[1]) / float64(vt[0]), Op: report.AtLeast, Target: 1.0,
			Detail: fmt.Sprintf("%d WRs, queue kept full: lookahead %v virtual (%d WRs overtook a waiting head, %d head waits, %d binds, %d DC connects), strict %v (%d head waits, %d binds, %d DC connects)",
				total, vt[0], st[0].Overtook, st[0].HOLNoSQ+st[0].HOLSQFull, ps[0].Binds, ps[0].DCConnects, vt[1], st[1].HOLNoSQ+st[1].HOLSQFull, ps[1].Binds, ps[1].DCConnects)}
		rep.Add(r)
	}
	return nil
}

// allocsPerWR counts heap allocations per WR in steady state: flows
// already bound and connected (a DC idle timeout keeps them), one poster.
func allocsPerWR(o *Options, rep *report.Report) error {
	oo := *o
	oo.Targets = 8
	b, err := newBed(&oo, designMCSQ, true, clock.NewVirtual(1_000_000), time.Hour)
	if err != nil {
		return err
	}
	defer b.n.Close()
	buf := make([]mcsq.CQE, 8)
	got := false
	done := func() bool {
		if b.q.Completions(buf) > 0 {
			got = true
		}
		return got
	}
	one := func(t int) error {
		got = false
		w := b.wr(t, 1)
		if err := b.q.Post(&w); err != nil {
			return err
		}
		if !b.n.Run(done, time.Second) {
			return fmt.Errorf("bench mcsq: a WR did not complete")
		}
		return nil
	}
	for k := range 1000 {
		if err := one(k % 8); err != nil {
			return err
		}
	}
	const n = 5000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for k := range n {
		if err := one(k % 8); err != nil {
			return err
		}
	}
	runtime.ReadMemStats(&m1)
	v := float64(m1.Mallocs-m0.Mallocs) / n
	rep.Add(report.Ratio{Name: "allocs_per_wr", Value: v, Op: report.AtMost, Target: 0,
		Detail: fmt.Sprintf("%d allocations over %d WRs (post, distribute, push, ACK, CQE, poll), DC flows bound", m1.Mallocs-m0.Mallocs, n)})
	return nil
}
