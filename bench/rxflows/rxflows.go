// Package rxflows is the `peregrine bench rxflows` scenario: what `gen --rx
// --per-flow` costs per received frame against the plain receiver, at
// 10,000 flows, measured in one run.
//
// A traffic.Generator stamps 64-byte frames of consecutive flows (UDP
// source ports) into one end of a mem pair and a traffic.Sink polls the
// other, on one goroutine, one burst of 32 each iteration. Three loops run
// alternately: "feed" (the generator, its frames received and freed by the
// bare port: the sender's share), "plain" (the sink with sequence checks and
// the coarse latency histogram, as `gen --rx`) and "per-flow" (the sink with
// FlowStats per flow and the HDR histogram, as `gen --rx --per-flow`). The
// receiver's cost is a loop's ns/frame minus feed's, so the ratio compares
// the receivers, not the generator they share.
//
// Buffers: the generator allocates from the loop's cache, the pair carries
// the handles, and whoever receives a burst (sink or feed) frees it into the
// same cache.
package rxflows

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
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
	// Frames per measurement (0: 1<<21); Rounds alternating measurements of
	// each loop, the fastest kept (0: 3); Flows (0: 10,000).
	Frames, Rounds, Flows int
}

// Result is the run's figures: ns per frame of each loop (the fastest
// round) and the per-flow loop's heap allocations per frame.
type Result struct {
	Feed, Plain, PerFlow float64
	PerFlowAllocs        float64
	Pass, Fail           int
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
		o.Frames = 1 << 21
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Flows == 0 {
		o.Flows = 10000
	}
	var res Result
	best := map[string]float64{}
	var allocs float64 = math.Inf(1)
	for round := 0; round < o.Rounds; round++ {
		for _, mode := range []string{"feed", "plain", "per-flow"} {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			ns, perFrame, err := measure(mode, o.Flows, o.Frames)
			if err != nil {
				return res, err
			}
			if b, ok := best[mode]; !ok || ns < b {
				best[mode] = ns
			}
			if mode == "per-flow" {
				allocs = min(allocs, perFrame)
			}
		}
	}
	res.Feed, res.Plain, res.PerFlow, res.PerFlowAllocs = best["feed"], best["plain"], best["per-flow"], allocs
	plainCost, perFlowCost := res.Plain-res.Feed, res.PerFlow-res.Feed
	value := math.NaN() // no measurable plain receiver: no verdict
	if plainCost > 0 {
		value = perFlowCost / plainCost
	}
	fmt.Fprintf(o.Out, "FIGURE gen_rx_plain_ns_per_frame %.2f\n", plainCost)
	fmt.Fprintf(o.Out, "FIGURE gen_rx_per_flow_ns_per_frame %.2f\n", perFlowCost)
	rep := report.New(o.Out)
	rep.Add(report.Ratio{Name: "gen_rx_per_flow_cost_vs_plain", Value: value, Op: report.AtMost, Target: PerFlowGoal,
		Detail: fmt.Sprintf("receiver ns/frame at %d flows, %d-byte frames in bursts of %d: per-flow %.2f, plain %.2f (each loop's %.2f / %.2f minus the generator's own %.2f; the fastest of %d rounds of %d frames)",
			o.Flows, frameSize, burst, perFlowCost, plainCost, res.PerFlow, res.Plain, res.Feed, o.Rounds, o.Frames)})
	rep.Add(report.Ratio{Name: "gen_rx_per_flow_allocs_per_frame", Value: allocs, Op: report.AtMost, Target: 0,
		Detail: "heap allocations per frame of the per-flow loop (runtime.MemStats.Mallocs over a measurement, the fewest of the rounds)"})
	res.Pass, res.Fail = rep.Summary()
	return res, nil
}

// measure runs one loop over frames frames and returns its ns/frame and
// heap allocations per frame.
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
	var sink *traffic.Sink
	if mode != "feed" {
		sink, err = traffic.NewSink(traffic.SinkOptions{Port: b, Pool: pool, Burst: burst, Flows: flows, Latency: true,
			PerFlow: mode == "per-flow", Interval: time.Second, Cache: cache})
		if err != nil {
			return 0, 0, err
		}
	}
	bufs := make([]mbuf.Handle, burst)
	now := clock.Time(time.Second)
	received := 0
	run := func(until int) {
		for received < until {
			gen.Poll(now)
			now += clock.Time(time.Microsecond)
			if sink == nil {
				n := b.RxBurst(0, bufs)
				cache.Free(bufs[:n])
				received += n
				continue
			}
			received += sink.Poll(now)
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
	start := time.Now()
	run(warm + frames)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms)
	if sink != nil {
		sink.Stop(now)
		if st := sink.Stats(); st.Received != uint64(received) || st.Foreign != 0 {
			return 0, 0, fmt.Errorf("rxflows: %s: the sink counted %d stamped and %d foreign frames of %d received", mode, st.Received, st.Foreign, received)
		}
	}
	gen.Stop(now)
	for n := b.RxBurst(0, bufs); n > 0; n = b.RxBurst(0, bufs) {
		cache.Free(bufs[:n])
	}
	measured := float64(received - warm)
	return float64(elapsed.Nanoseconds()) / measured, float64(ms.Mallocs-mallocs) / measured, nil
}
