package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/qpx"
)

type roceConfig struct {
	ports     []string
	duration  time.Duration
	burst     int
	lcores    string
	idle      string
	period    time.Duration
	frames    int
	slots     int
	firstQPN  uint32
	open      int
	retire    int
	qps       []string
	pmtu      int
	strictPSN bool
	quiet     bool
	obs       observeFlags
	ready     func() // tests: called once the loops run
}

func newRoCECommand() *cobra.Command {
	var cfg roceConfig
	cmd := &cobra.Command{
		Use:   "roce",
		Short: "Translate RoCEv2 QP numbers between a network port and a host port (global ↔ local)",
		Long: `roce runs the RoCEv2 QP-translation stage (core/roce) between two ports:
the first --port is the network (frames name QPs by 24-bit global QPNs),
the second the host (frames name QPs by their local context number,
0..--slots-1). Toward the host each RoCEv2 frame's ICRC is checked, its
destination QPN translated through the CAM (a retired number is a stale
packet: dropped and counted), its access and PSN checked against the
context, its destination QP rewritten and a new ICRC written. Toward the
network the local number selects the context, whose peer QPN and P_Key
are written, with a new ICRC. VLAN-tagged (802.1Q, QinQ) and IPv4-optioned
RoCEv2 frames are handled like plain ones; a RoCEv2 datagram behind IPv6
extension headers is dropped (unsupported=). Other frames pass untouched.

QPs: --retire N opens and closes N QPs first (their numbers are retired),
--open N opens N QPs under the next numbers of the rotation, --qp SPEC
opens one more (qpn=,dest=,pkey=,psn=,rx-psn=,tx-psn=,access=rwa|all).
The QPs are printed with their local numbers; per-reason counters print
every --stats-period and at the end. With a pcap: network port the run
ends when the capture is read.`,
		Example: `  peregrine roce --port pcap:in.pcap --port pcap-out:out.pcap --retire 1 --open 3
  peregrine roce --port afpacket:veth0 --port afpacket:veth1 --qp qpn=0x11,dest=0x22,psn=0 --duration 10s`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return cfg.validate() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runRoCE(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	cfg.obs.register(f) // --json, --metrics
	f.BoolVar(&cfg.quiet, "quiet", false, "no per-period lines")
	f.StringArrayVar(&cfg.ports, "port", nil, "port spec, twice: the network port, then the host port")
	f.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: until SIGINT/SIGTERM or the pcap input ends)")
	f.IntVar(&cfg.burst, "burst", 32, "frames per burst (1..256)")
	f.StringVar(&cfg.lcores, "lcores", "0", "CPU for the poll loop")
	idleVar(f, &cfg.idle)
	f.DurationVar(&cfg.period, "stats-period", time.Second, "how often to print counters (1ms or more)")
	f.IntVar(&cfg.frames, "frames", 4096, "frames in the packet pool")
	f.IntVar(&cfg.slots, "slots", 64, "local QP contexts (the CAM's size, 1..1048576)")
	f.Uint32Var(&cfg.firstQPN, "first-qpn", 0, "first global QPN of the rotation, 0x2..0xfffffe (0: 2)")
	f.IntVar(&cfg.open, "open", 0, "QPs to open under the next numbers of the rotation")
	f.IntVar(&cfg.retire, "retire", 0, "QPs to open and close first: their numbers are retired (0..16777213)")
	f.StringArrayVar(&cfg.qps, "qp", nil, "one more QP: qpn=N,dest=N,pkey=N,psn=N,access=rw (repeat)")
	sizeVar(f, &cfg.pmtu, "pmtu", 1024, "path MTU sizing RDMA READ responses: 256, 512, 1KiB, 2KiB or 4KiB")
	f.BoolVar(&cfg.strictPSN, "strict-psn", false, "drop requests whose PSN is ahead of the expected one (leaving the expectation, so a resend recovers) instead of counting and passing them; duplicates always pass")
	cmd.AddCommand(newRoCESampleCommand())
	return cmd
}

// newRoCESampleCommand is `roce sample -o FILE`: a capture of RoCEv2
// frames to feed the stage (configs/roce-pcap.yaml's roce-in.pcap).
func newRoCESampleCommand() *cobra.Command {
	var path string
	var qpns []string
	cmd := &cobra.Command{
		Use:   "sample -o FILE",
		Short: "Write a pcap of RoCEv2 frames to feed the roce stage (e.g. configs/roce-pcap.yaml's roce-in.pcap)",
		Long: `sample writes a capture of RoCEv2 SEND Only frames (8-byte payload, a correct
ICRC) from 198.18.0.1 to 198.18.0.2, one per --qpn in order, each QPN's
frames numbered from PSN 0. The default QPNs suit configs/roce-pcap.yaml:
its open QPs 3, 4 and 0x100 (four frames forwarded) and its retired QPN 2
(two stale frames, dropped and counted).`,
		Example: `  peregrine roce sample -o roce-in.pcap && peregrine run -c configs/roce-pcap.yaml
  peregrine roce sample -o in.pcap --qpn 0x11,0x11,0x12`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return usage(fmt.Errorf("-o FILE is required: where to write the capture, e.g. -o roce-in.pcap"))
			}
			var list []uint32
			for _, q := range qpns {
				v, err := strconv.ParseUint(strings.TrimSpace(q), 0, 32)
				if err != nil || v > qpx.MaxQPN {
					return usage(fmt.Errorf("--qpn %q: give a 24-bit QP number, e.g. 3 or 0x100", q))
				}
				list = append(list, uint32(v))
			}
			if len(list) == 0 {
				return usage(fmt.Errorf("--qpn: give at least one QP number"))
			}
			f, err := os.Create(path)
			if err != nil {
				return fmt.Errorf("-o: %w", err)
			}
			n, err := app.WriteRoCESample(f, list)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("-o %s: %w", path, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d RoCEv2 frames to %s (QPNs %s)\n", n, path, strings.Join(qpns, ","))
			return nil
		},
	}
	def := make([]string, len(app.DefaultRoCESampleQPNs))
	for i, q := range app.DefaultRoCESampleQPNs {
		def[i] = fmt.Sprintf("%#x", q)
	}
	cmd.Flags().StringVarP(&path, "output", "o", "", "the capture file to write (required)")
	cmd.Flags().StringSliceVar(&qpns, "qpn", def, "destination QPN of each frame, in order")
	return cmd
}

// validate checks every flag before anything is opened.
func (cfg *roceConfig) validate() error {
	if len(cfg.ports) != 2 {
		return usage(fmt.Errorf("--port: give two ports, the network then the host (got %d), e.g. --port pcap:in.pcap --port pcap-out:out.pcap", len(cfg.ports)))
	}
	if err := usage(checkPorts("port", cfg.ports...), cfg.obs.validate()); err != nil {
		return err
	}
	cpus, err := parseCPUs("lcores", cfg.lcores)
	if err != nil {
		return usage(err)
	}
	if len(cpus) != 1 {
		return usage(fmt.Errorf("--lcores %s: the stage runs one poll loop: give one CPU", cfg.lcores))
	}
	var opens error
	if n := cfg.open + len(cfg.qps); cfg.open >= 0 && n > cfg.slots && cfg.slots >= 1 {
		opens = fmt.Errorf("--open %d and %d --qp make %d QPs: more than --slots %d; raise --slots or open fewer", cfg.open, len(cfg.qps), n, cfg.slots)
	}
	var qps []app.RoCEQP
	for _, q := range cfg.qps {
		spec, err := app.ParseRoCEQP(q)
		if err != nil {
			return usage(fmt.Errorf("--qp %q: %w", q, err))
		}
		qps = append(qps, spec)
	}
	var qpNumbers error
	if config.CheckFirstQPN(cfg.firstQPN) == nil && cfg.retire >= 0 && cfg.retire <= config.MaxRetire && cfg.open >= 0 && cfg.open <= 1<<20 {
		if i, err := config.CheckRoCEQPs(cfg.firstQPN, cfg.retire, cfg.open, qps); err != nil {
			qpNumbers = fmt.Errorf("--qp %q: %w", cfg.qps[i], err)
		}
	}
	return usage(
		checkInt("burst", cfg.burst, 1, maxBurst),
		checkInt("slots", cfg.slots, 1, 1<<20),
		flagged("first-qpn", config.CheckFirstQPN(cfg.firstQPN)),
		checkInt("retire", cfg.retire, 0, config.MaxRetire),
		checkInt("open", cfg.open, 0, 1<<20),
		opens,
		qpNumbers,
		flagged("pmtu", config.CheckPMTU(cfg.pmtu)),
		checkIdle(cfg.idle),
		checkPeriod(cfg.period),
		checkDuration("duration", cfg.duration, "run until a signal or the end of a pcap input"),
		checkFrames(cfg.frames, 1, 0, 0),
	)
}

func runRoCE(ctx context.Context, cfg roceConfig, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	out, js := jsonOutput(cfg.obs.json, out)
	ro := app.RoCEOptions{Net: 0, Host: 1, Slots: cfg.slots, FirstQPN: cfg.firstQPN, Retire: cfg.retire, Open: cfg.open,
		OpenDefaults: app.RoCEQP{Access: qpx.AccessAll}, Burst: cfg.burst, PMTU: cfg.pmtu, StrictPSN: cfg.strictPSN}
	for _, s := range cfg.qps {
		q, _ := app.ParseRoCEQP(s) // validate read each
		ro.QPs = append(ro.QPs, q)
	}
	cpus, _ := lcore.ParseCPUList(cfg.lcores)
	idle, _ := lcore.ParseIdleMode(cfg.idle)
	obs, err := cfg.obs.start(out)
	if err != nil {
		return err
	}
	defer obs.close()
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "peregrine", Frames: cfg.frames},
		Ports:  cfg.ports,
		Lcores: app.OnCPUs(cpus[0]),
		Idle:   lcore.IdlePolicy{Mode: idle},
	})
	if err != nil {
		return flagError(err, map[string]string{"Pool": "--frames", "Lcores": "--lcores", "Idle": "--idle", "Ports": "--port"})
	}
	obs.watchPipeline(p)
	r, err := p.AddRoCE(ro)
	if err != nil {
		return joinStop(flagError(err, map[string]string{"Slots": "--slots", "Retire": "--retire", "Open": "--open", "QPs": "--qp", "PMTU": "--pmtu", "FirstQPN": "--first-qpn", "Burst": "--burst"}), p)
	}
	if obs.reg != nil {
		obs.warn(config.ExportRoCE(obs.reg, "roce", r))
	}
	fmt.Fprintf(out, "peregrine roce: network %s, host %s, %d local QP contexts, lcore %d\n", cfg.ports[0], cfg.ports[1], r.Table.Slots(), cpus[0])
	if len(r.Retired) > 0 {
		fmt.Fprintf(out, "  retired %d QPN(s): %s\n", len(r.Retired), config.FormatRetired(r.Retired))
	}
	for _, q := range r.QPs {
		fmt.Fprintf(out, "  qp %#06x -> local %d (peer qpn %#06x, pkey %#04x, rx psn %d, tx psn %d)\n", q.QPN, q.Local, q.Ctx.DestQPN, q.Ctx.PKey, q.Ctx.ExpectedPSN, q.Ctx.NextPSN)
	}
	if err := p.Start(); err != nil {
		return joinStop(flagError(err, map[string]string{"Lcores": "--lcores"}), p)
	}
	if cfg.ready != nil {
		cfg.ready()
	}
	tick := func(elapsed time.Duration) {
		s := r.Stage.Stats()
		js.interval(elapsed.Seconds(), config.RoCECounters(s))
		if cfg.quiet {
			return
		}
		fmt.Fprintf(out, "%s\n%s\n", liveLine(elapsed, fmt.Sprintf("to-host %v", s.ToHost)), liveLine(elapsed, fmt.Sprintf("to-net  %v", s.ToNet)))
	}
	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: cfg.period, Tick: tick,
		Done: func() bool { return r.Done(p, 0) }})
	if err != nil {
		return joinStop(err, p)
	}
	stopErr := p.Stop()
	s := r.Stage.Stats()
	fmt.Fprintf(out, "\nsummary after %.2fs:\n  to-host %v\n  to-net  %v\n  qpx     %v\n", elapsed.Seconds(), s.ToHost, s.ToNet, s.QPX)
	totals := map[string]any{}
	for k, v := range config.RoCECounters(s) {
		totals[k] = v
	}
	capLines, capChecks := captureChecks(p.Ports())
	checks := append([]check{{stopErr == nil, "loop and ports stopped cleanly" + because(stopErr)}}, capChecks...)
	js.summary(elapsed.Seconds(), totals, checks, interrupted)
	for _, l := range capLines {
		fmt.Fprintf(out, "  %s\n", l)
	}
	if len(capChecks) > 0 && !report(out, checks, interrupted) && stopErr == nil {
		return exitError{exitFailed}
	}
	return stopErr
}
