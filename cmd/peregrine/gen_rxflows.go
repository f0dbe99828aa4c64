package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
)

// rxFlowFlags are gen --rx's per-flow statistics: --per-flow, --hist-out
// and --flows-out.
type rxFlowFlags struct {
	perFlow  bool
	histOut  string
	flowsOut string
}

func (r *rxFlowFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&r.perFlow, "per-flow", false, "receive: per-flow loss, reordering (RFC 4737 count and extent), duplicates and latency, an HDR latency histogram (1 %) per --stats-period")
	f.StringVar(&r.histOut, "hist-out", "", "receive with --per-flow: write each period's latency histogram to this file, CSV (.csv) or JSON lines (.json)")
	f.StringVar(&r.flowsOut, "flows-out", "", "receive with --per-flow: write the per-flow table to this file at the end, CSV (.csv) or JSON (.json)")
}

func (r *rxFlowFlags) validate(fs *pflag.FlagSet, rx bool) error {
	if !rx {
		return inert(fs, "without --rx: it belongs to the receiver", "per-flow", "hist-out", "flows-out")
	}
	if !r.perFlow {
		if err := inert(fs, "without --per-flow", "hist-out", "flows-out"); err != nil {
			return err
		}
	}
	for flag, path := range map[string]string{"hist-out": r.histOut, "flows-out": r.flowsOut} {
		if ext := filepath.Ext(path); path != "" && ext != ".csv" && ext != ".json" {
			return fmt.Errorf("--%s %q: name a .csv or .json file", flag, path)
		}
	}
	return nil
}

// rxFlowRun writes what the flags ask for while gen --rx runs.
type rxFlowRun struct {
	r       rxFlowFlags
	sinks   *app.Sinks
	flows   int
	srcPort int
	hist    *os.File
	seen    uint64 // records written
}

func (r *rxFlowFlags) start(sinks *app.Sinks, flows int, srcPort uint16) (*rxFlowRun, error) {
	run := &rxFlowRun{r: *r, sinks: sinks, flows: flows, srcPort: int(srcPort)}
	if r.histOut != "" {
		f, err := os.Create(r.histOut)
		if err != nil {
			return nil, fmt.Errorf("--hist-out: %w", err)
		}
		run.hist = f
		if filepath.Ext(r.histOut) == ".csv" {
			if _, err := io.WriteString(f, traffic.IntervalCSVHeader); err != nil {
				return nil, fmt.Errorf("--hist-out: %w", err)
			}
		}
	}
	return run, nil
}

// tick writes the interval the sinks closed since the last tick, if any.
func (run *rxFlowRun) tick(elapsed time.Duration) {
	if run == nil || run.hist == nil {
		return
	}
	last := run.sinks.TakeIntervals()
	if last.Count() == 0 {
		return
	}
	run.seen++
	rec := traffic.NewIntervalRecord(run.seen, elapsed.Seconds(), &last)
	if filepath.Ext(run.r.histOut) == ".csv" {
		_ = rec.WriteCSV(run.hist)
	} else {
		_ = rec.WriteJSON(run.hist)
	}
}

// summary prints the per-flow totals and writes --flows-out; call after
// Stop.
func (run *rxFlowRun) summary(out io.Writer, elapsed time.Duration) error {
	if run == nil {
		return nil
	}
	run.tick(elapsed)
	flows, total, _ := run.sinks.Flows()
	recs := traffic.FlowRecords(flows, run.srcPort)
	var lost, dups, reord, maxExt uint64
	for _, f := range recs {
		lost, dups, reord = lost+f.Lost, dups+f.Duplicates, reord+f.Reordered
		maxExt = max(maxExt, f.MaxExtent)
	}
	fmt.Fprintf(out, "  per flow: %d of %d flows received; lost %d, duplicated %d, reordered %d (largest extent %d)\n",
		len(recs), run.flows, lost, dups, reord, maxExt)
	fmt.Fprintf(out, "  latency (HDR, 1 %%; loop timestamps, 1 ns resolution of CLOCK_MONOTONIC read once per burst): min %d p50 %d p99 %d p99.9 %d max %d ns\n",
		total.Min(), total.Quantile(0.5), total.Quantile(0.99), total.Quantile(0.999), total.Max())
	var err error
	if run.hist != nil {
		err = run.hist.Close()
	}
	if run.r.flowsOut != "" {
		f, ferr := os.Create(run.r.flowsOut)
		if ferr != nil {
			return fmt.Errorf("--flows-out: %w", ferr)
		}
		if filepath.Ext(run.r.flowsOut) == ".csv" {
			ferr = traffic.WriteFlowsCSV(f, recs)
		} else {
			enc := json.NewEncoder(f)
			enc.SetIndent("", "  ")
			ferr = enc.Encode(map[string]any{"flows_sent": run.flows, "flows_received": len(recs), "flows": recs})
		}
		err = errors.Join(err, ferr, f.Close())
	}
	return err
}
