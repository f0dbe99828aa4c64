package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/core/clock"
)

type runConfig struct {
	file     string
	check    bool
	duration time.Duration
	// durationSet: --duration was given (0 then means until a signal).
	durationSet bool
	quiet       bool
	obs         observeFlags
}

func newRunCommand() *cobra.Command {
	var cfg runConfig
	var c *config.Config
	cmd := &cobra.Command{
		Use:   "run -c FILE",
		Short: "Run the appliance from a YAML config file (ports, lcores, a pipeline of stages per lcore)",
		Long: `run builds the pipeline a YAML file declares — the packet pool, the ports (the
same specs as the --port flags), the lcores and, per lcore, a pipeline of
stages (` + stageKinds() + `) — and runs it until
run.duration passes, every stage with an end has finished, or SIGINT/SIGTERM.

The file is read strictly and checked whole before anything is opened:
every unknown key, every value of the wrong type and every bad value is
reported at once, each with the field's path and the fix. A field left out
takes its default; 0 given for a field that has one is an error. File
names (pcap:FILE, pcap-out:FILE, capture=FILE) are relative to the config
file's directory, and a capture to read must exist. --check stops there
(exit 0 when the file is valid, 2 with every problem listed when not).

On SIGINT or SIGTERM run stops posting and sending, waits for in-flight
operations and frames for up to run.drain, stops the loops, closes the
ports and checks that every frame is back in the pool; it exits 0 only
then, else 1 naming what was lost. A second signal cuts the drain short;
a third stops the process at once. demo, fwd, gen, fabric and transport
stop the same way.

Examples of every use are in configs/ (configs/demo.yaml first: the
transport demo in memory, no privileges).`,
		Example: `  peregrine run -c configs/demo.yaml
  peregrine run --check -c configs/forwarder.yaml
  peregrine run -c configs/gen-sink.yaml --json
  peregrine run -c configs/demo.yaml --duration 0 --metrics 127.0.0.1:9100   # until SIGINT`,
		Args: cobra.NoArgs,
		// The file is read and checked whole before anything is opened.
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg.durationSet = cmd.Flags().Changed("duration")
			if cfg.file == "" {
				return usage(fmt.Errorf("-c FILE is required: the YAML config to run, e.g. peregrine run -c configs/demo.yaml"))
			}
			if err := usage(checkDuration("duration", cfg.duration, "run until every stage with an end has finished, or a signal"), cfg.obs.validate()); err != nil {
				return err
			}
			var err error
			if c, err = config.Load(cfg.file); err != nil {
				return usage(fmt.Errorf("%s:\n%w", cfg.file, err))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if cfg.check {
				fmt.Fprintf(out, "%s: ok (%d port(s), %d stage(s) on %d lcore(s))\n", cfg.file, len(c.File.Ports), len(c.Stages), len(c.File.Pipelines))
				return nil
			}
			ctx, stop := notifyContext(cmd.Context(), cmd.ErrOrStderr())
			hurry := hurryOf(ctx)
			defer stop()
			ok, err := runAppliance(ctx, hurry, cfg, c, out)
			if err != nil {
				return err
			}
			if !ok {
				return exitError{exitFailed}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.file, "config", "c", "", "the YAML config file (required)")
	f.BoolVar(&cfg.check, "check", false, "validate the file and exit (0 when it is valid, 2 with every problem listed when not)")
	f.DurationVar(&cfg.duration, "duration", 0, "run this long instead of the file's run.duration (0: until every stage with an end has finished, or SIGINT/SIGTERM; default: the file's)")
	f.BoolVar(&cfg.quiet, "quiet", false, "no live per-period lines")
	cfg.obs.register(f)
	return cmd
}

func runAppliance(ctx, hurry context.Context, cfg runConfig, c *config.Config, out io.Writer) (bool, error) {
	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	// The sidecar starts first: a socket it cannot take fails the run
	// before any pipeline port opens.
	var side *runSidecar
	if c.File.Host != nil {
		if side, err = startSidecar(c.File.Host, obs); err != nil {
			return false, fmt.Errorf("%s: host: %w", cfg.file, err)
		}
	}
	sideStopped := false
	stopSide := func() error {
		if side == nil || sideStopped {
			return nil
		}
		sideStopped = true
		if !cfg.obs.json {
			printServeStats(out, side.srv)
		}
		return side.stop()
	}
	defer stopSide()
	a, err := config.Build(c, clock.NewReal())
	if err != nil {
		return false, fmt.Errorf("%s: %w", cfg.file, err)
	}
	obs.watchAppliance(a)
	obs.log.Info("appliance built", "config", cfg.file, "ports", len(c.File.Ports), "stages", len(a.Stages), "lcores", len(c.File.Pipelines))
	obs.textf("peregrine run: %s: %d port(s), %d stage(s) on %d lcore(s)\n", cfg.file, len(c.File.Ports), len(a.Stages), len(c.File.Pipelines))
	for _, line := range a.Readies() {
		obs.textf("%s\n", line)
		if cfg.obs.json {
			obs.jsonLine(readyRecord(line))
		}
	}
	pool := a.Pipeline.Pool()
	last := time.Duration(0)
	res := a.Run(ctx, hurry, config.RunOptions{
		Duration:    cfg.duration,
		DurationSet: cfg.durationSet,
		Started: func() {
			obs.log.Info("running")
			obs.textf("running (SIGINT or SIGTERM drains and stops)\n")
		},
		Tick: func(at time.Duration) {
			dt := (at - last).Seconds()
			last = at
			if cfg.obs.json {
				obs.jsonLine(intervalRecord(at, a, pool.InUse(), pool.Frames()))
				return
			}
			if cfg.quiet {
				return
			}
			for _, b := range a.Stages {
				if line := b.Running.Live(dt); line != "" {
					fmt.Fprintf(out, "[%5.1fs] %-12s %s\n", at.Seconds(), b.Name, line)
				}
			}
			fmt.Fprintf(out, "[%5.1fs] %-12s %d/%d in use\n", at.Seconds(), "pool", pool.InUse(), pool.Frames())
		},
		Stopping: func(interrupted, finished bool) {
			why := "its time is up"
			switch {
			case interrupted:
				why = "a signal"
			case finished:
				why = "every stage with an end finished"
			}
			obs.log.Info("stopping", "why", why, "drain", c.File.Run.Drain.D())
			obs.textf("stopping (%s): draining in-flight work for up to %v (a second signal cuts it short)\n", why, c.File.Run.Drain.D())
		},
	})
	sideErr := stopSide()
	capLines, capChecks := captureChecks(a.Pipeline.Ports())
	capOK := sideErr == nil
	for _, c := range capChecks {
		capOK = capOK && c.ok
	}
	if cfg.obs.json {
		rec := summaryRecord(res)
		rec["ok"] = res.OK() && capOK
		rec["captures"] = jsonChecks(capChecks)
		if side != nil {
			rec["sidecar_error"] = errText(sideErr)
		}
		obs.jsonLine(rec)
	} else {
		fmt.Fprintf(out, "\nsummary after %.2fs:\n", res.Elapsed.Seconds())
		var checks []check
		for _, r := range res.Reports {
			for _, l := range r.Lines {
				fmt.Fprintf(out, "  %-12s %s\n", r.Name, l)
			}
			for _, c := range r.Checks {
				checks = append(checks, check{c.OK, r.Name + ": " + c.What})
			}
		}
		fmt.Fprintf(out, "  pool: %d frames, %d in use after stop\n", pool.Frames(), res.PoolInUse)
		for _, l := range capLines {
			fmt.Fprintf(out, "  %s\n", l)
		}
		for _, l := range res.Lost {
			fmt.Fprintf(out, "  LOST %s\n", l)
		}
		checks = append(checks,
			check{len(res.Lost) == 0, fmt.Sprintf("drained and stopped with nothing lost (%d lost)", len(res.Lost))},
			check{res.Err == nil, "loops and ports stopped cleanly" + because(res.Err)})
		checks = append(checks, capChecks...)
		if side != nil {
			checks = append(checks, check{sideErr == nil, "the sidecar's applications detached and its frames returned" + because(sideErr)})
		}
		report(out, checks, res.Interrupted)
	}
	obs.log.Info("stopped", "ok", res.OK() && capOK, "lost", res.Lost, "pool_in_use", res.PoolInUse)
	return res.OK() && capOK, nil
}

// intervalRecord is one --json line per stats period.
func intervalRecord(at time.Duration, a *config.Appliance, inUse, frames int) map[string]any {
	stages := map[string]any{}
	for _, b := range a.Stages {
		stages[b.Name] = b.Running.Counters()
	}
	ports := map[string]any{}
	for _, p := range a.Pipeline.Ports() {
		st := p.Stats()
		ports[p.Info().Name] = map[string]uint64{"rx_packets": st.RxPackets, "rx_bytes": st.RxBytes, "tx_packets": st.TxPackets, "tx_bytes": st.TxBytes,
			"rx_dropped": st.RxDropped, "rx_no_buffer": st.RxNoBuf, "tx_refused": st.TxDropped, "errors": st.Errors}
	}
	return map[string]any{"type": "interval", "elapsed_s": at.Seconds(), "stages": stages, "ports": ports, "pool": map[string]int{"in_use": inUse, "frames": frames}}
}

// summaryRecord is the last --json line.
func summaryRecord(res config.Result) map[string]any {
	var reports []map[string]any
	for _, r := range res.Reports {
		var checks []map[string]any
		for _, c := range r.Checks {
			checks = append(checks, map[string]any{"ok": c.OK, "what": c.What})
		}
		reports = append(reports, map[string]any{"name": r.Name, "kind": r.Kind, "lines": r.Lines, "checks": checks})
	}
	lost := res.Lost
	if lost == nil {
		lost = []string{} // "lost": [] for scripts, not null
	}
	return map[string]any{"type": "summary", "elapsed_s": res.Elapsed.Seconds(), "interrupted": res.Interrupted, "ok": res.OK(),
		"lost": lost, "pool_in_use": res.PoolInUse, "stages": reports, "error": errText(res.Err)}
}

// jsonEncode writes v as one JSON line.
func jsonEncode(w io.Writer, v any) {
	_ = json.NewEncoder(w).Encode(v)
}

// stageKinds lists the stage kinds a file may use, for --help.
func stageKinds() string {
	var names []string
	for _, k := range config.Kinds() {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}

// errText is an error's text for a JSON record ("" for none).
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
