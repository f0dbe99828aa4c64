package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/internal/units"
	_ "github.com/peregrine-net/peregrine/pmd/all"
)

// defaultDrain is how long the transport demo's drain, after posting
// stops, may go without an operation completing: far more than a healthy
// run needs between completions, so only a stall fails it
// (app.TransportDemo.Drain).
const defaultDrain = 10 * time.Second

// demoDrainCheck is the check that the demo's operations all ended after
// its load stopped, the drain never going stall without one completing.
func demoDrainCheck(drained bool, ls txnload.Stats, stall, took time.Duration) check {
	return check{drained, fmt.Sprintf("every outstanding operation completed after the load stopped, never %v without one completing (drain %v; %d still outstanding)",
		stall, formatDur(took), ls.Posted-ls.Completed-ls.Failed)}
}

type demoConfig struct {
	duration time.Duration
	drain    time.Duration // transport: how long the outstanding operations may take to end after posting stops
	size     string
	burst    int
	lcores   string
	idle     string
	frames   int
	obs      observeFlags
	quiet    bool
	veth     bool
	driver   string
	rate     string
	workload string
	profile  string
	window   int
	seed     uint64
	target   time.Duration
	minRTO   time.Duration
	capture  string
	shards   int
}

func newDemoCommand() *cobra.Command {
	var cfg demoConfig
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the main job on its embedded default (in-memory ports, no privileges)",
		Long: `demo runs the reliable transport end to end (the default --workload transport):
an initiator keeps --window pushes (512 B and 4 KiB unsolicited; 64 KiB, 256 KiB
and 1 MiB solicited through the target's grants) and pulls outstanding on four
connections, two ordered and two unordered, to a target through the fabric
emulator (--profile, each direction; by default four paths, each its own 1 Gbit/s
link with its own delay). Large messages go with IOI forwarding: an in-order
head and tail on their flow's path, the middle sprayed over every path. It
prints live per-second stats and a summary (goodput, ops/s, latency
p50/p99/p999, grants, reorder-engine waits, retransmissions, drops by reason;
IOI's messages by mode, packets by phase, peak OPC/UPC, waits for UPC == 0,
threshold, how the senders steered around failing paths, each path's load),
and verifies that every operation completed exactly once with no error, in posting order on ordered connections, with its
bytes where they belong, that IOI sprayed over every path, and that every
buffer is back in the pool. It exits 0 only if verification passes.

--workload forward runs the datapath foundation instead: a generator →
forwarder → sink pipeline over in-memory port pairs, verified in order.
--workload roce runs the RoCEv2 QP-translation stage (docs/qp-translation.md) between requesters
and a host on one lcore, closing and reopening QPs as it runs: frames still
in flight for a closed QP must be dropped as retired, none may reach the
QP now in its context (demoroce.go).

--shards N (a power of two; the transport workload in memory) shards both
endpoints: N initiator and N target endpoints over a mem pair of N queues, each
endpoint's shard in its connections' CID bits, shard i of both on lcore i mod the
--lcores count, initiator shard i paired with target shard i through queue i.
Pushes and pulls (4 KiB unsolicited, 64 KiB through grants) on two connections a
shard (one ordered, one unordered) and delivery-index Sends run on every shard;
the summary prints each shard's ops, goodput, retransmissions and frames steered
in software, and their sum, and verifies every operation completed exactly once.
What does not run sharded: the fabric emulator and IOI, which sprays over its
paths (the fabric joins one queue of each side; --profile is refused), the veth
topology (--veth is refused; peregrine transport --shards runs sharded over
AF_XDP veth), --capture (it mirrors one queue), global QP numbers and the MCSQ
part (they serve one endpoint per side).

Layout with two lcores: lcore A runs the initiator (or the generator and the
sink), lcore B the fabric and the target (or the forwarder); frames cross
between them through mem port pairs (handles only, no copies).

With --veth (root) the same runs across three network namespaces the demo
creates (198.18.0.0/15 only) and removes again (also on SIGINT, SIGTERM or an
error; hack/topo.sh down pgdemo removes what a kill -9 leaves), joined by veth pairs and opened
with --driver (afxdp or afpacket): the initiator (or generator) in one, the
fabric (or forwarder) in a second, the target (or sink) in a third. The forward
workload sends at --rate there (default 50kpps, safe on a busy two-core machine).
The transport workload's MCSQ part then crosses a veth pair of its own, from the
initiator's namespace (198.19.0.1) to the target's, where its switch of target
hosts sits behind a bridge.`,
		Example: `  peregrine demo
  peregrine demo --profile loss=1%,delay=50us --window 64 --duration 10s
  peregrine demo --lcores 0 --idle busy     # everything on one core
  peregrine demo --lcores 0,1 --shards 2    # both endpoints sharded, shard i on lcore i
  peregrine demo --workload forward --size 1518 --burst 64
  sudo peregrine demo --veth --driver afxdp
  sudo peregrine demo --veth --workload forward --driver afpacket --rate 100kpps`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return cfg.validate(cmd.Flags()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			// SIGTERM as well as SIGINT: either ends the run through the
			// same path, which removes --veth's namespaces.
			ctx, stop := notifyContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			ok, err := runDemo(ctx, cfg, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !ok {
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	cfg.obs.registerMetrics(f)
	f.BoolVar(&cfg.obs.json, "json", false, "print the per-second figures and the summary (with every check) as JSON lines instead of text")
	f.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long operations are posted (or the generator sends); positive")
	f.DurationVar(&cfg.drain, "drain", defaultDrain, "transport: how long the drain after posting stops may go without an operation completing before the run is judged failed (a stall; 0: the default)")
	f.StringVar(&cfg.size, "size", "64", "forward workload: frame size in bytes without FCS: N, MIN-MAX, or imix")
	f.IntVar(&cfg.burst, "burst", 32, "forward workload: frames per burst (1..256)")
	f.StringVar(&cfg.lcores, "lcores", "", "CPUs for the poll loops, e.g. 0,1 (one CPU runs every stage on one loop; default: the first two CPUs this process may use)")
	idleVar(f, &cfg.idle)
	f.IntVar(&cfg.frames, "frames", 16384, "frames in the packet pool: at least 1024 per lcore, 512 more for the transport workload, 8192 more with --veth --driver afxdp")
	f.BoolVar(&cfg.quiet, "quiet", false, "no live per-second stats")
	f.BoolVar(&cfg.veth, "veth", false, "run across three network namespaces over veth pairs (needs root)")
	f.StringVar(&cfg.driver, "driver", "afxdp", "with --veth: the port driver, afxdp or afpacket")
	f.StringVar(&cfg.rate, "rate", "", "forward workload: generator rate (e.g. 200kpps, 1gbit; default: as fast as possible, or 50kpps with --veth)")
	f.StringVar(&cfg.workload, "workload", "transport", "transport (pushes and pulls through the fabric, verified), forward (gen → fwd → sink) or roce (RoCEv2 QP translation with QP churn)")
	f.StringVar(&cfg.profile, "profile", app.DemoProfile, "transport workload: the fabric's impairment profile, each direction (see peregrine fabric --help)")
	f.IntVar(&cfg.window, "window", 32, "transport workload: operations outstanding at once")
	f.Uint64Var(&cfg.seed, "seed", 1, "transport workload: seed of the fabric and the endpoints")
	f.DurationVar(&cfg.target, "target-delay", 200*time.Microsecond, "transport workload: Swift's base target delay (Google's NIC default is 25us; poll loops that sleep need more)")
	f.DurationVar(&cfg.minRTO, "min-rto", time.Millisecond, "transport workload: the shortest retransmit timeout")
	f.IntVar(&cfg.shards, "shards", 1, "transport workload: shards of each endpoint, a power of two (1: unsharded); shard i of both on lcore i mod the --lcores count, over a mem pair of that many queues")
	f.StringVar(&cfg.capture, "capture", "", "mirror the initiator's (or the generator's) port, both directions, to this pcap file (tools/wireshark/peregrine.lua dissects it)")
	return cmd
}

// memCapture is --capture for the in-memory transport demo, whose ports
// AddTransportDemo makes (with --veth the port spec carries it).
func (c demoConfig) memCapture() string {
	if c.veth {
		return ""
	}
	return c.capture
}

// demoLcores names the demo's loops: lcore A, and lcore B with two CPUs.
func demoLcores(cpus []int) []app.Lcore {
	lcs := []app.Lcore{{Name: "lcore-a", CPU: cpus[0]}}
	if len(cpus) == 2 {
		lcs = append(lcs, app.Lcore{Name: "lcore-b", CPU: cpus[1]})
	}
	return lcs
}

func defaultLcores() []int {
	var set []int
	for i := range runtime.NumCPU() {
		set = append(set, i)
	}
	return set[:min(2, len(set))]
}

func runDemo(ctx context.Context, cfg demoConfig, out io.Writer) (bool, error) {
	if cfg.duration <= 0 {
		return false, fmt.Errorf("--duration %v: must be positive, e.g. 5s", cfg.duration)
	}
	out, js := jsonOutput(cfg.obs.json, out)
	cpus := defaultLcores()
	if cfg.lcores != "" {
		var err error
		if cpus, err = lcore.ParseCPUList(cfg.lcores); err != nil {
			return false, fmt.Errorf("--lcores: %w", err)
		}
		if len(cpus) > 2 {
			return false, fmt.Errorf("--lcores %s: the demo uses one or two lcores", cfg.lcores)
		}
	}
	idle, err := lcore.ParseIdleMode(cfg.idle)
	if err != nil {
		return false, fmt.Errorf("--idle: %w", err)
	}
	switch cfg.workload {
	case "", "transport":
		if cfg.window < 1 || cfg.window > 4096 {
			return false, fmt.Errorf("--window %d: use 1..4096", cfg.window)
		}
		if cfg.veth {
			if err := driverCheck(cfg.driver); err != nil {
				return false, err
			}
		}
		if cfg.shards > 1 {
			return runDemoSharded(ctx, cfg, cpus, idle, out, js) // demo_shard.go
		}
		return runDemoTransport(ctx, cfg, cpus, idle, out, js)
	case "forward":
	case "roce":
		return runDemoRoCE(ctx, cfg, cpus, idle, out, js) // demoroce.go
	default:
		return false, fmt.Errorf("--workload %q: use transport, forward or roce", cfg.workload)
	}
	sizes, err := traffic.ParseSizes(cfg.size, traffic.MaxFrame)
	if err != nil {
		return false, fmt.Errorf("--size: %w", err)
	}

	specs := app.ForwardDemoPorts()
	if cfg.veth {
		topo, err := demoTopology(cfg.driver)
		if err != nil {
			return false, err
		}
		defer topo.Delete()
		onKill(ctx, func() { _ = topo.Delete() })
		specs = topo.Specs()
		if cfg.rate == "" {
			cfg.rate = "50kpps"
		}
	}
	specs[0] = app.WithCapture(specs[0], cfg.capture)
	rate, err := parseRate(cfg.rate, sizes.Mean())
	if err != nil {
		return false, fmt.Errorf("--rate: %w", err)
	}
	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "demo", Frames: cfg.frames},
		Ports:  specs,
		Lcores: demoLcores(cpus),
		Idle:   lcore.IdlePolicy{Mode: idle},
		Clock:  clock.NewReal(),
	})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(p)
	defer p.Stop() // on early returns; the checks below report the normal stop
	demo, err := p.AddForwardDemo(app.ForwardDemoOptions{Burst: cfg.burst, Sizes: sizes, Rate: rate})
	if err != nil {
		return false, err
	}
	gen, forwarder, sink := demo.Gen, demo.Fwd, demo.Sink

	over := "mem ports"
	if cfg.veth {
		over = cfg.driver + " ports over veth across three namespaces"
	}
	fmt.Fprintf(out, "peregrine demo: gen → fwd → sink over %s, %d lcore(s) %v, frames %s B, burst %d, for %v\n",
		over, len(cpus), cpus, sizes, cfg.burst, cfg.duration)
	if err := p.Start(); err != nil {
		return false, flagError(err, map[string]string{"Lcores": "--lcores"})
	}
	pool := p.Pool()
	live := newDemoMeter(gen, forwarder, sink, pool)
	sendTime, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: time.Second, Tick: func(elapsed time.Duration) {
		gs := gen.Stats()
		js.interval(elapsed.Seconds(), map[string]float64{"generated_frames": float64(gs.Sent), "generated_bytes": float64(gs.Bytes),
			"forwarded_frames": float64(forwarder.Stats().Tx), "received_frames": float64(sink.Frames()), "pool_in_use": float64(pool.InUse())})
		if !cfg.quiet {
			fmt.Fprintln(out, live.line(elapsed))
		}
	}})
	if err != nil {
		return false, err
	}
	drained := drainOrHurry(ctx, func() bool { return demo.Drain(2 * time.Second) })
	runErr := p.StopLoops()
	// Close's leak check and the pool's close are reported by the checks.
	_ = p.Close()

	gs, fs, ss := gen.Stats(), forwarder.Stats(), sink.Stats()
	lat := sink.Latency()
	secs := sendTime.Seconds()
	fmt.Fprintf(out, "\nsummary after %.2fs:\n", secs)
	fmt.Fprintf(out, "  generated %d frames, %d bytes: %.2f Mpps, %.2f Gbit/s (L2, without FCS)\n",
		gs.Sent, gs.Bytes, float64(gs.Sent)/secs/1e6, float64(gs.Bytes)*8/secs/1e9)
	fmt.Fprintf(out, "  forwarded %d (dropped %d), received %d in order %d, gaps %d, late %d, foreign %d\n",
		fs.Tx, fs.Dropped, ss.Received, ss.InOrder, ss.Gaps, ss.Late, ss.Foreign)
	fmt.Fprintf(out, "  latency gen→sink: %s\n", latencies(&lat))
	fmt.Fprintf(out, "  pool: %d frames, %d in use after stop; allocation failures %d\n", pool.Frames(), pool.InUse(), pool.Stats().AllocFails)

	checks := []check{
		errCheck("poll loops exited cleanly", runErr),
		{drained, fmt.Sprintf("pipeline drained within 2s of the generator stopping (%d frames sent, %d received)", gs.Sent, sink.Frames())},
		progress(gs.Sent > 0, fmt.Sprintf("frames were sent (%d)", gs.Sent)),
		{ss.Received == gs.Sent, fmt.Sprintf("every frame sent was received (%d of %d)", ss.Received, gs.Sent)},
		{ss.InOrder == gs.Sent && ss.Late == 0 && ss.Gaps == 0, "every frame arrived in order"},
		{ss.Foreign == 0, "no foreign frames"},
		leakCheck(pool),
	}
	checks = append(checks, errCheck("pool closed", pool.Close()))
	capLines, capChecks := captureChecks(p.Ports())
	for _, l := range capLines {
		fmt.Fprintf(out, "  %s\n", l)
	}
	checks = append(checks, capChecks...)
	js.summary(secs, map[string]any{"generated_frames": gs.Sent, "generated_bytes": gs.Bytes, "forwarded_frames": fs.Tx, "forward_dropped": fs.Dropped,
		"received_frames": ss.Received, "in_order": ss.InOrder, "gaps": ss.Gaps, "late": ss.Late, "foreign": ss.Foreign,
		"latency_p50_ns": lat.Quantile(0.5), "latency_p99_ns": lat.Quantile(0.99), "latency_p999_ns": lat.Quantile(0.999), "pool_in_use": pool.InUse()}, checks, interrupted)
	return report(out, checks, interrupted), nil
}

// demoMeter turns cumulative counters into per-second rates.
type demoMeter struct {
	gen        *traffic.Generator
	fwd        *fwd.Forwarder
	sink       *traffic.Sink
	pool       *mbuf.Pool
	last       time.Duration
	lastGen    traffic.GeneratorStats
	lastFwd    uint64
	lastFrames uint64
}

func newDemoMeter(g *traffic.Generator, f *fwd.Forwarder, s *traffic.Sink, p *mbuf.Pool) *demoMeter {
	return &demoMeter{gen: g, fwd: f, sink: s, pool: p}
}

func (m *demoMeter) line(now time.Duration) string {
	gs, fw, frames := m.gen.Stats(), m.fwd.Stats().Tx, m.sink.Frames()
	dt := (now - m.last).Seconds()
	lat := m.sink.Latency()
	s := liveLine(now, fmt.Sprintf("gen %s %s | fwd %s | sink %s, p99 %s | pool %d/%d in use",
		formatRate(float64(gs.Sent-m.lastGen.Sent)/dt), formatBits(float64(gs.Bytes-m.lastGen.Bytes)*8/dt),
		formatRate(float64(fw-m.lastFwd)/dt), formatRate(float64(frames-m.lastFrames)/dt),
		units.FormatLatency(lat.Quantile(0.99), lat.Count()), m.pool.InUse(), m.pool.Frames()))
	m.last, m.lastGen, m.lastFwd, m.lastFrames = now, gs, fw, frames
	return s
}

// driverCheck refuses a --driver demo --veth cannot use.
func driverCheck(driver string) error {
	return flagError(app.CheckVethDriver(driver), map[string]string{"Driver": "--driver"})
}

// demoTopology builds the three namespaces of demo --veth under a name
// unique to this process (app.NewVethTopology).
func demoTopology(driver string) (*app.VethTopology, error) {
	topo, err := app.NewVethTopology("pgdemo", driver)
	if err != nil {
		return nil, fmt.Errorf("--veth: %w", flagError(err, map[string]string{"Driver": "--driver"}))
	}
	return topo, nil
}

// demoJSONInterval is the transport demo's cumulative counters for a
// --json interval line.
func demoJSONInterval(load *txnload.Load, initiator, target *txn.Endpoint, pool *mbuf.Pool) map[string]float64 {
	s := load.Stats()
	return map[string]float64{
		"ops_completed": float64(s.Completed), "ops_failed": float64(s.Failed), "goodput_bytes": float64(s.Bytes),
		"retransmits": float64(initiator.Transport().Stats().TxRetransmit + target.Transport().Stats().TxRetransmit),
		"pool_in_use": float64(pool.InUse()),
	}
}

// demoJSONSummary is the transport demo's totals for the --json summary.
func demoJSONSummary(ls txnload.Stats, ir, tr rt.Stats, fs fabric.Stats, lat *hist.Histogram, pool *mbuf.Pool) map[string]any {
	drops := map[string]uint64{}
	for _, d := range []fabric.DirStats{fs.AtoB, fs.BtoA} {
		for reason, n := range map[string]uint64{"loss_random": d.LossRandom, "loss_burst": d.LossBurst, "queue_full": d.QueueFull,
			"limit_full": d.LimitFull, "ttl_expired": d.TTLExpired} {
			drops["fabric_"+reason] += n
		}
	}
	for reason, n := range map[string]uint64{"bad_checksum": ir.RxBadChecksum + tr.RxBadChecksum, "duplicate": ir.RxDuplicate + tr.RxDuplicate,
		"stale_psn": ir.RxStalePSN + tr.RxStalePSN, "out_of_window": ir.RxOutOfWindow + tr.RxOutOfWindow, "malformed": ir.RxMalformed + tr.RxMalformed,
		"not_transport": ir.RxNotTransport + tr.RxNotTransport, "refused": ir.RxRefused + tr.RxRefused} {
		drops["transport_"+reason] = n
	}
	return map[string]any{
		"ops_posted": ls.Posted, "ops_completed": ls.Completed, "ops_failed": ls.Failed, "goodput_bytes": ls.Bytes,
		"latency_p50_ns": lat.Quantile(0.5), "latency_p99_ns": lat.Quantile(0.99), "latency_p999_ns": lat.Quantile(0.999), "latency_max_ns": lat.Max(),
		"retransmits_initiator": ir.TxRetransmit, "retransmits_target": tr.TxRetransmit,
		"early_retransmits_initiator": ir.TxEarlyRetransmit, "early_retransmits_target": tr.TxEarlyRetransmit,
		"drops": drops, "pool_in_use": pool.InUse(),
	}
}
