package traffic

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlowLatencyQuantiles: every quantile of a flow's latencies is
// within 12.5 % of the exact one (sorted), for spreads from nanoseconds to
// seconds, and never above the flow's maximum.
func TestFlowLatencyQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, spread := range []uint64{5, 1000, 1e6, 3e9, 1 << 40} {
		var h FlowLatency
		var vs []uint64
		for range 5000 {
			v := r.Uint64N(spread) + spread/3
			h.record(v)
			vs = append(vs, v)
		}
		slices.Sort(vs)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
			exact := vs[max(int(q*float64(len(vs))+0.999999), 1)-1]
			got := h.Quantile(q)
			require.LessOrEqual(t, got, vs[len(vs)-1], "spread %d q %g", spread, q)
			if exact < 1<<32 {
				require.InDelta(t, float64(exact), float64(got), float64(exact)/8+1, "spread %d q %g", spread, q)
			}
		}
	}
	var empty FlowLatency
	require.Zero(t, empty.Quantile(0.5))
}

// TestPerFlowLatencyPercentiles: each flow's percentiles come from its own
// frames — flow 0 near 1 µs, flow 1 near 1 ms, flow 2 nothing — published
// at Stop and merged across sinks (two halves of each flow).
func TestPerFlowLatencyPercentiles(t *testing.T) {
	halves := [2]*flowRx{newFlowRx(3, 32, true), newFlowRx(3, 32, true)}
	var st SinkStats
	for i := range uint64(2000) {
		rx := halves[i%2]
		rx.frame(&st, 0, i, true, int64(1000+i%100))
		rx.frame(&st, 1, i, true, int64(1_000_000+i%1000))
	}
	var lats []FlowLatency
	for _, rx := range halves {
		rx.close(0, 0)
		lats = MergeFlowLatencies(lats, rx.latSnap)
	}
	recs := FlowRecords(halves[0].snap, lats, BaseSrcPort)
	require.Len(t, recs, 2, "flow 2 received nothing")
	require.InDelta(t, 1050, float64(recs[0].LatencyP50), 1050/8)
	require.InDelta(t, 1099, float64(recs[0].LatencyP99), 1099/8)
	require.LessOrEqual(t, recs[0].LatencyP999, uint64(1099))
	require.InDelta(t, 1_000_500, float64(recs[1].LatencyP50), 1_000_500/8)
	require.Equal(t, uint64(2000), lats[0].Count())
}

// TestPerFlowLatencyAllocatesNothing: recording a latency per flow costs
// no heap allocation.
func TestPerFlowLatencyAllocatesNothing(t *testing.T) {
	rx := newFlowRx(1024, 32, true)
	var st SinkStats
	seq := uint64(0)
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		rx.frame(&st, uint16(seq%1024), seq/1024, true, int64(seq%5000))
		seq++
	}))
}

// TestFlowLatencyRunsMatchRecords: the histograms a sink publishes, built
// from runs per flow, hold exactly what recording every latency would —
// latencies that stay in a bucket for long runs, that change bucket every
// frame, and flows interleaved — with the count and maximum of the flow.
func TestFlowLatencyRunsMatchRecords(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	rx := newFlowRx(4, 32, true)
	want := make([]FlowLatency, 4)
	var st SinkStats
	seqs := make([]uint64, 4)
	for i := range 20000 {
		flow := r.IntN(4)
		var lat uint64
		switch flow {
		case 0: // a long run, now and then another bucket
			lat = 1000
			if i%97 == 0 {
				lat = 50_000
			}
		case 1: // another bucket every frame
			lat = 100 << (i % 5)
		case 2:
			lat = r.Uint64N(1 << 33)
		}
		rx.frame(&st, uint16(flow), seqs[flow], true, int64(lat))
		want[flow].record(lat)
		seqs[flow]++
	}
	rx.close(0, 0)
	for flow := range want {
		require.Equal(t, want[flow], rx.latSnap[flow], "flow %d", flow)
	}
}

// TestLatRunFull: a run that reaches its largest count goes to the
// histogram and a new one starts, so no latency is lost to the count's
// width.
func TestLatRunFull(t *testing.T) {
	var h FlowLatency
	b := flowLatBucket(700)
	run := latRun(b)<<runBits | (runMax - 1)
	run.add(&h, 700) // the run is now full
	require.Zero(t, h.counts[b])
	run.add(&h, 700)
	require.Equal(t, uint32(runMax), h.counts[b])
	run.flush(&h)
	require.Equal(t, uint32(runMax)+1, h.counts[b])
	require.Zero(t, run)
}
