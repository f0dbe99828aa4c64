package traffic

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// flowPlan is one flow's stream with known impairments: seqs 0..n−1,
// minus lost, with dup sent twice (the copy right after its first) and
// seq late moved to after late+extent.
type flowPlan struct {
	n      uint64
	lost   []uint64
	dups   []uint64
	late   uint64
	extent uint64
}

func (p flowPlan) order() []uint64 {
	var out []uint64
	for s := range p.n {
		if slices.Contains(p.lost, s) || s == p.late {
			continue
		}
		out = append(out, s)
		if slices.Contains(p.dups, s) {
			out = append(out, s)
		}
		if s == p.late+p.extent {
			out = append(out, p.late)
		}
	}
	return out
}

// TestPerFlowAccountingOfAKnownStream sends four flows, each with its own
// losses, duplicates and one frame reordered by its own extent, through a
// sink over a mem pair, interleaved, and checks every flow's counters.
func TestPerFlowAccountingOfAKnownStream(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "flows", Frames: 1024, CacheSize: 64, Debug: true})
	require.NoError(t, err)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "f", Size: 1024})
	require.NoError(t, err)
	const flows = 4
	sink, err := NewSink(SinkOptions{Port: b, Pool: pool, Flows: flows + 1, Latency: true, PerFlow: true, Interval: time.Millisecond})
	require.NoError(t, err)
	tmpl, err := newHeaderTemplate([6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2})
	require.NoError(t, err)

	plans := make([]flowPlan, flows)
	orders := make([][]uint64, flows)
	for f := range uint64(flows) {
		plans[f] = flowPlan{n: 200, lost: []uint64{10, 50 + f, 199 - f}, dups: []uint64{30, 31 + 2*f}, late: 100, extent: f + 1}
		orders[f] = plans[f].order()
	}
	vc := clock.NewVirtual(clock.Time(time.Second))
	cache := pool.NewCache()
	send := func(flow int, seq uint64) {
		hs := []mbuf.Handle{0}
		require.Equal(t, 1, cache.AllocBurst(hs))
		h := hs[0]
		frame := pool.Append(h, 64)
		tmpl.PutUDP(frame, uint16(BaseSrcPort+flow))
		// Flow f's frames are 1+f µs old when they arrive.
		writeStamp(frame, seq, int64(vc.Now())-int64(time.Duration(1+flow)*time.Microsecond))
		require.Equal(t, 1, a.TxBurst(0, []mbuf.Handle{h}))
	}
	for i := 0; ; i++ {
		any := false
		for f := range flows {
			if i < len(orders[f]) {
				send(f, orders[f][i])
				any = true
			}
		}
		if !any {
			break
		}
		if i%8 == 7 {
			for sink.Poll(vc.Advance(100*time.Microsecond)) > 0 {
			}
		}
	}
	for sink.Poll(vc.Advance(time.Millisecond)) > 0 {
	}
	sink.Stop(vc.Now())
	cache.Close()

	got := sink.Flows()
	require.Len(t, got, flows+1)
	for f := range flows {
		p, st := plans[f], got[f]
		want := p.n - uint64(len(p.lost))
		// The last lost seq (199−f) is past the last received for f=0
		// only: loss after the last arrival is invisible.
		lastLost := p.n - 1 - uint64(f)
		visibleLost := uint64(len(p.lost))
		nextExp := p.n
		if lastLost == p.n-1 {
			visibleLost--
			nextExp--
		}
		require.Equal(t, want, st.Received, "flow %d received", f)
		require.Equal(t, nextExp, st.NextExp, "flow %d", f)
		require.Equal(t, visibleLost, st.Lost(), "flow %d lost", f)
		require.Equal(t, uint64(len(p.dups)), st.Duplicates, "flow %d duplicates", f)
		require.Equal(t, uint64(1), st.Reordered, "flow %d reordered", f)
		require.Equal(t, p.extent, st.MaxExtent, "flow %d extent", f)
		require.Equal(t, float64(p.extent), st.MeanExtent(), "flow %d", f)
		require.Zero(t, st.ExtentUnknown+st.BeyondWindow)
		// Latency: each frame waited until the next poll, 0 to 100 µs
		// plus its age.
		age := uint64(time.Duration(1+f) * time.Microsecond)
		require.Equal(t, want, st.LatCount, "flow %d: duplicates carry no latency", f)
		require.GreaterOrEqual(t, st.LatencyMin, age)
		require.LessOrEqual(t, st.LatencyMax, age+uint64(time.Millisecond))
	}
	require.Zero(t, got[flows].Received, "flow 4 was never sent")
	total, n := sink.LatencyHDR()
	last := sink.TakeIntervals()
	var frames uint64
	for f := range flows {
		frames += got[f].LatCount
	}
	require.Equal(t, frames, total.Count())
	require.Positive(t, n, "intervals closed on the loop's clock")
	require.Equal(t, total.Count(), last.Count(), "nothing taken yet: every interval is pending")
	again := sink.TakeIntervals()
	require.Zero(t, again.Count())
	coarse := sink.Latency()
	require.Equal(t, total.Count(), coarse.Count())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, pool.CheckLeaks())
}

// TestFlowStatsExtentAndWindow covers the corners: a hole older than the
// remembered jumps (extent unknown), a frame more than SeqWindow behind
// (not checked for duplication), and a duplicate of the highest number.
func TestFlowStatsExtentAndWindow(t *testing.T) {
	var f FlowStats
	for _, s := range []uint64{0, 2, 4, 6, 8, 10} { // five jumps: the first forgotten
		require.True(t, f.account(s))
	}
	require.True(t, f.account(1)) // its jump (start 1) was forgotten
	require.Equal(t, uint64(1), f.ExtentUnknown)
	require.True(t, f.account(9)) // made by the jump at arrival 5 (seq 10)
	require.Equal(t, uint64(2), f.MaxExtent)
	require.False(t, f.account(10))
	require.False(t, f.account(9))
	require.Equal(t, uint64(2), f.Duplicates)
	require.True(t, f.account(200))
	require.True(t, f.account(3)) // 196 behind: beyond the window
	require.Equal(t, uint64(1), f.BeyondWindow)
	require.Equal(t, uint64(3), f.Reordered)
}

// BenchmarkSinkPerFlow is the pair gen_rx_per_flow_cost_vs_plain is the
// ratio of (per-flow ns/frame ÷ plain ns/frame), at 10,000 flows: a feeder
// stamps 32 frames of consecutive flows into a mem pair and the sink polls
// them. "feed" is the feeder alone, to subtract from both. Every frame's
// latency is 1 µs, so each flow's latency stays in one histogram bucket;
// "per-flow-histograms" adds a latency histogram per flow, and
// "per-flow-histograms-jitter" is its worst case, a flow's latency in
// another bucket every frame (1-8 µs), which adds each frame to its
// flow's histogram (and breaks the shared histogram's runs).
func BenchmarkSinkPerFlow(b *testing.B) {
	const flows = 10000
	for _, mode := range []string{"feed", "plain", "per-flow", "per-flow-histograms", "per-flow-histograms-jitter"} {
		b.Run(mode, func(b *testing.B) {
			pool, err := mbuf.New(mbuf.Options{Name: "bench", Frames: 4096})
			require.NoError(b, err)
			pa, pb, err := mem.NewPair(pool, mem.PairOptions{Name: "b", Size: 256})
			require.NoError(b, err)
			cache := pool.NewCache()
			sink, err := NewSink(SinkOptions{Port: pb, Pool: pool, Flows: flows, Latency: true, PerFlow: mode != "plain" && mode != "feed",
				FlowHistograms: strings.HasPrefix(mode, "per-flow-histograms"), Cache: cache, Interval: time.Second})
			require.NoError(b, err)
			var jitter int64
			if mode == "per-flow-histograms-jitter" {
				jitter = 1
			}
			tmpl, err := newHeaderTemplate([6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2})
			require.NoError(b, err)
			bufs := make([]mbuf.Handle, 32)
			seqs := make([]uint64, flows)
			flow := 0
			now := clock.Time(time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += len(bufs) {
				n := cache.AllocBurst(bufs)
				for _, h := range bufs[:n] {
					frame := pool.Append(h, 64)
					tmpl.PutUDP(frame, uint16(BaseSrcPort+flow))
					writeStamp(frame, seqs[flow], int64(now)-1000<<(jitter*int64(seqs[flow]%4)))
					seqs[flow]++
					if flow++; flow == flows {
						flow = 0
					}
				}
				sent := pa.TxBurst(0, bufs[:n])
				cache.Free(bufs[sent:n])
				now += 1000
				if mode == "feed" {
					got := pb.RxBurst(0, bufs)
					cache.Free(bufs[:got])
					continue
				}
				sink.Poll(now)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
			sink.Stop(now)
			pa.Close()
			pb.Close()
			cache.Close()
			pool.Close()
		})
	}
}

// TestPerFlowSinkAllocatesNothing: a steady-state poll with per-flow
// accounting and interval closes allocates nothing, with and without
// per-flow histograms.
func TestPerFlowSinkAllocatesNothing(t *testing.T) {
	for _, histograms := range []bool{false, true} {
		perFlowSinkAllocatesNothing(t, histograms)
	}
}

func perFlowSinkAllocatesNothing(t *testing.T, histograms bool) {
	pool, err := mbuf.New(mbuf.Options{Name: "alloc", Frames: 4096})
	require.NoError(t, err)
	pa, pb, err := mem.NewPair(pool, mem.PairOptions{Name: "z", Size: 256})
	require.NoError(t, err)
	cache := pool.NewCache()
	sink, err := NewSink(SinkOptions{Port: pb, Pool: pool, Flows: 100, Latency: true, PerFlow: true, FlowHistograms: histograms, Cache: cache, Interval: time.Microsecond})
	require.NoError(t, err)
	tmpl, err := newHeaderTemplate([6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2})
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 32)
	var seq uint64
	now := clock.Time(time.Second)
	round := func() {
		n := cache.AllocBurst(bufs)
		for i, h := range bufs[:n] {
			frame := pool.Append(h, 64)
			tmpl.PutUDP(frame, uint16(BaseSrcPort+i))
			writeStamp(frame, seq, int64(now))
		}
		seq++
		sent := pa.TxBurst(0, bufs[:n])
		cache.Free(bufs[sent:n])
		now += clock.Time(time.Millisecond) // closes an interval every poll
		require.Equal(t, n, sink.Poll(now))
	}
	round()
	require.Zero(t, testing.AllocsPerRun(200, round))
	sink.Stop(now)
	require.Equal(t, seq, sink.Flows()[0].Received)
	pa.Close()
	pb.Close()
	cache.Close()
	require.NoError(t, pool.CheckLeaks())
}

// FuzzFlowStats feeds arbitrary sequence numbers: accounting never
// panics, every arrival is either a distinct frame or a duplicate, and
// what it calls lost never exceeds what it expected.
func FuzzFlowStats(f *testing.F) {
	f.Add([]byte{0, 1, 2, 5, 3, 3, 9, 0})
	f.Add([]byte{200, 1, 255, 0, 0, 7})
	f.Fuzz(func(t *testing.T, seqs []byte) {
		var st FlowStats
		var distinct uint64
		seen := map[uint64]bool{}
		for i, b := range seqs {
			// Spread some numbers far apart to cross the window.
			seq := uint64(b)
			if i%3 == 0 {
				seq *= 97
			}
			fresh := st.account(seq)
			if fresh {
				distinct++
			}
			if !seen[seq] {
				require.True(t, fresh, "first arrival of %d called a duplicate", seq)
			}
			seen[seq] = true
		}
		require.Equal(t, uint64(len(seqs)), st.Received+st.Duplicates)
		require.Equal(t, distinct, st.Received)
		require.LessOrEqual(t, st.Lost(), st.NextExp)
		require.LessOrEqual(t, st.ExtentUnknown+st.BeyondWindow, 2*st.Reordered)
	})
}

// TestFlowHotIsOneCacheLine: an in-order frame touches one 64-byte line
// of per-flow state, and 10,000 flows' of it fit in a 1 MiB L2.
func TestFlowHotIsOneCacheLine(t *testing.T) {
	require.Equal(t, uintptr(64), unsafe.Sizeof(flowHot{}))
}

// TestPerFlowKeepsThePlainCounters: in per-flow mode the sink's InOrder,
// Gaps and Late come from the flows' NextExp; they must equal the plain
// sink's over any stream.
func TestPerFlowKeepsThePlainCounters(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	rx := newFlowRx(3, 32, false)
	next := make([]uint64, 3)
	var plain, perFlow SinkStats
	for range 20000 {
		flow := uint16(r.IntN(3))
		seq := next[flow] + uint64(r.IntN(4))
		if r.IntN(5) == 0 {
			seq = uint64(max(0, int(next[flow])-r.IntN(80)))
		}
		switch exp := next[flow]; {
		case seq == exp:
			plain.InOrder++
			next[flow] = exp + 1
		case seq > exp:
			plain.Gaps += seq - exp
			next[flow] = seq + 1
		default:
			plain.Late++
		}
		rx.frame(&perFlow, flow, seq, true, 1000)
	}
	require.Equal(t, plain, perFlow)
	require.Positive(t, plain.Late)
}

// TestPerFlowSinkDropsUntrackedFlows: with per-flow accounting, frames of
// flows past the tracked count (and of a source port below flow 0's) are
// counted Foreign and touch no flow's state; tracked flows count exactly
// their own frames.
func TestPerFlowSinkDropsUntrackedFlows(t *testing.T) {
	pool, pa, pb, cache := memPair(t, "untracked")
	const tracked = 8
	sink, err := NewSink(SinkOptions{Port: pb, Pool: pool, Flows: tracked, Latency: true, PerFlow: true, FlowHistograms: true, Cache: cache})
	require.NoError(t, err)
	tmpl, err := newHeaderTemplate([6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2})
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 32)
	now := clock.Time(time.Second)
	const rounds = 5
	for seq := range uint64(rounds) {
		n := cache.AllocBurst(bufs)
		require.Equal(t, 32, n)
		for i, h := range bufs[:n] {
			frame := pool.Append(h, 64)
			port := uint16(BaseSrcPort + i)
			if i == 31 {
				port = BaseSrcPort - 1 // below flow 0
			}
			tmpl.PutUDP(frame, port)
			writeStamp(frame, seq, int64(now)+500) // polled 1 µs later: 500 ns
		}
		require.Equal(t, n, pa.TxBurst(0, bufs[:n]))
		now += clock.Time(time.Microsecond)
		require.Equal(t, n, sink.Poll(now))
	}
	sink.Stop(now)
	st := sink.Stats()
	require.Equal(t, uint64(rounds*(32-tracked)), st.Foreign)
	require.Equal(t, uint64(rounds*tracked), st.Received)
	require.Equal(t, uint64(rounds*tracked), st.InOrder)
	flows := sink.Flows()
	require.Len(t, flows, tracked)
	for i, f := range flows {
		require.Equal(t, uint64(rounds), f.Received, "flow %d", i)
		require.Equal(t, uint64(rounds), f.NextExp, "flow %d", i)
		require.Equal(t, uint64(500), f.LatencyMax, "flow %d", i)
	}
	for i, l := range sink.FlowLatencies() {
		require.Equal(t, uint64(rounds), l.Count(), "flow %d", i)
		require.Equal(t, uint64(500), l.Quantile(1), "flow %d", i)
	}
	pa.Close()
	pb.Close()
	cache.Close()
	require.NoError(t, pool.CheckLeaks())
}

// TestPerFlowBurstPathMatchesFrameByFrame: the sink's burst loop, which
// accounts in-order frames itself and the rest frame by frame, leaves the
// same counters, flows and latency histograms as accounting every frame
// by the general path, over a stream with loss, duplicates, reordering
// and stamps ahead of the receive time, with and without per-flow
// histograms.
func TestPerFlowBurstPathMatchesFrameByFrame(t *testing.T) {
	for _, histograms := range []bool{false, true} {
		pool, pa, pb, cache := memPair(t, "burstpath")
		const flows = 5
		sink, err := NewSink(SinkOptions{Port: pb, Pool: pool, Flows: flows, Latency: true, PerFlow: true, FlowHistograms: histograms, Cache: cache, Interval: time.Millisecond})
		require.NoError(t, err)
		ref := newFlowRx(flows, 32, histograms)
		var refStats SinkStats
		tmpl, err := newHeaderTemplate([6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2})
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(11, 3))
		next := make([]uint64, flows)
		bufs := make([]mbuf.Handle, 32)
		now := clock.Time(time.Second)
		for range 400 {
			n := cache.AllocBurst(bufs[:1+r.IntN(32)])
			for _, h := range bufs[:n] {
				flow := r.IntN(flows + 1) // flow 5 is untracked
				seq := next[min(flow, flows-1)]
				switch r.IntN(10) {
				case 0:
					seq += uint64(r.IntN(5)) // a gap
				case 1:
					seq -= min(seq, uint64(r.IntN(70))) // late or a duplicate
				}
				if flow < flows {
					next[flow] = max(next[flow], seq+1)
				}
				stamp := int64(now) - int64(r.IntN(3000)) + 200 // some ahead of now
				frame := pool.Append(h, 64)
				tmpl.PutUDP(frame, uint16(BaseSrcPort+flow))
				writeStamp(frame, seq, stamp)
				if flow < flows {
					refStats.Received++
					ref.frame(&refStats, uint16(flow), seq, true, int64(now)-stamp)
				} else {
					refStats.Foreign++
				}
				refStats.Bytes += 64
			}
			require.Equal(t, n, pa.TxBurst(0, bufs[:n]))
			require.Equal(t, n, sink.Poll(now))
			now += clock.Time(time.Microsecond)
		}
		sink.Stop(now)
		ref.close(now, 0)
		require.Equal(t, refStats, sink.Stats(), "histograms %v", histograms)
		require.Positive(t, refStats.Late)
		require.Positive(t, ref.negative)
		require.Equal(t, ref.negative, sink.rx.negative)
		require.Equal(t, ref.snap, sink.Flows())
		require.Equal(t, ref.latSnap, sink.FlowLatencies())
		total, _ := sink.LatencyHDR()
		require.Equal(t, ref.total, total)
		pa.Close()
		pb.Close()
		cache.Close()
		require.NoError(t, pool.CheckLeaks())
	}
}

// TestFlowHistogramsNeedPerFlow: per-flow histograms are an addition to
// per-flow statistics, and a sink without them has none to return.
func TestFlowHistogramsNeedPerFlow(t *testing.T) {
	pool, pa, pb, cache := memPair(t, "flowhist")
	defer pool.Close()
	defer cache.Close()
	defer pa.Close()
	defer pb.Close()
	_, err := NewSink(SinkOptions{Port: pb, Pool: pool, FlowHistograms: true})
	require.ErrorContains(t, err, "FlowHistograms needs PerFlow")
	sink, err := NewSink(SinkOptions{Port: pb, Pool: pool, PerFlow: true, Latency: true})
	require.NoError(t, err)
	sink.Stop(0)
	require.Nil(t, sink.FlowLatencies())
	require.Len(t, sink.Flows(), 1)
}

// memPair is a pool of 1024 frames, a mem pair over it (ring of 256) and
// a cache, for a sink test; the caller closes them.
func memPair(t *testing.T, name string) (*mbuf.Pool, *mem.Port, *mem.Port, *mbuf.Cache) {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: name, Frames: 1024})
	require.NoError(t, err)
	pa, pb, err := mem.NewPair(pool, mem.PairOptions{Name: name, Size: 256})
	require.NoError(t, err)
	return pool, pa, pb, pool.NewCache()
}
