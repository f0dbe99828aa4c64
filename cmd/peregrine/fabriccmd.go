package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

type fabricConfig struct {
	portA, portB string
	aToB, bToA   string
	both         string
	seed         uint64
	udpPort      uint16
	inOrderDSCP  uint8 // --in-order-dscp: frames with this DSCP keep their flow's path too
	duration     time.Duration
	lcores       string
	idle         string
	period       time.Duration
	frames       int
	obs          observeFlags
	frameSize    int
	quiet        bool
	ready        func() // called once running (tests)
}

func newFabricCommand() *cobra.Command {
	var cfg fabricConfig
	cmd := &cobra.Command{
		Use:   "fabric",
		Short: "Run the impairment and multipath middlebox between two ports (the netem this kernel lacks)",
		Long: `fabric forwards frames between port A and port B in both directions, applying a
seeded impairment profile per direction: loss (random and Gilbert-Elliott
bursts), duplication, reordering, corruption, delay and jitter, a rate limit
with a bounded queue, and several paths with different delays. Peregrine
transport packets flagged in-order (IOI head and tail), or carrying
--in-order-dscp, keep their flow's path; other transport packets are sprayed
(profile key spray=); non-transport frames stay in order. Paths may have their
own capacity: paths=4,path-rate=200mbit,path-delay=0/2us/5us/10us.

Profile syntax (comma-separated, any subset):
  ` + fabric.ProfileSyntax + `

The same --seed with the same input replays the same impairments.`,
		Example: `  peregrine fabric --port-a afxdp:veth1 --port-b afxdp:veth2 --profile loss=1%,delay=50us,jitter=10us
  peregrine fabric --port-a afpacket:eth1 --port-b afpacket:eth2 --a-to-b loss=5% --b-to-a loss=0%
  peregrine fabric --port-a afxdp:veth1 --port-b afxdp:veth2 --profile paths=4,spread=20us,reorder=1%/100us`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return cfg.validate() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := notifyContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			return runFabric(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	cfg.obs.register(f)
	f.StringVar(&cfg.portA, "port-a", "", "first port spec (required)")
	f.StringVar(&cfg.portB, "port-b", "", "second port spec (required)")
	f.StringVar(&cfg.both, "profile", "", "impairment profile for both directions")
	f.StringVar(&cfg.aToB, "a-to-b", "", "profile from A to B (overrides --profile)")
	f.StringVar(&cfg.bToA, "b-to-a", "", "profile from B to A (overrides --profile)")
	f.Uint64Var(&cfg.seed, "seed", 1, "seed of every random choice")
	f.Uint16Var(&cfg.udpPort, "udp-port", wire.DefaultPort, "UDP port of the peregrine transport (for the in-order flag)")
	f.Uint8Var(&cfg.inOrderDSCP, "in-order-dscp", 0, "frames with this IP DSCP (1..63) keep their flow's path like IOI-flagged ones (0: the flag alone)")
	f.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: until SIGINT/SIGTERM)")
	f.StringVar(&cfg.lcores, "lcores", "0", "CPU for the poll loop (one: the fabric runs one loop)")
	f.BoolVar(&cfg.quiet, "quiet", false, "no per-period lines")
	idleVar(f, &cfg.idle)
	f.DurationVar(&cfg.period, "stats-period", time.Second, "how often to print counters (1ms or more)")
	f.IntVar(&cfg.frames, "frames", 32768, "frames in the packet pool (delayed frames wait in it; at least 1024)")
	sizeVar(f, &cfg.frameSize, "frame-size", 2048, "bytes per pool frame: 2048, 4096, 8192 or 16384 (4096 for an MTU above 1778 on AF_XDP; above 4096, AF_XDP carries jumbo frames as several chunks)")
	return cmd
}

func runFabric(ctx context.Context, cfg fabricConfig, out io.Writer) error {
	out, js := jsonOutput(cfg.obs.json, out)
	if cfg.portA == "" || cfg.portB == "" {
		return fmt.Errorf("--port-a and --port-b are both required, e.g. --port-a afxdp:veth1 --port-b afxdp:veth2")
	}
	profile := func(flag, s string) (fabric.Profile, error) {
		if s == "" {
			s = cfg.both
		}
		p, err := fabric.ParseProfile(s)
		if err != nil {
			return p, fmt.Errorf("%s: %w", flag, err)
		}
		return p, nil
	}
	ab, err := profile("--a-to-b", cfg.aToB)
	if err != nil {
		return err
	}
	ba, err := profile("--b-to-a", cfg.bToA)
	if err != nil {
		return err
	}
	cpus, err := lcore.ParseCPUList(cfg.lcores)
	if err != nil {
		return fmt.Errorf("--lcores: %w", err)
	}
	idle, err := lcore.ParseIdleMode(cfg.idle)
	if err != nil {
		return fmt.Errorf("--idle: %w", err)
	}
	obs, err := cfg.obs.start(out)
	if err != nil {
		return err
	}
	defer obs.close()
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "peregrine", Frames: cfg.frames, FrameSize: cfg.frameSize},
		Ports:  []string{cfg.portA, cfg.portB},
		Lcores: app.OnCPUs(cpus[0]),
		Idle:   lcore.IdlePolicy{Mode: idle},
	})
	if err != nil {
		return flagError(err, map[string]string{"Pool": "--frames/--frame-size", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(p)
	portA, portB := p.Port(0), p.Port(1)
	fab, err := p.AddFabric(app.FabricOptions{A: 0, B: 1, AtoB: ab, BtoA: ba, Seed: cfg.seed, TransportPort: cfg.udpPort, InOrderDSCP: cfg.inOrderDSCP})
	if err != nil {
		return joinStop(flagError(err, map[string]string{"InOrderDSCP": "--in-order-dscp"}), p)
	}
	obs.watchFabric("fabric", fab)
	fmt.Fprintf(out, "peregrine fabric: %s ⇄ %s, seed %d\n  A→B: %s\n  B→A: %s\n",
		portA.Info().Name, portB.Info().Name, cfg.seed, ab, ba)
	if err := p.Start(); err != nil {
		return joinStop(flagError(err, map[string]string{"Lcores": "--lcores"}), p)
	}
	if cfg.ready != nil {
		cfg.ready()
	}
	var last fabric.Stats
	tick := func(e time.Duration) {
		st := fab.Stats()
		js.interval(e.Seconds(), fabricCounters(st))
		if cfg.quiet {
			return
		}
		fmt.Fprintf(out, "[%5.1fs] A→B %s | B→A %s\n", e.Seconds(), dirRate(st.AtoB, last.AtoB), dirRate(st.BtoA, last.BtoA))
		last = st
	}
	elapsed, _, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: cfg.period, Tick: tick})
	if err != nil {
		return joinStop(err, p)
	}
	// The ports' own drops (a receive ring the kernel found full) happen
	// before the fabric sees a frame: read them while the ports are open.
	pa, pb := portA.Stats(), portB.Stats()
	stopErr := p.Stop()
	st := fab.Stats()
	fmt.Fprintf(out, "\nsummary after %.2fs:\n  A→B %s\n  B→A %s\n", elapsed.Seconds(), dirTotals(st.AtoB), dirTotals(st.BtoA))
	fmt.Fprintf(out, "  port A dropped on receive %d, port B dropped on receive %d\n", pa.RxDropped, pb.RxDropped)
	totals := map[string]any{"port_a_rx_dropped": pa.RxDropped, "port_b_rx_dropped": pb.RxDropped}
	for k, v := range fabricCounters(st) {
		totals[k] = v
	}
	js.summary(elapsed.Seconds(), totals, nil, false)
	return stopErr
}

func dirRate(now, prev fabric.DirStats) string {
	return fmt.Sprintf("in %d out %d lost %d dup %d reord %d corrupt %d qdrop %d",
		now.Received-prev.Received, now.Sent-prev.Sent, now.LossRandom+now.LossBurst-prev.LossRandom-prev.LossBurst,
		now.Duplicated-prev.Duplicated, now.Reordered-prev.Reordered, now.Corrupted-prev.Corrupted,
		now.QueueFull+now.LimitFull+now.TTLExpired-prev.QueueFull-prev.LimitFull-prev.TTLExpired)
}

func dirTotals(d fabric.DirStats) string {
	s := fmt.Sprintf("received %d sent %d | lost random %d burst %d | queue full %d limit full %d ttl expired %d | duplicated %d corrupted %d reordered %d delayed %d | tx refused %d flushed at stop %d | per path %v",
		d.Received, d.Sent, d.LossRandom, d.LossBurst, d.QueueFull, d.LimitFull, d.TTLExpired, d.Duplicated, d.Corrupted, d.Reordered, d.Delayed, d.TxRefused, d.Flushed, d.Paths)
	if d.PathQueueFull+d.PathLossDrops+d.PathDownDrops > 0 || len(d.PathDetail) > 1 {
		s += fmt.Sprintf(" | path queue full %d path lost %d path down %d", d.PathQueueFull, d.PathLossDrops, d.PathDownDrops)
		for i, p := range d.PathDetail {
			s += fmt.Sprintf(" | path %d: %d frames %d B peak queue %d drops %d", i, p.Frames, p.Bytes, p.QueuePeak, p.Drops)
		}
	}
	return s
}

// fabricCounters are a fabric's counters by "DIRECTION.COUNTER", for --json.
func fabricCounters(st fabric.Stats) map[string]float64 {
	out := map[string]float64{}
	for dir, d := range map[string]fabric.DirStats{"a_to_b": st.AtoB, "b_to_a": st.BtoA} {
		for k, v := range map[string]uint64{"received": d.Received, "sent": d.Sent, "loss_random": d.LossRandom, "loss_burst": d.LossBurst,
			"queue_full": d.QueueFull, "limit_full": d.LimitFull, "ttl_expired": d.TTLExpired, "duplicated": d.Duplicated,
			"corrupted": d.Corrupted, "reordered": d.Reordered, "delayed": d.Delayed, "tx_refused": d.TxRefused} {
			out[dir+"."+k] = float64(v)
		}
	}
	return out
}
