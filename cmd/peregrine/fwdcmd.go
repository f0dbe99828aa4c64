package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

type fwdConfig struct {
	ports    []string
	mode     string
	duration time.Duration
	burst    int
	lcores   string
	idle     string
	period   time.Duration
	peerMAC  string
	size     string
	rate     string
	flows    int
	frames   int
	quiet    bool
	obs      observeFlags
	// ready is called once the ports are open and the loops run (tests).
	ready func()
	// done, when set, ends the run once it returns true for the frames
	// the stages received so far (tests).
	done func(rx uint64) bool
}

func newFwdCommand() *cobra.Command {
	var cfg fwdConfig
	cmd := &cobra.Command{
		Use:   "fwd",
		Short: "Forward between ports like dpdk-testpmd (io, mac, macswap, 5tswap, icmpecho, csum, rxonly, txonly)",
		Long: `fwd runs testpmd's forwarding modes on poll loops:

  io       forward frames untouched
  mac      rewrite source MAC to the output port's, destination to --peer-mac
  macswap  swap source and destination MAC
  5tswap   swap MACs, IP addresses (v4, v6) and TCP/UDP ports; checksums stay valid
  icmpecho answer ICMP and ICMPv6 echo requests back out the port; other frames
           are dropped and counted
  csum     verify IPv4 header and TCP/UDP/ICMP checksums, count bad ones, forward
           untouched
  rxonly   receive and free
  txonly   transmit generated frames (--size, --rate, --flows), receive nothing

With two ports, frames received on one are sent on the other (both ways);
with one port, they go back out the port they came in on. Each queue of
each port gets its own forwarding stage; stages are spread over --lcores.
Frames the output refuses are dropped and counted, as in testpmd. Per-port
(and, with several queues, per-queue) rates print every --stats-period; a
summary prints at the end (after --duration, or on SIGINT/SIGTERM).`,
		Example: `  peregrine fwd --port afxdp:veth1?queue=0 --port afxdp:veth2?queue=0 --mode io
  peregrine fwd --port afpacket:eth1 --mode macswap --duration 10s
  peregrine fwd --port afxdp:veth0 --mode txonly --size 64 --rate 1mpps
  peregrine fwd --port null: --port null: --mode io --duration 5s`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return cfg.validate(cmd.Flags()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := notifyContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			ok, err := runFwd(ctx, cfg, cmd.OutOrStdout())
			if err == nil && !ok {
				return exitError{exitFailed}
			}
			return err
		},
	}
	f := cmd.Flags()
	cfg.obs.register(f)
	f.StringArrayVar(&cfg.ports, "port", nil, "port spec (repeat for a second port), e.g. afxdp:veth0?queue=0, afpacket:eth1, mem:a/0, null:")
	f.StringVar(&cfg.mode, "mode", "io", "forwarding mode: io, mac, macswap, 5tswap, icmpecho, csum, rxonly, txonly")
	f.BoolVar(&cfg.quiet, "quiet", false, "no live per-period lines")
	f.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: run until SIGINT/SIGTERM)")
	f.IntVar(&cfg.burst, "burst", 32, "frames per burst (1..256)")
	f.StringVar(&cfg.lcores, "lcores", "0", "CPUs for the poll loops, e.g. 0 or 0,1 or 0-3")
	idleVar(f, &cfg.idle)
	f.DurationVar(&cfg.period, "stats-period", time.Second, "how often to print rates (1ms or more)")
	f.StringVar(&cfg.peerMAC, "peer-mac", "", "destination MAC written in mac mode")
	f.StringVar(&cfg.size, "size", "64", "txonly: frame size without FCS: N, MIN-MAX or imix")
	f.StringVar(&cfg.rate, "rate", "max", "txonly: rate per port and queue: 1mpps, 500kpps, 10gbit, max")
	f.IntVar(&cfg.flows, "flows", 1, "txonly: number of flows (UDP source ports)")
	f.IntVar(&cfg.frames, "frames", 16384, "frames in the packet pool (at least 1024 per lcore)")
	return cmd
}

// runFwd forwards. It reports false when a check failed: a pcap input not
// replayed whole, a capture not written whole.
func runFwd(ctx context.Context, cfg fwdConfig, out io.Writer) (bool, error) {
	out, js := jsonOutput(cfg.obs.json, out)
	if n := len(cfg.ports); n < 1 || n > 2 {
		return false, fmt.Errorf("--port: give one or two ports (got %d), e.g. --port afxdp:veth0 --port afxdp:veth1", n)
	}
	cpus, err := lcore.ParseCPUList(cfg.lcores)
	if err != nil {
		return false, fmt.Errorf("--lcores: %w", err)
	}
	idle, err := lcore.ParseIdleMode(cfg.idle)
	if err != nil {
		return false, fmt.Errorf("--idle: %w", err)
	}
	txonly := cfg.mode == "txonly"
	fopts := app.ForwarderOptions{Mode: cfg.mode, Burst: cfg.burst, Flows: cfg.flows}
	if err := app.ValidateForwarders(fopts); err != nil {
		return false, flagError(err, map[string]string{"Mode": "--mode"})
	}
	if cfg.peerMAC != "" {
		if fopts.PeerMAC, err = net.ParseMAC(cfg.peerMAC); err != nil {
			return false, fmt.Errorf("--peer-mac %q: %w", cfg.peerMAC, err)
		}
	}
	if txonly {
		if fopts.Sizes, err = traffic.ParseSizes(cfg.size, traffic.MaxFrame); err != nil {
			return false, fmt.Errorf("--size: %w", err)
		}
		if fopts.Rate, err = parseRate(cfg.rate, fopts.Sizes.Mean()); err != nil {
			return false, fmt.Errorf("--rate: %w", err)
		}
	}

	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "peregrine", Frames: cfg.frames},
		Ports:  cfg.ports,
		Lcores: app.OnCPUs(cpus...),
		Idle:   lcore.IdlePolicy{Mode: idle},
	})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(p)
	fw, err := p.AddForwarders(fopts)
	if err != nil {
		return false, joinStop(err, p)
	}
	fmt.Fprintf(out, "peregrine fwd: mode %s, %d port(s), %d stage(s) on lcores %v, burst %d\n", cfg.mode, len(p.Ports()), len(fw.Stages), cpus, cfg.burst)
	if err := p.Start(); err != nil {
		return false, joinStop(flagError(err, map[string]string{"Lcores": "--lcores"}), p)
	}
	if cfg.ready != nil {
		cfg.ready()
	}
	meter := newPortMeter(p.Ports())
	meter.js = js
	var done func() bool
	if cfg.done != nil {
		done = func() bool { return cfg.done(fw.Stats().Rx) }
	}
	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: cfg.period, Tick: func(e time.Duration) { meter.tick(out, e, cfg.quiet) }, Done: done})
	if err != nil {
		return false, joinStop(err, p)
	}
	stopErr := p.Stop()
	lines, checks := captureChecks(p.Ports())
	fmt.Fprintf(out, "\nsummary after %.2fs:\n", elapsed.Seconds())
	meter.summary(out, elapsed, checks, interrupted)
	stageLines(out, fw, p.Ports(), cpus)
	if !txonly {
		fs := fw.Stats()
		fmt.Fprintf(out, "  forwarder drops (output refused): %d\n", fs.Dropped)
		switch cfg.mode {
		case "csum":
			fmt.Fprintf(out, "  checksums: %d bad IPv4 header, %d bad TCP/UDP/ICMP of %d frames\n", fs.BadIPChecksum, fs.BadL4Checksum, fs.Rx)
		case "icmpecho":
			fmt.Fprintf(out, "  echo replies %d; dropped, not an echo request: %d\n", fs.Rx-fs.NotEcho, fs.NotEcho)
		}
	}
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
	if txonly {
		warnRateOfStages(out, fopts.Rate, cfg.rate, fw.Stages, elapsed)
	}
	ok := true
	if len(checks) > 0 {
		ok = report(out, checks, interrupted)
	}
	return ok, stopErr
}

// stageLines prints where each forwarding stage ran (one per queue of
// each port, spread over the loops) with its own counters, and their sum:
// a queue's figures are its stage's alone, so two queues on two loops show
// as two lines on two CPUs.
func stageLines(out io.Writer, fw *app.Forwarders, ports []port.Port, cpus []int) {
	var rx, tx, dropped uint64
	loops := map[int]bool{}
	for i, pl := range fw.Placed {
		in, outPort := ports[pl.Port], ports[(pl.Port+1)%len(ports)]
		loops[pl.Loop] = true
		line := fmt.Sprintf("  stage %d: %s queue %d → %s queue %d on lcore %d (CPU %d):", i, in.Info().Name, pl.Queue, outPort.Info().Name, pl.Queue, pl.Loop, cpus[pl.Loop])
		switch st := fw.Stages[i].(type) {
		case *fwd.Forwarder:
			fs := st.Stats()
			rx, tx, dropped = rx+fs.Rx, tx+fs.Tx, dropped+fs.Dropped
			line += fmt.Sprintf(" rx %d, tx %d, dropped %d", fs.Rx, fs.Tx, fs.Dropped)
		case *traffic.Generator:
			gs := st.Stats()
			tx += gs.Sent
			line += fmt.Sprintf(" generated %d", gs.Sent)
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "  sum of %d stages on %d lcore(s): rx %d, tx %d, dropped %d\n", len(fw.Placed), len(loops), rx, tx, dropped)
}
