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
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/shard"
	benchreport "github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
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
		Short: "the sharded transport in memory: two shards on two cores ÷ one shard on one core, 64 B and 64 KiB pushes",
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

Each row prints its per-shard figures and their sum. --count small runs
short windows on sleeping loops (a check that everything runs, not a
measurement).`,
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

// scaleRow is one measurement: shards of each endpoint, push size.
type scaleRow struct {
	shards, size int
}

func (r scaleRow) name() string {
	size := "push64"
	if r.size != 64 {
		size = fmt.Sprintf("push%dk", r.size>>10)
	}
	return fmt.Sprintf("mem_%s_%dshard", size, r.shards)
}

// scaleResult is a row's figures: in all, and per shard.
type scaleResult struct {
	ops, bytes uint64
	wall       time.Duration
	perShard   []uint64 // operations completed per initiator shard
	steer      shard.Stats
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
	var steer shard.Stats
	for _, r := range []scaleRow{{1, 64}, {2, 64}, {1, 64 << 10}, {2, 64 << 10}} {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		res, err := runScaleRow(ctx, o, r, cpus)
		if err != nil {
			return 0, 0, fmt.Errorf("bench scale: %s: %w", r.name(), err)
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
	ratio := func(name string, size int, v func(scaleResult) float64, what string) {
		one, two := got[scaleRow{1, size}], got[scaleRow{2, size}]
		rep.Add(benchreport.Ratio{Name: name, Value: v(two) / v(one), Op: benchreport.AtLeast, Target: 1.8,
			Detail: fmt.Sprintf("%s: 2 shards on 2 cores %.4g ÷ 1 shard on 1 core %.4g", what, v(two), v(one))})
	}
	ratio("transport_2shards_vs_1_ops_mem", 64, scaleResult.rate, "64 B pushes/s")
	ratio("transport_2shards_vs_1_goodput_mem", 64<<10, scaleResult.goodput, "64 KiB pushes, goodput bit/s")
	rep.Add(benchreport.Ratio{Name: "steered_in_software_fraction", Value: steer.SteeredFraction(), Op: benchreport.AtMost, Target: 0,
		Detail: fmt.Sprintf("mem steer=queue, every row: %d of %d frames received were handed to another shard (%d dropped on a full ring)", steer.SteeredOut, steer.Received, steer.HandoffDropped)})
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

// runScaleRow runs one row: both endpoints of r.shards shards over a mem
// pair, shard i of each on loop i.
func runScaleRow(ctx context.Context, o scaleOptions, r scaleRow, cpus [2]int) (res scaleResult, err error) {
	name := fmt.Sprintf("scale%d-%d-%d", os.Getpid(), r.shards, r.size)
	lcores := make([]app.Lcore, r.shards)
	loops := make([]int, r.shards)
	idle := lcore.IdleBusy
	for i := range lcores {
		lcores[i], loops[i] = app.Lcore{Name: fmt.Sprintf("shard%d", i), CPU: cpus[i%2]}, i
		if o.small {
			lcores[i].CPU, idle = -1, lcore.IdleSleep
		}
	}
	spec := func(end int) string { return fmt.Sprintf("mem:%s/%d?queues=%d&steer=queue", name, end, r.shards) }
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "bench-" + name, Frames: 32768 * r.shards},
		Ports:  []string{spec(0), spec(1)},
		Lcores: lcores,
		Idle:   lcore.IdlePolicy{Mode: idle},
		Clock:  clock.NewReal(),
	})
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
