package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
)

// rxFlowFlags are gen --rx's per-flow statistics (--per-flow,
// --per-flow-histograms, --hist-out, --flows-out, --top-flows,
// --all-flows) and its streamed records (--format).
type rxFlowFlags struct {
	perFlow  bool
	flowHist bool
	histOut  string
	flowsOut string
	topFlows int
	allFlows bool
	format   string
}

// defaultTopFlows is how many flows the summary lists by default.
const defaultTopFlows = 10

func (r *rxFlowFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&r.perFlow, "per-flow", false, "receive: per-flow loss, reordering (RFC 4737 count and extent), duplicates and latency, an HDR latency histogram (1 %) per --stats-period")
	f.BoolVar(&r.flowHist, "per-flow-histograms", false, "receive with --per-flow: also a latency histogram per flow (1 KiB each), for each flow's p50/p99/p99.9 (within 12.5 %) in --flows-out and the summary; costs more per frame than --per-flow alone (peregrine bench rxflows)")
	f.StringVar(&r.histOut, "hist-out", "", "receive with --per-flow: write each period's latency histogram to this file, CSV (.csv) or JSON lines (.json)")
	f.StringVar(&r.flowsOut, "flows-out", "", "receive with --per-flow: write the per-flow table to this file at the end, CSV (.csv) or JSON (.json)")
	f.IntVar(&r.topFlows, "top-flows", defaultTopFlows, "receive with --per-flow: the JSON summary (--json, --format jsonl) lists this many flows, most lost first")
	f.BoolVar(&r.allFlows, "all-flows", false, "receive with --per-flow: the JSON summary lists every flow received instead of --top-flows")
	f.StringVar(&r.format, "format", formatText, "receive: text, or stream every --stats-period and the summary as jsonl or csv records on stdout, each with the run's parameters (instead of the text)")
}

func (r *rxFlowFlags) validate(fs *pflag.FlagSet, rx bool) error {
	if !rx {
		return inert(fs, "without --rx: it belongs to the receiver", "per-flow", "per-flow-histograms", "hist-out", "flows-out", "top-flows", "all-flows", "format")
	}
	if err := checkFormat(r.format); err != nil {
		return err
	}
	if j := fs.Lookup("json"); j != nil && j.Value.String() == "true" && streamed(r.format) {
		return fmt.Errorf("--format %s and --json both take stdout: give one (--format jsonl is --json's lines with the parameters in each)", r.format)
	}
	if !r.perFlow {
		if err := inert(fs, "without --per-flow", "per-flow-histograms", "hist-out", "flows-out", "top-flows", "all-flows"); err != nil {
			return err
		}
	}
	if err := checkInt("top-flows", r.topFlows, 1, maxFlows); err != nil {
		return err
	}
	if err := inert(fs, "with --all-flows: every flow is listed", "top-flows"); err != nil && r.allFlows {
		return err
	}
	for flag, path := range map[string]string{"hist-out": r.histOut, "flows-out": r.flowsOut} {
		if ext := filepath.Ext(path); path != "" && ext != ".csv" && ext != ".json" {
			return fmt.Errorf("--%s %q: name a .csv or .json file", flag, path)
		}
	}
	return nil
}

// rxFlowRun writes what the flags ask for while gen --rx runs: the
// --hist-out intervals, the --format records, the per-flow summary.
type rxFlowRun struct {
	r       rxFlowFlags
	sinks   *app.Sinks
	flows   int
	srcPort int
	hist    *os.File
	seen    uint64 // intervals written
	stream  *recordStream
	last    uint64  // frames at the last tick
	lastAt  float64 // and its time, seconds
}

// rxColumns are gen --rx's CSV columns: an interval's, then the
// summary's.
var rxColumns = []string{"elapsed_s", "received", "received_per_s", "latency_count", "latency_min_ns", "latency_p50_ns",
	"latency_p99_ns", "latency_p99_9_ns", "latency_max_ns", "bytes", "foreign", "lost", "late", "in_order",
	"flows_sent", "flows_received", "flows_lost", "duplicates", "reordered", "reordering_extent_max"}

// start opens what the flags ask for; nil when they ask for nothing.
func (r *rxFlowFlags) start(sinks *app.Sinks, out io.Writer, params map[string]any, flows int, srcPort uint16) (*rxFlowRun, error) {
	if !r.perFlow && !streamed(r.format) {
		return nil, nil
	}
	run := &rxFlowRun{r: *r, sinks: sinks, flows: flows, srcPort: int(srcPort), stream: newRecordStream(r.format, out, params, rxColumns...)}
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

// tick writes the period that just ended: its --format record and, with
// --per-flow, the latency interval the sinks closed since the last tick.
func (run *rxFlowRun) tick(elapsed time.Duration) {
	if run == nil {
		return
	}
	secs := elapsed.Seconds()
	n := run.sinks.Frames()
	rec := map[string]any{"elapsed_s": secs, "received": n}
	if dt := secs - run.lastAt; dt > 0 {
		rec["received_per_s"] = float64(n-run.last) / dt
	}
	run.last, run.lastAt = n, secs
	if run.r.perFlow {
		if last := run.sinks.TakeIntervals(); last.Count() > 0 {
			run.seen++
			iv := traffic.NewIntervalRecord(run.seen, secs, &last)
			maps.Copy(rec, map[string]any{"latency_count": iv.Count, "latency_min_ns": iv.Min, "latency_p50_ns": iv.P50,
				"latency_p99_ns": iv.P99, "latency_p99_9_ns": iv.P999, "latency_max_ns": iv.Max})
			if run.hist != nil {
				if filepath.Ext(run.r.histOut) == ".csv" {
					_ = iv.WriteCSV(run.hist)
				} else {
					_ = iv.WriteJSON(run.hist)
				}
			}
		}
	}
	_ = run.stream.write("interval", rec)
}

// flowTotals are the per-flow figures of the summary (--json and
// --format): flows sent and received, their loss, duplicates and
// reordering summed, and the flows themselves, most lost first (the top
// --top-flows, or all with --all-flows). Call after Stop.
func (run *rxFlowRun) flowTotals() (map[string]any, []traffic.FlowRecord) {
	if run == nil || !run.r.perFlow {
		return nil, nil
	}
	flows, _, _ := run.sinks.Flows()
	recs := traffic.FlowRecords(flows, run.sinks.FlowLatencies(), run.srcPort)
	var lost, dups, reord, maxExt, flowsLost uint64
	for _, f := range recs {
		lost, dups, reord = lost+f.Lost, dups+f.Duplicates, reord+f.Reordered
		maxExt = max(maxExt, f.MaxExtent)
		if f.Lost > 0 {
			flowsLost++
		}
	}
	top := slices.Clone(recs)
	slices.SortStableFunc(top, func(a, b traffic.FlowRecord) int { return cmp.Compare(b.Lost, a.Lost) })
	if !run.r.allFlows && len(top) > run.r.topFlows {
		top = top[:run.r.topFlows]
	}
	listed := fmt.Sprintf("top %d by loss", run.r.topFlows)
	if run.r.allFlows {
		listed = "all"
	}
	return map[string]any{"flows_sent": run.flows, "flows_received": len(recs), "flows_lost": flowsLost, "flows_lost_frames": lost,
		"duplicates": dups, "reordered": reord, "reordering_extent_max": maxExt, "flows_listed": listed, "flows": top}, recs
}

// summary writes the summary record, prints the per-flow totals and
// writes --flows-out; call after Stop with the run's totals.
func (run *rxFlowRun) summary(out io.Writer, elapsed time.Duration, totals map[string]any) error {
	if run == nil {
		return nil
	}
	run.tick(elapsed)
	ft, recs := run.flowTotals()
	rec := merged(totals, ft)
	rec["elapsed_s"] = elapsed.Seconds()
	err := run.stream.write("summary", rec)
	if !run.r.perFlow {
		return err
	}
	_, total, _ := run.sinks.Flows()
	fmt.Fprintf(out, "  per flow: %d of %d flows received; lost %d, duplicated %d, reordered %d (largest extent %d)\n",
		ft["flows_received"], run.flows, ft["flows_lost_frames"], ft["duplicates"], ft["reordered"], ft["reordering_extent_max"])
	fmt.Fprintf(out, "  latency (HDR, 1 %%; loop timestamps, 1 ns resolution of CLOCK_MONOTONIC read once per burst): min %d p50 %d p99 %d p99.9 %d max %d ns\n",
		total.Min(), total.Quantile(0.5), total.Quantile(0.99), total.Quantile(0.999), total.Max())
	if run.hist != nil {
		err = errors.Join(err, run.hist.Close())
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

// merged is a and b in one new map (b wins).
func merged(a, b map[string]any) map[string]any {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// rxParams are the receiver's settings every --format record carries.
func (c *genConfig) rxParams() map[string]any {
	return map[string]any{"port": c.port, "flows": c.flows, "src_port": c.srcPort, "stats_period_s": c.period.Seconds(),
		"expect": c.expect, "idle_exit_s": c.idleExit.Seconds(), "duration_s": c.duration.Seconds(), "burst": c.burst,
		"lcores": c.lcores, "per_flow": c.rxf.perFlow, "per_flow_histograms": c.rxf.flowHist, "latency": "loop timestamps, CLOCK_MONOTONIC read once per burst, 1 ns resolution"}
}
