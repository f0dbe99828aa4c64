package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	benchreport "github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// scaleOptions configure bench scale.
type scaleOptions struct {
	duration time.Duration
	window   int
	small    bool // --count small: short windows, sleeping loops (CI runs it once)
	seed     uint64
}

func newBenchScaleCommand() *cobra.Command {
	var (
		o     scaleOptions
		count string
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "sharded transport and multi-queue forwarding: two shards (queues) on two cores ÷ one on one core, in memory and over AF_XDP veth",
		Long: `scale runs a sharded transport initiator and target over an in-memory port
pair of one queue per shard (steer=queue: the initiator's shard i sends on
queue i, which is the target's shard i). Shard i of both endpoints runs on
loop i, pinned to core i; one shard runs both endpoints on one loop on one
core, so both sides of each ratio have the same cores per shard. Each row
measures the operations completed per second with --window in flight per
shard, on two connections per shard:

  transport_2shards_vs_1_ops_mem       64 B pushes, 2 shards ÷ 1  (goal >= 1.8)
  transport_2shards_vs_1_goodput_mem   64 KiB pushes, 2 shards ÷ 1 (goal >= 1.8)
  steered_in_software_fraction         frames a shard handed to another (goal = 0)

As root it then measures over AF_XDP (copy mode) on veth pairs created with
one queue per shard or forwarding queue:

  fwd_2queues_vs_1_afxdp_veth          io forwarding of 64 B frames between two
                                       veth pairs (gen ↔ fwd ↔ sink, three
                                       namespaces), 2 queues ÷ 1 (goal >= 1.6)
  transport_2shards_vs_1_afxdp_veth    64 B pushes, 2 shards ÷ 1 (goal >= 1.5)
  steered_in_software_fraction_afxdp_veth  as above, on AF_XDP (goal = 0)

In the forwarding rows loop q, pinned to core q, runs queue q's generator
(as fast as it can), forwarder and sink: veth delivers what is sent on
transmit queue q on the peer's receive queue q, so each core carries one
whole chain and both sides of the ratio have the same cores per queue (the
generator and sink share the forwarder's cores: there are two). Beside the
ratio it prints the kernel's share (system, irq and softirq time in
/proc/stat) of each core over the window: veth copy mode does its copies in
the kernel, which bounds what a second queue can add. Without root these
rows print as SKIP.

Each row prints its per-shard (per-queue) figures and their sum. --count
small runs short windows on sleeping, unpinned loops (a check that
everything runs, not a measurement).`,
		Example: `  peregrine bench scale
  peregrine bench scale --count small   # a quick look`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if count != "small" && count != "full" {
				return usage(fmt.Errorf("--count %q: use small (a quick run) or full", count))
			}
			o.small = count == "small"
			return usage(
				checkPositiveDuration("duration", o.duration, 10*time.Millisecond),
				checkInt("window", o.window, 1, rt.MaxWindowSize),
			)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := runBenchScale(ctx, cmd.OutOrStdout(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.duration, "duration", 2*time.Second, "each row's measured window (after a fifth of it of warm-up; --count small: at most 100ms)")
	f.IntVar(&o.window, "window", 32, "operations kept in flight per shard")
	f.StringVar(&count, "count", "full", "full, or small: short windows on sleeping loops (CI)")
	f.Uint64Var(&o.seed, "seed", 1, "seeds the endpoints")
	return cmd
}

// scaleRow is one transport measurement: shards of each endpoint, push
// size, and whether the ports are AF_XDP on a veth pair (else in memory).
type scaleRow struct {
	shards, size int
	veth         bool
}

func (r scaleRow) name() string {
	size := "push64"
	if r.size != 64 {
		size = fmt.Sprintf("push%dk", r.size>>10)
	}
	where := "mem"
	if r.veth {
		where = "veth"
	}
	return fmt.Sprintf("%s_%s_%dshard", where, size, r.shards)
}

// scaleResult is a row's figures: in all, and per shard.
type scaleResult struct {
	ops, bytes uint64
	wall       time.Duration
	perShard   []uint64 // operations completed per initiator shard
	steer      shard.Stats
	missteered []uint64 // the target's XDP count per queue (AF_XDP only)
}

func (r scaleResult) rate() float64    { return float64(r.ops) / r.wall.Seconds() }
func (r scaleResult) goodput() float64 { return float64(r.bytes) * 8 / r.wall.Seconds() }

func runBenchScale(ctx context.Context, out io.Writer, o scaleOptions) (pass, fail int, err error) {
	if o.small {
		o.duration = min(o.duration, 100*time.Millisecond)
	}
	cpus, err := scaleCPUs()
	if err != nil {
		return 0, 0, err
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 4)))
	rep := benchreport.New(out)
	rep.Note("bench scale: in memory, shard i of both endpoints on CPU %d/%d (one shard: both endpoints on CPU %d), %d in flight per shard on 2 connections each, %v measured a row after %v of warm-up; %s, GOMAXPROCS %d",
		cpus[0], cpus[1], cpus[0], o.window, o.duration, o.duration/5, runtime.Version(), runtime.GOMAXPROCS(0))
	got := map[scaleRow]scaleResult{}
	steer, err := runScaleRows(ctx, out, o, cpus, got, []scaleRow{{1, 64, false}, {2, 64, false}, {1, 64 << 10, false}, {2, 64 << 10, false}})
	if err != nil {
		return 0, 0, err
	}
	ratio := func(name string, size int, veth bool, target float64, v func(scaleResult) float64, what string) {
		one, two := got[scaleRow{1, size, veth}], got[scaleRow{2, size, veth}]
		rep.Add(benchreport.Ratio{Name: name, Value: v(two) / v(one), Op: benchreport.AtLeast, Target: target,
			Detail: fmt.Sprintf("%s: 2 shards on 2 cores %.4g ÷ 1 shard on 1 core %.4g", what, v(two), v(one))})
	}
	// The machine's own ceiling for the ratios, measured in the same run.
	ceiling, err := machineScaling(cpus[:], max(o.duration, 100*time.Millisecond))
	if err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(out, "FIGURE scale_machine_2cores_vs_1 %.3f\n", ceiling)
	fmt.Fprintf(out, "  # the machine's own two-core scaling: CPU-bound work on a %d KiB working set per thread, two threads on CPUs %d and %d ÷ one on CPU %d, same run — no shared-nothing program's 2-vs-1 ratio exceeds it (2.0 on separate physical cores)\n",
		ceilingWorkingSet>>10, cpus[0], cpus[1], cpus[0])
	ratio("transport_2shards_vs_1_ops_mem", 64, false, 1.8, scaleResult.rate, "64 B pushes/s")
	ratio("transport_2shards_vs_1_goodput_mem", 64<<10, false, 1.8, scaleResult.goodput, "64 KiB pushes, goodput bit/s")
	rep.Add(benchreport.Ratio{Name: "steered_in_software_fraction", Value: steer.SteeredFraction(), Op: benchreport.AtMost, Target: 0,
		Detail: fmt.Sprintf("mem steer=queue, every row: %d of %d frames received were handed to another shard (%d dropped on a full ring)", steer.SteeredOut, steer.Received, steer.HandoffDropped)})

	if os.Geteuid() != 0 {
		why := "needs root (network namespaces, veth pairs, AF_XDP sockets): run bench scale as root"
		for _, r := range []benchreport.Ratio{
			{Name: "fwd_2queues_vs_1_afxdp_veth", Op: benchreport.AtLeast, Target: 1.6},
			{Name: "transport_2shards_vs_1_afxdp_veth", Op: benchreport.AtLeast, Target: 1.5},
			{Name: "steered_in_software_fraction_afxdp_veth", Op: benchreport.AtMost, Target: 0},
		} {
			r.Skipped, r.Detail = true, why
			rep.Add(r)
		}
	} else {
		if err := runFwdRows(ctx, out, rep, o, cpus); err != nil {
			return 0, 0, err
		}
		steer, err := runScaleRows(ctx, out, o, cpus, got, []scaleRow{{1, 64, true}, {2, 64, true}})
		if err != nil {
			return 0, 0, err
		}
		ratio("transport_2shards_vs_1_afxdp_veth", 64, true, 1.5, scaleResult.rate, "AF_XDP veth (copy mode), 64 B pushes/s")
		mis := got[scaleRow{2, 64, true}].missteered
		rep.Add(benchreport.Ratio{Name: "steered_in_software_fraction_afxdp_veth", Value: steer.SteeredFraction(), Op: benchreport.AtMost, Target: 0,
			Detail: fmt.Sprintf("AF_XDP veth, both rows: %d of %d frames received were handed to another shard (%d dropped on a full ring); the target's XDP program saw %v datagrams arrive on another shard's queue (2 shards, per queue)", steer.SteeredOut, steer.Received, steer.HandoffDropped, mis)})
	}
	if o.small {
		rep.Note("--count small: %v windows on sleeping loops; the ratios above are not a measurement", o.duration)
	}
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// scaleCPUs picks the first two CPUs this process may run on (the same
// one twice on a single CPU).
func scaleCPUs() ([2]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return [2]int{}, fmt.Errorf("bench scale: allowed CPUs: %w", err)
	}
	var cpus []int
	for c := 0; c <= lcore.MaxCPU && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return [2]int{}, errors.New("bench scale: no allowed CPU")
	}
	return [2]int{cpus[0], cpus[len(cpus)-1]}, nil
}

// runScaleRows runs transport rows, printing each one's figures, records
// them in got and returns the steering counts of them all.
func runScaleRows(ctx context.Context, out io.Writer, o scaleOptions, cpus [2]int, got map[scaleRow]scaleResult, rows []scaleRow) (shard.Stats, error) {
	var steer shard.Stats
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return steer, err
		}
		res, err := runScaleRow(ctx, o, r, cpus)
		if err != nil {
			return steer, fmt.Errorf("bench scale: %s: %w", r.name(), err)
		}
		got[r] = res
		steer.Received += res.steer.Received
		steer.SteeredOut += res.steer.SteeredOut
		steer.HandoffDropped += res.steer.HandoffDropped
		fmt.Fprintf(out, "FIGURE scale_%s_ops_per_s %.0f\n", r.name(), res.rate())
		fmt.Fprintf(out, "FIGURE scale_%s_goodput_gbps %.3f\n", r.name(), res.goodput()/1e9)
		line := fmt.Sprintf("  # %s: %d ops in %v;", r.name(), res.ops, res.wall.Round(time.Millisecond))
		for i, n := range res.perShard {
			line += fmt.Sprintf(" shard %d %.0f ops/s,", i, float64(n)/res.wall.Seconds())
		}
		fmt.Fprintf(out, "%s sum %.0f ops/s\n", line, res.rate())
	}
	return steer, nil
}

// scalePorts returns the initiator's and the target's port specs of row
// r, the pool's frames, and what removes what it built: a mem pair of
// one queue per shard, or AF_XDP on both ends of a veth pair (two
// namespaces) of one queue per shard, where the initiator's shard i sends
// on queue i and veth delivers that on the target's queue i.
func scalePorts(r scaleRow, name string) (ini, tgt string, frames int, cleanup func() error, err error) {
	if !r.veth {
		spec := func(end int) string { return fmt.Sprintf("mem:%s/%d?queues=%d&steer=queue", name, end, r.shards) }
		return spec(0), spec(1), 32768 * r.shards, func() error { return nil }, nil
	}
	id := fmt.Sprintf("sc%dt%d", os.Getpid()%100000, r.shards)
	var a, b *netns.NS
	del := func() error {
		var err error
		for _, ns := range []*netns.NS{a, b} {
			if ns != nil {
				err = errors.Join(err, ns.Delete())
			}
		}
		return err
	}
	if a, err = netns.Create("pg" + id + "-a"); err == nil {
		if b, err = netns.Create("pg" + id + "-b"); err == nil {
			err = netns.Veth(a, id+"a", b, id+"b", netns.VethOptions{Queues: r.shards, GRO: true,
				AddrA: netip.MustParsePrefix("198.18.0.101/24"), AddrB: netip.MustParsePrefix("198.18.0.102/24")})
		}
	}
	if err != nil {
		return "", "", 0, nil, errors.Join(err, del())
	}
	// The target's XDP program takes the transport's UDP port only and,
	// with shard_bits, counts datagrams arriving on another shard's queue.
	tgt, err = shardedPortSpec(fmt.Sprintf("afxdp:%sb?netns=%s&udp_port=%d", id, b.Name, wire.DefaultPort), r.shards)
	if err != nil {
		return "", "", 0, nil, errors.Join(err, del())
	}
	ini = fmt.Sprintf("afxdp:%sa?netns=%s&queues=%d", id, a.Name, r.shards)
	return ini, tgt, 16384 * r.shards, del, nil
}

// scalePipeline opens ports with a pool of frames and n loops, loop i
// pinned to cpus[i%2] and busy polling (--count small: unpinned and
// sleeping).
func scalePipeline(o scaleOptions, name, loop string, frames int, ports []string, n int, cpus [2]int) (*app.Pipeline, error) {
	lcores := make([]app.Lcore, n)
	idle := lcore.IdleBusy
	for i := range lcores {
		lcores[i] = app.Lcore{Name: fmt.Sprintf("%s%d", loop, i), CPU: cpus[i%2]}
		if o.small {
			lcores[i].CPU, idle = -1, lcore.IdleSleep
		}
	}
	return app.New(app.Options{
		Pool:   mbuf.Options{Name: "bench-" + name, Frames: frames},
		Ports:  ports,
		Lcores: lcores,
		Idle:   lcore.IdlePolicy{Mode: idle},
		Clock:  clock.NewReal(),
	})
}

// runScaleRow runs one row: both endpoints of r.shards shards over a port
// pair, shard i of each on loop i.
func runScaleRow(ctx context.Context, o scaleOptions, r scaleRow, cpus [2]int) (res scaleResult, err error) {
	name := fmt.Sprintf("scale%d-%d-%d", os.Getpid(), r.shards, r.size)
	iniSpec, tgtSpec, frames, cleanup, err := scalePorts(r, name)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	loops := make([]int, r.shards)
	for i := range loops {
		loops[i] = i
	}
	p, err := scalePipeline(o, name, "shard", frames, []string{iniSpec, tgtSpec}, r.shards, cpus)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, p.Stop()) }()
	ipI, ipT := netip.MustParseAddr("198.18.0.101"), netip.MustParseAddr("198.18.0.102")
	tgt, err := p.AddShardedTransport(app.TransportOptions{Role: "target", Port: 1, LocalIP: ipT, Window: o.window, Sizes: []int{r.size}, Seed: o.seed + 1}, loops)
	if err != nil {
		return res, err
	}
	ini, err := p.AddShardedTransport(app.TransportOptions{Role: "initiator", Port: 0, LocalIP: ipI, Window: o.window, Sizes: []int{r.size},
		Conns: 2 * r.shards, Seed: o.seed, RegionKey: tgt.Shards[0].Region.Key, Peer: rt.PeerAddr{MAC: [6]byte(p.Port(1).Info().MAC), IP: ipT}}, loops)
	if err != nil {
		return res, err
	}
	if err := p.Start(); err != nil {
		return res, err
	}
	wait := func(d time.Duration) error { return sleepCtx(ctx, d) }
	perShard := func() []uint64 {
		n := make([]uint64, len(ini.Shards))
		for i, s := range ini.Shards {
			n[i] = s.Load.Stats().Completed
		}
		return n
	}
	if err := wait(o.duration / 5); err != nil {
		return res, err
	}
	if ini.Down() {
		return res, fmt.Errorf("the initiator's connections failed: %v", ini.ConnErr())
	}
	s0, b0, t0 := perShard(), ini.LoadStats().Bytes, time.Now()
	if err := wait(o.duration); err != nil {
		return res, err
	}
	// --count small checks that the rows run, not how fast: a window too
	// short for one 64 KiB push on a slow (-race, loaded) machine is
	// stretched until one completes, up to half a minute.
	for o.small && slices.Equal(perShard(), s0) && time.Since(t0) < 30*time.Second {
		if err := wait(10 * time.Millisecond); err != nil {
			return res, err
		}
	}
	s1, b1 := perShard(), ini.LoadStats().Bytes
	res.wall = time.Since(t0)
	for i := range s1 {
		res.perShard = append(res.perShard, s1[i]-s0[i])
		res.ops += s1[i] - s0[i]
	}
	res.bytes = b1 - b0
	drained := ini.Drain()
	if err := p.StopLoops(); err != nil {
		return res, err
	}
	for _, st := range []*app.ShardedTransport{ini, tgt} {
		t := st.Steer.Total()
		res.steer.Received += t.Received
		res.steer.SteeredOut += t.SteeredOut
		res.steer.HandoffDropped += t.HandoffDropped
	}
	res.missteered = tgt.Steer.Missteered()
	ls := ini.LoadStats()
	switch {
	case res.ops == 0:
		return res, errors.New("no operation completed in the measured window")
	case ls.Failed > 0 || ls.BadData > 0:
		return res, fmt.Errorf("%d operations failed, %d with wrong bytes (%v)", ls.Failed, ls.BadData, ini.ConnErr())
	case !drained:
		return res, fmt.Errorf("%d operations still outstanding 5s after posting stopped", ls.Posted-ls.Completed-ls.Failed)
	}
	return res, nil
}

// fwdResult is a forwarding row's figures over its measured window.
type fwdResult struct {
	offered, forwarded, received uint64   // the generators', forwarders' and sinks' frames
	perQueue                     []uint64 // frames forwarded per queue
	wall                         time.Duration
	kernel                       []cpuShare // the kernel's share of each CPU of the row
}

func (r fwdResult) rate() float64 { return float64(r.forwarded) / r.wall.Seconds() }

// runFwdRows measures io forwarding of 64 B frames over AF_XDP on veth
// with two queues on two cores and with one queue on one core, prints
// both rows and the kernel's CPU share during each, and adds the ratio.
func runFwdRows(ctx context.Context, out io.Writer, rep *benchreport.Report, o scaleOptions, cpus [2]int) error {
	got := map[int]fwdResult{}
	for _, q := range []int{1, 2} {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := runFwdRow(ctx, o, q, cpus)
		if err != nil {
			return fmt.Errorf("bench scale: fwd over AF_XDP veth, %d queues: %w", q, err)
		}
		got[q] = res
		name := fmt.Sprintf("veth_fwd64_%dqueue", q)
		fmt.Fprintf(out, "FIGURE scale_%s_fps %.0f\n", name, res.rate())
		line := fmt.Sprintf("  # %s: forwarded %d of %d offered (%d at the sinks) in %v;", name, res.forwarded, res.offered, res.received, res.wall.Round(time.Millisecond))
		for i, n := range res.perQueue {
			line += fmt.Sprintf(" queue %d %.0f fps,", i, float64(n)/res.wall.Seconds())
		}
		fmt.Fprintf(out, "%s sum %.0f fps; kernel (system+irq+softirq) %s\n", line, res.rate(), formatShares(res.kernel))
		for _, k := range res.kernel {
			fmt.Fprintf(out, "FIGURE scale_%s_kernel_cpu_share_cpu%d %.3f\n", name, k.cpu, k.share())
		}
		if res.offered <= res.forwarded+res.forwarded/100 {
			rep.Note("%s: the generators offered no more than the forwarder carried (%d ≤ %d + 1%%): generator-limited, the row understates the forwarder", name, res.offered, res.forwarded)
		}
	}
	one, two := got[1], got[2]
	rep.Add(benchreport.Ratio{Name: "fwd_2queues_vs_1_afxdp_veth", Value: two.rate() / one.rate(), Op: benchreport.AtLeast, Target: 1.6,
		Detail: fmt.Sprintf("io forwarding, 64 B, AF_XDP copy mode on veth: 2 queues on 2 cores %.4g fps ÷ 1 queue on 1 core %.4g fps; each core runs one queue's whole chain (generator → forwarder → sink), so both sides have the same cores per queue; the generator's bursts of 64 against the forwarder's 32 on the same loop offer twice what each forwarder poll takes (offered %d and %d frames), the kernel drops the rest at the forwarder's receive ring; kernel share 2 queues %s, 1 queue %s",
			two.rate(), one.rate(), two.offered, one.offered, formatShares(two.kernel), formatShares(one.kernel))})
	k := meanShare(two.kernel)
	rep.Note("kernel_cpu_share_fwd_2queues %.3f (1 queue: %.3f): veth copy mode runs the receive XDP program, the copy into the socket and the peer's transmit in softirq and system time on the sending core; the forwarder's loops can gain no more than the user time the kernel leaves them", k, meanShare(one.kernel))
	if k >= 0.5 {
		rep.Note("fwd_2queues_vs_1_afxdp_veth is kernel-bound: the kernel held %.0f%% of the row's CPU time", 100*k)
	}
	return nil
}

// runFwdRow builds gen ↔ fwd ↔ sink with queues queues on every veth end
// and runs, on loop q (pinned to cpus[q]), queue q's generator (as fast
// as it can, bursts of 64), forwarder (io mode, bursts of 32, fwd's
// gen-side queue q to its sink-side queue q) and sink: veth delivers what
// is sent on transmit queue q on the peer's receive queue q, so each loop
// carries one chain. The generator's bursts are twice the forwarder's so
// that it offers more than the forwarder takes however the loop's time is
// shared.
func runFwdRow(ctx context.Context, o scaleOptions, queues int, cpus [2]int) (res fwdResult, err error) {
	id := fmt.Sprintf("sc%df%d", os.Getpid()%100000, queues)
	topo, err := netns.BenchThreeNSQueues("pg"+id, id, queues)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, topo.Delete()) }()
	spec := func(ifname string, ns *netns.NS) string {
		return fmt.Sprintf("afxdp:%s?netns=%s&queues=%d&ring=1024", ifname, ns.Name, queues)
	}
	p, err := scalePipeline(o, id, "chain", 16384*queues,
		[]string{spec(topo.GenIf, topo.Gen), spec(topo.FwdGenIf, topo.Fwd), spec(topo.FwdSinkIf, topo.Fwd), spec(topo.SinkIf, topo.Sink)}, queues, cpus)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, p.Stop()) }()
	gens := make([]*traffic.Generator, queues)
	fwds := make([]*fwd.Forwarder, queues)
	sinks := make([]*traffic.Sink, queues)
	addr := &traffic.Addressing{SrcPort: traffic.BaseSrcPort,
		SrcIP: traffic.IPRange{Lo: topo.GenAddr.Addr(), Hi: topo.GenAddr.Addr()}, DstIP: traffic.IPRange{Lo: topo.SinkAddr.Addr(), Hi: topo.SinkAddr.Addr()}}
	for q := range queues {
		at := func(port int) []app.Queue { return []app.Queue{{Port: p.Port(port), Queue: q}} }
		if gens[q], err = traffic.NewGenerator(traffic.GeneratorOptions{Port: p.Port(0), Queue: q, Pool: p.Pool(), Cache: p.Cache(q), Burst: 64,
			Sizes: traffic.FixedSize(60), SrcMAC: topo.GenMAC, DstMAC: topo.SinkMAC, Addressing: addr}); err != nil {
			return res, err
		}
		if fwds[q], err = fwd.New(fwd.Options{Mode: fwd.ModeIO, In: p.Port(1), InQueue: q, Out: p.Port(2), OutQueue: q, Pool: p.Pool(), Cache: p.Cache(q), Burst: 32}); err != nil {
			return res, err
		}
		if sinks[q], err = traffic.NewSink(traffic.SinkOptions{Port: p.Port(3), Queue: q, Pool: p.Pool(), Cache: p.Cache(q), SrcPort: traffic.BaseSrcPort}); err != nil {
			return res, err
		}
		for _, st := range []app.Stage{
			{Stage: gens[q], Loop: q, Tx: at(0)},
			{Stage: fwds[q], Loop: q, Rx: at(1), Tx: at(2)},
			{Stage: sinks[q], Loop: q, Rx: at(3)},
		} {
			if err := p.Add(st); err != nil {
				return res, err
			}
		}
	}
	if err := p.Start(); err != nil {
		return res, err
	}
	type snap struct {
		offered, received uint64
		perQueue          []uint64
		cpu               []cpuTimes
		at                time.Time
	}
	used := cpus[:min(queues, 2)]
	if o.small || cpus[0] == cpus[1] {
		used = cpus[:1]
		if cpus[0] != cpus[1] {
			used = cpus[:] // unpinned loops: the kernel's share of both CPUs
		}
	}
	take := func() (s snap, err error) {
		for q := range queues {
			s.offered += gens[q].Stats().Sent
			s.received += sinks[q].Stats().Received
			s.perQueue = append(s.perQueue, fwds[q].Stats().Tx)
		}
		s.cpu, err = readCPUTimes(used)
		s.at = time.Now()
		return s, err
	}
	forwarded := func(s snap) (n uint64) {
		for _, v := range s.perQueue {
			n += v
		}
		return n
	}
	// Warm-up: until every queue has forwarded a frame (the first ones
	// can meet a veth whose NAPI is not yet running), then a fifth of the
	// window.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := take()
		if err != nil {
			return res, err
		}
		if !slices.Contains(s.perQueue, 0) {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("a queue forwarded nothing in 10 s (per queue %v, %d offered)", s.perQueue, s.offered)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return res, err
		}
	}
	if err := sleepCtx(ctx, o.duration/5); err != nil {
		return res, err
	}
	s0, err := take()
	if err != nil {
		return res, err
	}
	if err := sleepCtx(ctx, o.duration); err != nil {
		return res, err
	}
	s1, err := take()
	if err != nil {
		return res, err
	}
	if err := p.StopLoops(); err != nil {
		return res, err
	}
	res.wall = s1.at.Sub(s0.at)
	res.offered, res.received, res.forwarded = s1.offered-s0.offered, s1.received-s0.received, forwarded(s1)-forwarded(s0)
	for q := range queues {
		res.perQueue = append(res.perQueue, s1.perQueue[q]-s0.perQueue[q])
	}
	for i, c := range used {
		res.kernel = append(res.kernel, cpuShare{cpu: c, kernel: s1.cpu[i].kernel - s0.cpu[i].kernel, total: s1.cpu[i].total - s0.cpu[i].total})
	}
	if slices.Contains(res.perQueue, 0) {
		return res, fmt.Errorf("a queue forwarded nothing in the measured window (per queue %v)", res.perQueue)
	}
	return res, nil
}

// sleepCtx waits d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cpuTimes is one CPU's line of /proc/stat, in clock ticks: the kernel's
// time (system, irq, softirq) and all of it.
type cpuTimes struct{ kernel, total uint64 }

// cpuShare is the kernel's share of one CPU over a window.
type cpuShare struct {
	cpu           int
	kernel, total uint64
}

func (c cpuShare) share() float64 {
	if c.total == 0 {
		return 0
	}
	return float64(c.kernel) / float64(c.total)
}

func meanShare(cs []cpuShare) float64 {
	var k, t uint64
	for _, c := range cs {
		k, t = k+c.kernel, t+c.total
	}
	return cpuShare{kernel: k, total: t}.share()
}

func formatShares(cs []cpuShare) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("CPU %d %.0f%%", c.cpu, 100*c.share()))
	}
	return strings.Join(parts, ", ")
}

// readCPUTimes reads the cpuN lines of /proc/stat for cpus.
func readCPUTimes(cpus []int) ([]cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return parseCPUTimes(string(data), cpus)
}

// parseCPUTimes reads "cpuN user nice system idle iowait irq softirq
// steal ..." lines; guest time is already inside user and nice.
func parseCPUTimes(stat string, cpus []int) ([]cpuTimes, error) {
	out := make([]cpuTimes, len(cpus))
	found := make([]bool, len(cpus))
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		i := slices.Index(cpus, n)
		if err != nil || i < 0 {
			continue
		}
		var v [8]uint64
		for j := range v {
			if v[j], err = strconv.ParseUint(f[1+j], 10, 64); err != nil {
				return nil, fmt.Errorf("/proc/stat: %s: %w", f[0], err)
			}
		}
		out[i] = cpuTimes{kernel: v[2] + v[5] + v[6], total: v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]}
		found[i] = true
	}
	if i := slices.Index(found, false); i >= 0 {
		return nil, fmt.Errorf("/proc/stat has no line for CPU %d", cpus[i])
	}
	return out, nil
}
