// Package rxflows is the `peregrine bench rxflows` scenario: what `gen --rx
// --per-flow` costs per received frame against the plain receiver, at
// 10,000 flows, measured in one run.
//
// A traffic.Generator stamps 64-byte frames of consecutive flows (UDP
// source ports) into one end of a mem pair and a traffic.Sink polls the
// other, on one goroutine, one burst of 32 each iteration: "plain" (the sink
// with sequence checks and the coarse latency histogram, as `gen --rx`),
// "per-flow" (with FlowStats per flow and the HDR histogram, as `gen --rx
// --per-flow`) or "per-flow-histograms" (also a latency histogram per flow,
// as `gen --rx --per-flow --per-flow-histograms`). Only the sink's polls are
// timed. A round measures the three receivers back to back and gives one
// ratio of each per-flow mode to plain; the result is the median of the
// rounds' ratios. The goal is on per-flow; the histogram mode's ratio is
// printed beside it for information.
//
// Buffers: the generator allocates from the loop's cache, the pair carries
// the handles, and the sink frees each burst into the same cache.
package rxflows

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// Options configure a run.
type Options struct {
	Out io.Writer
	// Frames per measurement (0: 1<<20); Rounds of the three receivers, each
	// giving a ratio whose median is the result (0: 9); Flows (0: 10,000).
	Frames, Rounds, Flows int
}

// Result is the run's figures: each receiver's ns per frame (the fastest
// round), each round's per-flow ÷ plain receiver cost (sorted), the same
// for the per-flow histograms mode, and the per-flow loops' heap
// allocations per frame (the more of the two modes').
type Result struct {
	Plain, PerFlow, Histograms float64
	Ratios, HistogramRatios    []float64
	PerFlowAllocs              float64
	Pass, Fail                 int
}

const (
	burst     = 32
	frameSize = 64
	// PerFlowGoal is the most the per-flow receiver may cost per frame
	// against the plain one.
	PerFlowGoal = 1.2
)

// Run measures and prints the RATIO lines and BENCH-SUMMARY to o.Out.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Frames == 0 {
		o.Frames = 1 << 20
	}
	if o.Rounds == 0 {
		o.Rounds = 9
	}
	if o.Flows == 0 {
		o.Flows = 10000
	}
	var res Result
	best := map[string]float64{}
	var ratios, histRatios []float64
	allocs := map[string]float64{}
	modes := []string{"plain", "per-flow", "per-flow-histograms"}
	for round := 0; round < o.Rounds; round++ {
		// Each round measures the receivers back to back, in an order
		// that rotates, and gives one ratio: on a shared machine whose
		// speed drifts over seconds the two of one round see the same
		// machine, where the fastest of each over the whole run need not.
		ns := map[string]float64{}
		for i := range modes {
			mode := modes[(round+i)%len(modes)]
			if err := ctx.Err(); err != nil {
				return res, err
			}
			v, perFrame, err := measure(mode, o.Flows, o.Frames)
			if err != nil {
				return res, err
			}
			ns[mode] = v
			if b, ok := best[mode]; !ok || v < b {
				best[mode] = v
			}
			if a, ok := allocs[mode]; !ok || perFrame < a {
				allocs[mode] = perFrame
			}
		}
		if ns["plain"] > 0 {
			ratios = append(ratios, ns["per-flow"]/ns["plain"])
			histRatios = append(histRatios, ns["per-flow-histograms"]/ns["plain"])
		}
	}
	res.Plain, res.PerFlow, res.Histograms = best["plain"], best["per-flow"], best["per-flow-histograms"]
	res.PerFlowAllocs = max(allocs["per-flow"], allocs["per-flow-histograms"])
	res.Ratios, res.HistogramRatios = ratios, histRatios
	value, histValue := median(ratios), median(histRatios)
	fmt.Fprintf(o.Out, "FIGURE gen_rx_plain_ns_per_frame %.2f\n", res.Plain)
	fmt.Fprintf(o.Out, "FIGURE gen_rx_per_flow_ns_per_frame %.2f\n", res.PerFlow)
	fmt.Fprintf(o.Out, "FIGURE gen_rx_per_flow_histograms_ns_per_frame %.2f\n", res.Histograms)
	// Informational, no goal: what --per-flow-histograms adds.
	fmt.Fprintf(o.Out, "FIGURE gen_rx_per_flow_histograms_cost_vs_plain %.3f\n", histValue)
	fmt.Fprintf(o.Out, "  # the per-flow histograms mode against plain, the median of %d rounds' ratios (%s)\n", len(histRatios), spread(histRatios))
	rep := report.New(o.Out)
	rep.Add(report.Ratio{Name: "gen_rx_per_flow_cost_vs_plain", Value: value, Op: report.AtMost, Target: PerFlowGoal,
		Detail: fmt.Sprintf("receiver ns/frame at %d flows, %d-byte frames in bursts of %d: per-flow %.2f, plain %.2f (the fastest rounds; the receiver's polls timed alone); the ratio is the median of %d rounds' own ratios (%s), each round the three receivers over %d frames back to back",
			o.Flows, frameSize, burst, res.PerFlow, res.Plain, len(ratios), spread(ratios), o.Frames)})
	rep.Add(report.Ratio{Name: "gen_rx_per_flow_allocs_per_frame", Value: res.PerFlowAllocs, Op: report.AtMost, Target: 0,
		Detail: "heap allocations per frame of the per-flow loops, with and without per-flow histograms (runtime.MemStats.Mallocs over a measurement, the fewest of the rounds, the more of the two modes)"})
	res.Pass, res.Fail = rep.Summary()
	return res, nil
}

// measure runs the generator and mode's receiver over frames frames and
// returns the receiver's ns/frame — its polls timed alone, so the
// generator's share is not in it to be subtracted — and the loop's heap
// allocations per frame.
func measure(mode string, flows, frames int) (nsPerFrame, allocsPerFrame float64, err error) {
	pool, err := mbuf.New(mbuf.Options{Name: "rxflows", Frames: 4096})
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "rxflows", Size: 256})
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	defer b.Close()
	cache := pool.NewCache()
	defer cache.Close()
	gen, err := traffic.NewGenerator(traffic.GeneratorOptions{Port: a, Pool: pool, Burst: burst, Sizes: traffic.FixedSize(frameSize), Flows: flows, Cache: cache})
	if err != nil {
		return 0, 0, err
	}
	sink, err := traffic.NewSink(traffic.SinkOptions{Port: b, Pool: pool, Burst: burst, Flows: flows, Latency: true,
		PerFlow: mode != "plain", FlowHistograms: mode == "per-flow-histograms", Interval: time.Second, Cache: cache})
	if err != nil {
		return 0, 0, err
	}
	now := clock.Time(time.Second)
	received := 0
	var receiving time.Duration
	run := func(until int) {
		for received < until {
			gen.Poll(now)
			now += clock.Time(time.Microsecond)
			start := time.Now()
			received += sink.Poll(now)
			receiving += time.Since(start)
		}
	}
	// A warm-up in which every flow is seen twice: the steady state is
	// what is measured, not the first touch of each flow's state.
	run(2 * flows)
	warm := received
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	receiving = 0
	run(warm + frames)
	runtime.ReadMemStats(&ms)
	sink.Stop(now)
	if st := sink.Stats(); st.Received != uint64(received) || st.Foreign != 0 {
		return 0, 0, fmt.Errorf("rxflows: %s: the sink counted %d stamped and %d foreign frames of %d received", mode, st.Received, st.Foreign, received)
	}
	gen.Stop(now)
	bufs := make([]mbuf.Handle, burst)
	for n := b.RxBurst(0, bufs); n > 0; n = b.RxBurst(0, bufs) {
		cache.Free(bufs[:n])
	}
	measured := float64(received - warm)
	return float64(receiving.Nanoseconds()) / measured, float64(ms.Mallocs-mallocs) / measured, nil
}

// median of r, sorting it; NaN for none (no round with a measurable plain
// receiver: no verdict).
func median(r []float64) float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	slices.Sort(r)
	v := r[len(r)/2]
	if len(r)%2 == 0 {
		v = (r[len(r)/2-1] + v) / 2
	}
	return v
}

// spread prints sorted ratios for the detail line, the extremes and the
// middle when there are many.
func spread(r []float64) string {
	if len(r) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, v := range r {
		if len(r) > 5 && i > 0 && i < len(r)-1 && i != len(r)/2 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" … ")
		}
		fmt.Fprintf(&b, "%.3f", v)
	}
	return b.String()
}
