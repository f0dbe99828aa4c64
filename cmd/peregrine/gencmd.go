package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

type genConfig struct {
	port     string
	rx       bool
	rate     string
	size     string
	flows    int
	count    uint64
	duration time.Duration
	burst    int
	lcores   string
	idle     string
	period   time.Duration
	replay   string
	timing   string
	loop     int
	expect   uint64
	idleExit time.Duration
	frames   int
	frameSz  int
	quiet    bool
	// Addresses, ports and VLAN of generated frames (addressing()).
	srcMAC, dstMAC, srcIP, dstIP, dstPort string
	srcPort                               uint16
	vlan                                  uint16
	obs                                   observeFlags
	rxf                                   rxFlowFlags
	// ready is called once the ports are open and the loops run (tests).
	ready func()
}

func newGenCommand() *cobra.Command {
	var cfg genConfig
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate stamped traffic (pktgen-style), replay a capture, or receive and measure it",
		Long: `gen transmits Ethernet/IPv4/UDP frames (198.18.0.1 → 198.18.0.2) on every queue
of a port, each stamped with a per-flow sequence number and its transmit time.
--src-mac, --dst-mac, --src-ip, --dst-ip (IPv4 or IPv6), --src-port, --dst-port
and --vlan set the headers; an IP or destination-port range
(198.18.0.1-198.18.0.200) is walked one step per frame, as pktgen's ranges.

With --rx it is the receiving side instead: it reports rate, loss (from
sequence gaps, or exactly against --expect), reordering (frames behind the
expected sequence number) and one-way latency (the machine's monotonic
clock, shared by every process on it). --per-flow adds loss, RFC 4737
reordering, duplicates and latency min/avg/max per flow and an HDR latency
histogram (1 %) of all flows per --stats-period (--hist-out, --flows-out:
CSV or JSON); --per-flow-histograms also keeps a latency histogram per flow
for per-flow percentiles, at a further cost per frame.

With --replay FILE it sends the frames of a pcap or pcapng capture instead
(read a record at a time: any size), as fast as possible (--timing fast),
at the capture's own timing (original) or its gaps divided by N
(speed=N), or at --rate (rate), --loop times.`,
		Example: `  peregrine gen --port afxdp:veth0 --rate 1mpps --size 64 --duration 10s
  peregrine gen --port afxdp:veth0 --rate 10gbit --size imix --flows 16
  peregrine gen --port afpacket:veth0 --count 100000 --rate 100kpps
  peregrine gen --port afxdp:veth0 --src-ip 198.18.0.1-198.18.0.200 --dst-port 1000-1099 --vlan 7
  peregrine gen --port afxdp:veth0 --src-ip 2001:db8::1 --dst-ip 2001:db8::2 --size 128
  peregrine gen --rx --port afxdp:veth3 --flows 16 --expect 100000 --idle-exit 1s
  peregrine gen --port afxdp:veth0 --replay trace.pcap --timing original --loop 3
  peregrine gen --port afxdp:veth0 --replay trace.pcapng --timing speed=10 --loop 0
  peregrine gen --port afxdp:veth0 --replay trace.pcap --timing rate --rate 1gbit`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return cfg.validate(cmd.Flags()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := notifyContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			run := runGenTx
			if cfg.rx {
				run = runGenRx
			}
			ok, err := run(ctx, cfg, cmd.OutOrStdout())
			if err == nil && !ok {
				return exitError{exitFailed}
			}
			return err
		},
	}
	f := cmd.Flags()
	cfg.obs.register(f)
	cfg.rxf.register(f)
	f.StringVar(&cfg.port, "port", "", "port spec, e.g. afxdp:veth0?queue=0, afpacket:eth1, mem:a/0 (required)")
	f.BoolVar(&cfg.rx, "rx", false, "receive and measure instead of transmitting")
	f.StringVar(&cfg.rate, "rate", "max", "rate per queue: 1mpps, 500kpps, 10gbit, 1000 (pps) or max")
	f.StringVar(&cfg.size, "size", "64", "frame size without FCS: N, MIN-MAX (uniform) or imix (7:4:1 of 64/594/1518)")
	f.IntVar(&cfg.flows, "flows", 1, "number of flows (UDP source ports 10000..); the receiver must use the same")
	f.Uint64Var(&cfg.count, "count", 0, "transmit: stop after this many frames per queue (0: no limit)")
	f.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: until --count, --idle-exit or SIGINT)")
	f.IntVar(&cfg.burst, "burst", 32, "frames per burst (1..256)")
	f.StringVar(&cfg.lcores, "lcores", "0", "CPUs for the poll loops")
	idleVar(f, &cfg.idle)
	f.DurationVar(&cfg.period, "stats-period", time.Second, "how often to print rates (1ms or more)")
	f.StringVar(&cfg.replay, "replay", "", "transmit the frames of this pcap file instead of generated ones")
	f.StringVar(&cfg.timing, "timing", "fast", timingHelp)
	f.IntVar(&cfg.loop, "loop", 1, "replay the capture this many times (0: forever)")
	f.Uint64Var(&cfg.expect, "expect", 0, "receive: frames the sender sent, for exact loss")
	f.DurationVar(&cfg.idleExit, "idle-exit", 0, "receive: stop once frames have arrived and none came for this long")
	f.IntVar(&cfg.frames, "frames", 16384, "frames in the packet pool (at least 1024 per lcore)")
	sizeVar(f, &cfg.frameSz, "frame-size", 2048, "bytes per pool frame: 2048, 4096, 8192 or 16384; a generated frame fits one (less its headroom): above 4096 AF_XDP carries it as several chunks, and the receiver needs as large a --frame-size")
	f.BoolVar(&cfg.quiet, "quiet", false, "no live per-period lines")
	f.StringVar(&cfg.srcMAC, "src-mac", config.DefaultSrcMAC, "source MAC of generated frames")
	f.StringVar(&cfg.dstMAC, "dst-mac", config.DefaultDstMAC, "destination MAC of generated frames")
	f.StringVar(&cfg.srcIP, "src-ip", config.DefaultSrcIP, "source IP, IPv4 or IPv6, or a range walked one address per frame, e.g. 198.18.0.1-198.18.0.200")
	f.StringVar(&cfg.dstIP, "dst-ip", config.DefaultDstIP, "destination IP (the same family as --src-ip), or a range")
	f.Uint16Var(&cfg.srcPort, "src-port", traffic.BaseSrcPort, "UDP source port of flow 0 (flow i sends from it + i); the receiver must use the same")
	f.StringVar(&cfg.dstPort, "dst-port", config.DefaultDstPort, "UDP destination port, or a range walked one port per frame, e.g. 1000-1099")
	f.Uint16Var(&cfg.vlan, "vlan", 0, "tag frames with this 802.1Q VLAN ID (1..4094; 0: untagged)")
	return cmd
}

func genLoopSetup(cfg genConfig) ([]int, lcore.IdleMode, error) {
	if cfg.port == "" {
		return nil, 0, fmt.Errorf("--port is required, e.g. --port afxdp:veth0")
	}
	cpus, err := lcore.ParseCPUList(cfg.lcores)
	if err != nil {
		return nil, 0, fmt.Errorf("--lcores: %w", err)
	}
	idle, err := lcore.ParseIdleMode(cfg.idle)
	if err != nil {
		return nil, 0, fmt.Errorf("--idle: %w", err)
	}
	return cpus, idle, nil
}

// runGenTx transmits. It reports false when a check failed: a pcap input
// not replayed whole, a capture not written whole.
func runGenTx(ctx context.Context, cfg genConfig, out io.Writer) (bool, error) {
	out, js := jsonOutput(cfg.obs.json, out)
	cpus, idle, err := genLoopSetup(cfg)
	if err != nil {
		return false, err
	}
	sizes, err := traffic.ParseSizes(cfg.size, genMaxFrame) // checkGenFrames held it to --frame-size
	if err != nil {
		return false, fmt.Errorf("--size: %w", err)
	}
	rate, err := parseRate(cfg.rate, sizes.Mean())
	if err != nil {
		return false, fmt.Errorf("--rate: %w", err)
	}
	addr, srcMAC, dstMAC, err := cfg.addressing()
	if err != nil {
		return false, err
	}
	specs := []string{cfg.port}
	if cfg.replay != "" {
		specs = append(specs, cfg.replaySpec()) // gen_replay.go
	}
	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "peregrine", Frames: cfg.frames, FrameSize: cfg.frameSz},
		Ports:  specs,
		Lcores: app.OnCPUs(cpus...),
		Idle:   lcore.IdlePolicy{Mode: idle},
	})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames/--frame-size", "Ports[1]": "--replay", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(p)
	out0 := p.Port(0)
	var done func() bool
	var rateCheck func(elapsed time.Duration) // warns when --rate was not reached
	generated := func() {}
	if cfg.replay != "" {
		r, err := p.AddReplay(app.ReplayOptions{Source: 1, Out: 0, Burst: cfg.burst})
		if err != nil {
			return false, joinStop(err, p)
		}
		done = r.Done
	} else {
		gens, err := p.AddGenerators(app.GeneratorsOptions{Port: 0, Burst: cfg.burst, Sizes: sizes, Flows: cfg.flows, Rate: rate, Count: cfg.count,
			SrcMAC: srcMAC, DstMAC: dstMAC, Addressing: addr})
		if err != nil {
			return false, joinStop(err, p)
		}
		rateCheck = func(elapsed time.Duration) {
			warnRate(out, rate, cfg.rate, gens.Stats().Sent, len(gens.Gens), elapsed)
		}
		if cfg.count > 0 {
			done = gens.Done
		}
		generated = func() {
			total := gens.Stats()
			// One generator per queue, queue q on loop q mod the loops: each
			// queue's line is its own stage's count.
			for q, g := range gens.Gens {
				gs := g.Stats()
				fmt.Fprintf(out, "  queue %d on lcore %d (CPU %d): generated %d frames, %d bytes\n", q, gens.Loops[q], cpus[gens.Loops[q]], gs.Sent, gs.Bytes)
			}
			fmt.Fprintf(out, "  generated %d frames, %d bytes, %d flow(s) per queue (sum of %d queues)\n", total.Sent, total.Bytes, cfg.flows, len(gens.Gens))
		}
	}
	fmt.Fprintf(out, "peregrine gen: %s, %d queue(s), frames %s B, rate %s, burst %d\n", out0.Info().Name, out0.Info().Queues, sizes, cfg.rate, cfg.burst)
	if err := p.Start(); err != nil {
		return false, joinStop(flagError(err, map[string]string{"Lcores": "--lcores"}), p)
	}
	if cfg.ready != nil {
		cfg.ready()
	}
	meter := newPortMeter(p.Ports()[:1])
	meter.js = js
	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: cfg.period, Tick: func(e time.Duration) { meter.tick(out, e, cfg.quiet) }, Done: done})
	if err != nil {
		return false, joinStop(err, p)
	}
	stopErr := p.Stop()
	lines, checks := captureChecks(p.Ports())
	fmt.Fprintf(out, "\nsummary after %.2fs:\n", elapsed.Seconds())
	meter.summary(out, elapsed, checks, interrupted)
	generated()
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
	if rateCheck != nil {
		rateCheck(elapsed)
	}
	ok := true
	if len(checks) > 0 {
		ok = report(out, checks, interrupted)
	}
	return ok, stopErr
}

// runGenRx receives and measures. It reports false when nothing arrived,
// when --expect was given and frames were lost, or when a capture check
// failed.
func runGenRx(ctx context.Context, cfg genConfig, out io.Writer) (bool, error) {
	stdout := out
	out, js := jsonOutput(cfg.obs.json, out)
	if streamed(cfg.rxf.format) {
		out = io.Discard // stdout carries the records
	}
	cpus, idle, err := genLoopSetup(cfg)
	if err != nil {
		return false, err
	}
	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "peregrine", Frames: cfg.frames, FrameSize: cfg.frameSz},
		Ports:  []string{cfg.port},
		Lcores: app.OnCPUs(cpus...),
		Idle:   lcore.IdlePolicy{Mode: idle},
	})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames/--frame-size", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(p)
	in := p.Port(0)
	sinks, err := p.AddSinks(app.SinksOptions{Port: 0, Burst: cfg.burst, Flows: cfg.flows, Latency: true, SrcPort: cfg.srcPort,
		PerFlow: cfg.rxf.perFlow, FlowHistograms: cfg.rxf.flowHist, Interval: cfg.period})
	if err != nil {
		return false, joinStop(err, p)
	}
	flowRun, err := cfg.rxf.start(sinks, stdout, cfg.rxParams(), cfg.flows, cfg.srcPort)
	if err != nil {
		return false, joinStop(err, p)
	}
	frames := sinks.Frames
	var lastFrames uint64
	var lastChange time.Time
	done := func() bool {
		n := frames()
		if cfg.expect > 0 && n >= cfg.expect {
			return true
		}
		if n != lastFrames || lastChange.IsZero() {
			lastFrames, lastChange = n, time.Now()
			return false
		}
		return cfg.idleExit > 0 && n > 0 && time.Since(lastChange) >= cfg.idleExit
	}
	fmt.Fprintf(out, "peregrine gen --rx: %s, %d queue(s), %d flow(s)\n", in.Info().Name, in.Info().Queues, cfg.flows)
	if err := p.Start(); err != nil {
		return false, joinStop(flagError(err, map[string]string{"Lcores": "--lcores"}), p)
	}
	if cfg.ready != nil {
		cfg.ready()
	}
	meter := newPortMeter(p.Ports())
	meter.js = js
	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: cfg.period, Tick: func(e time.Duration) { meter.tick(out, e, cfg.quiet); flowRun.tick(e) }, Done: done})
	if err != nil {
		return false, joinStop(err, p)
	}
	stopErr := p.Stop()

	total, lat := sinks.Stats()
	secs := elapsed.Seconds()
	fmt.Fprintf(out, "\nsummary after %.2fs:\n", secs)
	fmt.Fprintf(out, "  received %d stamped frames (%.3f Mpps, %.3f Gbit/s), %d other frames\n",
		total.Received, float64(total.Received)/secs/1e6, float64(total.Bytes)*8/secs/1e9, total.Foreign)
	lost := int64(total.Gaps) - int64(total.Late)
	if cfg.expect > 0 {
		lost = int64(cfg.expect) - int64(total.Received)
	}
	fmt.Fprintf(out, "  lost %d, reordered (late) %d, in order %d\n", max(lost, 0), total.Late, total.InOrder)
	hintForeign(out, total.Foreign, cfg.flows)
	fmt.Fprintf(out, "  one-way latency: %s\n", latencies(&lat))
	lines, checks := captureChecks(p.Ports())
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
	checks = append(rxChecks(total.Received, total.Foreign, cfg.expect), checks...)
	totals := map[string]any{"received": total.Received, "bytes": total.Bytes, "foreign": total.Foreign, "lost": max(lost, 0), "late": total.Late,
		"in_order": total.InOrder, "latency_p50_ns": lat.Quantile(0.5), "latency_p99_ns": lat.Quantile(0.99), "latency_p999_ns": lat.Quantile(0.999)}
	ft, _ := flowRun.flowTotals()
	js.summary(secs, merged(totals, ft), checks, interrupted)
	stopErr = errors.Join(stopErr, flowRun.summary(out, elapsed, totals))
	ok := report(out, checks, interrupted)
	return ok, stopErr
}

// addressing reads the address, port and VLAN flags (config.CheckAddresses:
// a generator stage's keys follow the same rules).
func (cfg genConfig) addressing() (*traffic.Addressing, net.HardwareAddr, net.HardwareAddr, error) {
	var errs []error
	flag := func(key string) string { return strings.ReplaceAll(key, "_", "-") }
	addr, srcMAC, dstMAC := config.CheckAddresses(config.Addresses{SrcMAC: cfg.srcMAC, DstMAC: cfg.dstMAC, SrcIP: cfg.srcIP, DstIP: cfg.dstIP,
		DstPort: cfg.dstPort, SrcPort: int(cfg.srcPort), VLAN: int(cfg.vlan)}, cfg.flows,
		func(key string) string { return "--" + flag(key) },
		func(key string, err error) { errs = append(errs, flagged(flag(key), err)) })
	if err := usage(errs...); err != nil {
		return nil, nil, nil, err
	}
	return addr, srcMAC, dstMAC, nil
}
