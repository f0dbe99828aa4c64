package smallops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/bench/foundation"
	"github.com/peregrine-net/peregrine/bench/internal/benchtopo"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/pmd/netns"

	// The rows open mem and afxdp ports by spec.
	_ "github.com/peregrine-net/peregrine/pmd/afxdp"
	_ "github.com/peregrine-net/peregrine/pmd/mem"
)

// Options configure a run.
type Options struct {
	Out io.Writer
	// Duration is each row's measured window (0: 2s), after a warm-up of
	// a fifth of it.
	Duration time.Duration
	// Window is the operations kept in flight (0: DefaultWindow); the
	// transport's PSN window may hold fewer.
	Window int
	// Prefix names the namespaces PREFIX-a and PREFIX-b ("": pgso<pid>).
	Prefix string
	// Seed seeds the fabric and the endpoints (0: 1).
	Seed uint64
	// MinCwnd is the initiator's least congestion window per connection
	// (0: the transport stage's default). Swift reads the poll loops'
	// turnaround as queueing and holds each connection near its floor,
	// so the rows keep far fewer operations in flight than Window unless
	// the floor is raised to Window's share of a connection.
	MinCwnd float64
	// MinRTO is both endpoints' shortest retransmit timeout (0: the
	// transport stage's default, app.DefaultMinRTO). A loop kept off its
	// CPU for longer than it holds back ACKs past the peer's timer: on a
	// host whose kernel threads or other processes take the loops' CPUs
	// for milliseconds, the rows without loss retransmit unless the floor
	// is above those stalls, which every real loss then waits for.
	MinRTO time.Duration
	// oneLoop runs both endpoints of an in-memory row on one unpinned
	// loop: one goroutine does all the work, so a CPU profile's shares
	// are the cost of an operation at both ends (BenchmarkRow).
	oneLoop bool
	// pinOne pins oneLoop's loop to the initiator's CPU, so that its
	// thread's CPU time is read (the one-loop FIGURE row).
	pinOne bool
	// size overrides Size (BenchmarkRow's bulk profiles); label, when
	// set, starts each pipeline's loops under the pprof label side=
	// initiator or target, so that a CPU profile splits by endpoint.
	size  int
	label bool
	idle  lcore.IdleMode
}

// DefaultWindow is Options.Window's default: the transport's default PSN
// window on each of two connections.
const DefaultWindow = 2 * rt.DefaultWindowSize

// Size is the operations' size.
const Size = 64

// LossProfile is the fabric rows' impairment, each way.
const LossProfile = "loss=1%"

type where int

const (
	inMemory where = iota
	overAFXDP
	throughFabric
)

type row struct {
	name  string
	where where
	send  bool
}

var rows = []row{
	{"mem_push64", inMemory, false},
	{"mem_send64", inMemory, true},
	{"afxdp_push64", overAFXDP, false},
	{"afxdp_send64", overAFXDP, true},
	{"fabric1_push64", throughFabric, false},
	{"fabric1_send64", throughFabric, true},
}

// Rows returns the rows' names, in order, for --help and tests.
func Rows() []string {
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	return names
}

// result is one row's measured window.
type result struct {
	ops, failed  uint64
	wall         time.Duration
	cpu          time.Duration // the busier endpoint loop's thread
	retx, earlyR uint64        // both endpoints
	spurious     uint64        // timeouts found spurious (rt.Stats.SpuriousRTO), both endpoints
	asks         uint64        // timeouts that asked for an ACK before resending (rt.Stats.TimeoutAsks)
	fabricLost   uint64
	// stalls: each loop's gaps between iterations longer than the RTO
	// floor in the window (stallMeter), in the order of sides.meters.
	stalls  []stallCount
	minRTO  time.Duration // the floor the stalls are measured against
	skipped string
	// bytes is what the operations completed OK moved from start to
	// drain (a profile's span).
	bytes uint64
	drain string // why the drain after the window did not finish, if not
}

func (r result) rate() float64 { return float64(r.ops) / r.wall.Seconds() }

func (r result) perCPU() float64 {
	if r.cpu <= 0 {
		return 0
	}
	return float64(r.ops) / r.cpu.Seconds()
}

// Run measures every row and the forwarding baseline and prints the
// report; it returns the pass and fail counts.
func Run(ctx context.Context, o Options) (pass, fail int, err error) {
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("pgso%d", os.Getpid())
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	cpuA, cpuB, err := twoCPUs()
	if err != nil {
		return 0, 0, err
	}
	// Two pinned loops hold a P each; the measuring goroutine needs one.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 4)))
	rep := report.New(o.Out)
	rep.Note("bench smallops: %d B operations, %d in flight, initiator on CPU %d, target on CPU %d, busy loops; %v measured a row after %v of warm-up; %s, GOMAXPROCS %d; least congestion window %v (0: the stage's default)",
		Size, o.Window, cpuA, cpuB, o.Duration, o.Duration/5, runtime.Version(), runtime.GOMAXPROCS(0), o.MinCwnd)
	got := map[string]result{}
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		res, err := runRow(ctx, o, r, cpuA, cpuB)
		if err != nil {
			return 0, 0, fmt.Errorf("bench smallops: %s: %w", r.name, err)
		}
		got[r.name] = res
		printRow(o.Out, r.name, res)
	}
	one, err := runRow(ctx, Options{Duration: o.Duration, Window: o.Window, Prefix: o.Prefix, Seed: o.Seed, MinCwnd: o.MinCwnd, MinRTO: o.MinRTO, oneLoop: true, pinOne: true}, rows[0], cpuA, cpuB)
	if err != nil {
		return 0, 0, fmt.Errorf("bench smallops: %s on one loop: %w", rows[0].name, err)
	}
	fmt.Fprintf(o.Out, "FIGURE smallops_%s_one_loop_ops_per_s %.0f\n", rows[0].name, one.rate())
	fmt.Fprintf(o.Out, "FIGURE smallops_%s_one_loop_ops_per_cpu_s %.0f\n", rows[0].name, one.perCPU())
	rep.Note("smallops_%s_one_loop: both endpoints of the in-memory push row on one loop pinned to CPU %d (no cross-core exchange: the CPU a push costs both ends together), %d ops in %v, retransmissions %d timeout + %d early",
		rows[0].name, cpuA, one.ops, one.wall.Round(time.Millisecond), one.retx, one.earlyR)
	mpps, allocs, err := foundation.MemIOForward(cpuB, o.Duration)
	if err != nil {
		return 0, 0, fmt.Errorf("bench smallops: forwarding baseline: %w", err)
	}
	fmt.Fprintf(o.Out, "FIGURE smallops_mem_forwarding_mpps %.3f\n", mpps)
	rtt, err := benchtopo.PingPong(cpuA, cpuB, benchtopo.PingPongRounds)
	if err != nil {
		return 0, 0, fmt.Errorf("bench smallops: %w", err)
	}
	fmt.Fprintf(o.Out, "FIGURE smallops_crosscore_pingpong_ns %.1f\n", float64(rtt.Nanoseconds()))
	rep.Note("smallops_crosscore_pingpong_ns: one cache line's round trip between the pinned CPUs %d and %d (an atomic counter handed back and forth %d times, the median batch of a thousand; CPU %d's core holds CPUs %q, CPU %d's %q): the floor under every exchange of the two-core rows, whose packets, ACKs and ring indexes cross between the loops' CPUs",
		cpuA, cpuB, benchtopo.PingPongRounds, cpuA, benchtopo.CoreSiblings(cpuA), cpuB, benchtopo.CoreSiblings(cpuB))
	fwdOps := mpps * 1e6 / 2

	push := got["mem_push64"]
	rep.Add(report.Ratio{Name: "smallops_push64_per_core", Value: push.rate(), Op: report.AtLeast, Target: 4e6,
		Detail: fmt.Sprintf("64 B pushes in memory, two endpoints each on its own core: %.0f ops/s (%.0f per CPU-second of the busier loop's thread), %d in flight", push.rate(), push.perCPU(), o.Window)})
	var retx uint64
	var lossless []string
	for _, r := range rows {
		if r.where == throughFabric || got[r.name].skipped != "" {
			continue
		}
		g := got[r.name]
		retx += g.retx + g.earlyR
		lossless = append(lossless, fmt.Sprintf("%s %d+%d (%d spurious timeouts, %d asks, %s)", r.name, g.retx, g.earlyR, g.spurious, g.asks, g.stallText()))
	}
	rep.Add(report.Ratio{Name: "smallops_retransmits_without_loss", Value: float64(retx), Op: report.AtMost, Target: 0,
		Detail: fmt.Sprintf("retransmissions (timeout+early, both endpoints) on the rows without loss: %v", lossless)})
	fmt.Fprintf(o.Out, "FIGURE smallops_push64_vs_mem_forwarding %.4f\n", push.rate()/fwdOps)
	rep.Note("smallops_push64_vs_mem_forwarding: %.0f pushes/s ÷ %.0f (mem-port io forwarding %.2f Mpps, two pinned forwarders on CPU %d, over two packets a push: data and ACK; %.3f allocations a packet)",
		push.rate(), fwdOps, mpps, cpuB, allocs)
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// printRow prints a row's figures, e.g. FIGURE smallops_mem_push64_ops_per_s 1730000.
func printRow(w io.Writer, name string, r result) {
	if r.skipped != "" {
		fmt.Fprintf(w, "  # %s skipped: %s\n", name, r.skipped)
		return
	}
	fmt.Fprintf(w, "FIGURE smallops_%s_ops_per_s %.0f\n", name, r.rate())
	fmt.Fprintf(w, "FIGURE smallops_%s_ops_per_cpu_s %.0f\n", name, r.perCPU())
	fmt.Fprintf(w, "  # %s: %d ops in %v (%d failed), retransmissions %d timeout + %d early, fabric losses %d, spurious timeouts %d (%d asked), %s\n",
		name, r.ops, r.wall.Round(time.Millisecond), r.failed, r.retx, r.earlyR, r.fabricLost, r.spurious, r.asks, r.stallText())
	if r.drain != "" {
		fmt.Fprintf(w, "  # %s drain: %s\n", name, r.drain)
	}
}

// stallText says how often each loop was off its CPU for longer than the
// RTO floor in the window: what can make a timeout fire with nothing lost.
func (r result) stallText() string {
	t := fmt.Sprintf("loop stalls > %v:", r.minRTO)
	var longest time.Duration
	for _, c := range r.stalls {
		t += fmt.Sprintf(" %s %d", c.loop, c.n)
		longest = max(longest, c.longest)
	}
	if longest > 0 {
		t += fmt.Sprintf(" (longest %v)", longest.Round(time.Microsecond))
	}
	return t
}

// twoCPUs picks the initiator's and the target's CPUs.
func twoCPUs() (int, int, error) {
	a, b, err := benchtopo.TwoCPUs()
	if err != nil {
		return 0, 0, fmt.Errorf("bench smallops: %w", err)
	}
	return a, b, nil
}

// Addresses of the endpoints (and of the veth ends, which the kernel owns
// and the endpoints do not use).
var (
	ipA    = netip.MustParseAddr("198.18.0.101")
	ipB    = netip.MustParseAddr("198.18.0.102")
	vethA  = netip.MustParsePrefix("198.18.0.1/24")
	vethB  = netip.MustParsePrefix("198.18.0.2/24")
	ifA    = "so0"
	ifB    = "so1"
	frames = 16384
)

// sides is what a row measures: the initiator, the target, the pipelines
// holding them (one or two) and the fabric, if any.
type sides struct {
	pipes    []*app.Pipeline
	ini, tgt *app.Transport
	fab      *fabric.Fabric
	meters   []*stallMeter
	minRTO   time.Duration // the endpoints' floor, the stall meters' threshold
	// cleanup deletes the namespaces, once the pipelines are stopped.
	cleanup func()
}

func (s *sides) stop() error {
	var errs []error
	for _, p := range s.pipes {
		errs = append(errs, p.Stop())
	}
	if s.cleanup != nil {
		s.cleanup()
	}
	return errors.Join(errs...)
}

func runRow(ctx context.Context, o Options, r row, cpuA, cpuB int) (res result, err error) {
	s := &sides{minRTO: cmp.Or(o.MinRTO, app.DefaultMinRTO)}
	defer func() { err = errors.Join(err, s.stop()) }()
	switch r.where {
	case inMemory, throughFabric:
		ports := []string{"mem:so/0", "mem:so/1"}
		if r.where == throughFabric {
			ports = []string{"mem:so-a/0", "mem:so-a/1", "mem:so-b/0", "mem:so-b/1"}
		}
		lcores, tl := []app.Lcore{{Name: "initiator", CPU: cpuA}, {Name: "target", CPU: cpuB}}, 1
		if o.oneLoop {
			cpu := -1
			if o.pinOne {
				cpu = cpuA
			}
			lcores, tl = []app.Lcore{{Name: "both", CPU: cpu}}, 0
		}
		p, err := newPipeline(r.name, ports, lcores, o.idle)
		if err != nil {
			return res, err
		}
		s.pipes = append(s.pipes, p)
		iniPort, tgtPort := 0, len(ports)-1
		if r.where == throughFabric {
			prof, err := fabric.ParseProfile(LossProfile)
			if err != nil {
				return res, err
			}
			if s.fab, err = p.AddFabric(app.FabricOptions{A: 1, B: 2, AtoB: prof, BtoA: prof, Seed: o.Seed, Loop: tl}); err != nil {
				return res, err
			}
		}
		if err := s.addTransports(o, r, p, tgtPort, tl, p, iniPort, 0); err != nil {
			return res, err
		}
		for i, l := range lcores {
			if err := s.addMeter(p, i, l.Name); err != nil {
				return res, err
			}
		}
	case overAFXDP:
		if os.Geteuid() != 0 {
			return result{skipped: "needs root (namespaces, veth, AF_XDP sockets)"}, nil
		}
		a, b, cleanup, err := vethPair(o.Prefix)
		if err != nil {
			return res, err
		}
		s.cleanup = cleanup
		pt, err := newPipeline(r.name+"-b", []string{fmt.Sprintf("afxdp:%s?netns=%s", ifB, b.Name)}, []app.Lcore{{Name: "target", CPU: cpuB}}, o.idle)
		if err != nil {
			return res, err
		}
		s.pipes = append(s.pipes, pt)
		pi, err := newPipeline(r.name+"-a", []string{fmt.Sprintf("afxdp:%s?netns=%s", ifA, a.Name)}, []app.Lcore{{Name: "initiator", CPU: cpuA}}, o.idle)
		if err != nil {
			return res, err
		}
		s.pipes = append(s.pipes, pi)
		if err := s.addTransports(o, r, pt, 0, 0, pi, 0, 0); err != nil {
			return res, err
		}
		if err := errors.Join(s.addMeter(pi, 0, "initiator"), s.addMeter(pt, 0, "target")); err != nil {
			return res, err
		}
	}
	for i := len(s.pipes) - 1; i >= 0; i-- { // the target first
		start := s.pipes[i].Start
		if o.label && len(s.pipes) == 2 {
			side := [2]string{"target", "initiator"}[i]
			pprof.Do(ctx, pprof.Labels("side", side), func(context.Context) { err = start() })
		} else {
			err = start()
		}
		if err != nil {
			return res, err
		}
	}
	var loops []*lcore.Loop
	for _, p := range s.pipes {
		loops = append(loops, p.Loops()...)
	}
	return s.measure(ctx, o, r, loops)
}

// newPipeline makes a row's pipeline; its loops busy-poll unless idle
// names another policy (the zero IdleMode is IdleBusy; BenchmarkRow's
// profiles sleep).
func newPipeline(name string, ports []string, lcores []app.Lcore, idle lcore.IdleMode) (*app.Pipeline, error) {
	return app.New(app.Options{
		Pool:   mbuf.Options{Name: "bench-smallops-" + name, Frames: frames},
		Ports:  ports,
		Lcores: lcores,
		Idle:   lcore.IdlePolicy{Mode: idle},
		Clock:  clock.NewReal(),
	})
}

// addTransports adds the target (port tp, loop tl of pipeline pt) and the
// initiator (port ip, loop il of pi) of row r.
func (s *sides) addTransports(o Options, r row, pt *app.Pipeline, tp, tl int, pi *app.Pipeline, ip, il int) error {
	size := Size
	if o.size != 0 {
		size = o.size
	}
	to := app.TransportOptions{Role: "target", Port: tp, Loop: tl, LocalIP: ipB, Window: o.Window, Sizes: []int{size}, Seed: o.Seed + 1, MinRTO: o.MinRTO}
	iop := app.TransportOptions{Role: "initiator", Port: ip, Loop: il, LocalIP: ipA, Window: o.Window, Sizes: []int{size}, Conns: 2, Seed: o.Seed, MinCwnd: o.MinCwnd, MinRTO: o.MinRTO,
		Peer: rt.PeerAddr{MAC: [6]byte(pt.Port(tp).Info().MAC), IP: ipB}}
	if r.send {
		// One push, then Sends alone.
		to.PostRecv = min(o.Window, txn.DefaultRecvDepth)
		iop.Count, iop.Sends = 1, o.Window
	}
	var err error
	if s.tgt, err = pt.AddTransport(to); err != nil {
		return err
	}
	iop.RegionKey = s.tgt.Region.Key
	s.ini, err = pi.AddTransport(iop)
	return err
}

// addMeter puts a stall meter on loop i (named name) of pipeline p.
func (s *sides) addMeter(p *app.Pipeline, i int, name string) error {
	m := newStallMeter(name, s.minRTO)
	s.meters = append(s.meters, m)
	return p.Add(app.Stage{Stage: m, Loop: i})
}

// stalls returns each meter's count so far.
func (s *sides) stalls() []stallCount {
	out := make([]stallCount, len(s.meters))
	for i, m := range s.meters {
		out[i] = stallCount{loop: m.loop, n: m.stalls.Load(), longest: time.Duration(m.longest.Load())}
	}
	return out
}

// counts returns the operations completed and failed so far.
func (s *sides) counts(send bool) (done, failed uint64) {
	if send {
		st := s.ini.Sends.Stats()
		return st.Completed, st.Failed
	}
	st := s.ini.Load.Stats()
	return st.Completed, st.Failed
}

func (s *sides) retransmits() (timeout, early, spurious, asks uint64) {
	for _, t := range []*app.Transport{s.ini, s.tgt} {
		st := t.Endpoint.Transport().Stats()
		timeout += st.TxRetransmit
		early += st.TxEarlyRetransmit
		spurious += st.SpuriousRTO
		asks += st.TimeoutAsks
	}
	return timeout, early, spurious, asks
}

func (s *sides) fabricLost() uint64 {
	if s.fab == nil {
		return 0
	}
	st := s.fab.Stats()
	var n uint64
	for _, d := range []fabric.DirStats{st.AtoB, st.BtoA} {
		n += d.LossRandom + d.LossBurst + d.QueueFull + d.LimitFull + d.PathQueueFull + d.PathLossDrops + d.PathDownDrops + d.LinkDown + d.LinkCut
	}
	return n
}

// loopsCPU reads each pinned loop's thread's CPU time (none for an
// unpinned loop, which has no thread of its own).
func loopsCPU(loops []*lcore.Loop) ([]time.Duration, error) {
	var out []time.Duration
	for _, l := range loops {
		if l.CPU() < 0 {
			continue
		}
		d, err := l.ThreadCPU()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// measure waits out the warm-up, then counts over the window, then drains.
func (s *sides) measure(ctx context.Context, o Options, r row, loops []*lcore.Loop) (result, error) {
	wait := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	if err := wait(o.Duration / 5); err != nil {
		return result{}, err
	}
	if s.ini.Load.Down() {
		return result{}, fmt.Errorf("the initiator's connections failed: %v", s.ini.ConnErr())
	}
	cpu0, err := loopsCPU(loops)
	if err != nil {
		return result{}, err
	}
	d0, f0 := s.counts(r.send)
	rt0, er0, sp0, as0 := s.retransmits()
	st0 := s.stalls()
	l0 := s.fabricLost()
	t0 := time.Now()
	if err := wait(o.Duration); err != nil {
		return result{}, err
	}
	d1, f1 := s.counts(r.send)
	// A loaded machine can stall a short window (a timeout at 1 % loss):
	// it is stretched until an operation completes, within reason.
	for d1 == d0 && time.Since(t0) < max(10*o.Duration, 10*time.Second) {
		if err := wait(10 * time.Millisecond); err != nil {
			return result{}, err
		}
		d1, f1 = s.counts(r.send)
	}
	wall := time.Since(t0)
	cpu1, err := loopsCPU(loops)
	if err != nil {
		return result{}, err
	}
	rt1, er1, sp1, as1 := s.retransmits()
	res := result{ops: d1 - d0, failed: f1 - f0, wall: wall, retx: rt1 - rt0, earlyR: er1 - er0, spurious: sp1 - sp0, asks: as1 - as0, fabricLost: s.fabricLost() - l0}
	res.stalls, res.minRTO = s.stalls(), s.minRTO
	for i := range res.stalls {
		res.stalls[i].n -= st0[i].n
	}
	for i := range cpu1 {
		res.cpu = max(res.cpu, cpu1[i]-cpu0[i])
	}
	if !s.ini.Drain() {
		// Reported, not fatal: the window was measured; Stop fails what
		// is left.
		posted, done, failed := s.ini.Load.Stats().Posted, d1, f1
		if r.send {
			st := s.ini.Sends.Stats()
			posted, done, failed = st.Posted, st.Completed, st.Failed
		} else {
			done, failed = s.counts(false)
		}
		t, e, _, _ := s.retransmits()
		res.drain = fmt.Sprintf("%d of %d operations still outstanding 5s after posting stopped (%d failed; retransmissions so far %d timeout + %d early; %v)",
			posted-done-failed, posted, failed, t, e, s.ini.ConnErr())
	}
	if r.send {
		res.bytes = s.ini.Sends.Stats().Bytes
	} else {
		res.bytes = s.ini.Load.Stats().Bytes
	}
	if res.ops == 0 {
		return res, errors.New("no operation completed in the measured window")
	}
	if res.failed > 0 {
		return res, fmt.Errorf("%d operations failed (%v)", res.failed, s.ini.ConnErr())
	}
	return res, nil
}

// vethPair creates namespaces PREFIX-a and PREFIX-b joined by a veth pair
// and returns them with a function deleting both.
func vethPair(prefix string) (a, b *netns.NS, cleanup func(), err error) {
	return benchtopo.VethPair(prefix, ifA, ifB, vethA, vethB)
}
