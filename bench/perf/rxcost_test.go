package perf

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

func TestRxCostRuns(t *testing.T) {
	for _, o := range []RxCostOptions{
		{Packets: 5000},
		{Packets: 5000, NoUDPChecksum: true},
		{Packets: 5000, HeadersOnly: true},
	} {
		ns, err := RxCost(o)
		require.NoError(t, err, "%+v", o)
		require.Greater(t, ns, 0.0, "%+v", o)
	}
	_, err := RxCost(RxCostOptions{})
	require.ErrorContains(t, err, "RxCostOptions.Packets 0 must be positive")
}

// TestRxBenchTakesTheFastPath: the frames the receive-cost bench feeds are
// the common case, so every one is decoded by wire.DecodeFastIPv4; the
// figure would be meaningless if they fell back on the general decoder.
func TestRxBenchTakesTheFastPath(t *testing.T) {
	for _, noCsum := range []bool{false, true} {
		rb, err := newRxBench(rt.DefaultBurst, 64, noCsum)
		require.NoError(t, err)
		require.NoError(t, rb.fill(8))
		for _, h := range rb.port.queue[rb.port.head:] {
			var hd wire.Header
			// The endpoint's own address: LocalIP (the frames' destination),
			// and LocalPort left at its default.
			_, ok := wire.DecodeFastIPv4(rb.pool.Data(h), rb.addrs.DstIP.As4(), wire.DefaultPort, &hd)
			require.True(t, ok, "no UDP checksum %v", noCsum)
		}
		rb.drain()
		require.Equal(t, uint64(8), rb.delivered)
		// The measured loop allocates nothing.
		allocs := testing.AllocsPerRun(20, func() {
			if err := rb.fill(64); err != nil {
				panic(err)
			}
			rb.drain()
		})
		require.Zero(t, allocs)
		require.Equal(t, uint64(8+21*64), rb.delivered)
		require.NoError(t, rb.close())
	}
}

// TestRxBenchHeadersOnlyFreesEveryFrame: the floor measurement takes every
// prepared frame and returns it to the pool; the endpoint sees none.
func TestRxBenchHeadersOnlyFreesEveryFrame(t *testing.T) {
	rb, err := newRxBench(rt.DefaultBurst, 64, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, rb.close()) }()
	before, seen := rb.pool.InUse(), rb.e.Stats().RxFrames
	require.NoError(t, rb.fill(100))
	require.Equal(t, before+100, rb.pool.InUse())
	rb.drainHeaders()
	require.Equal(t, before, rb.pool.InUse())
	require.Zero(t, rb.delivered)
	require.Equal(t, seen, rb.e.Stats().RxFrames)
}

// BenchmarkRxPath: the receive path per packet (decode, CID lookup, window
// update, deliver, coalesced ACKs), by RX burst size.
func BenchmarkRxPath(b *testing.B) {
	for _, burst := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("burst=%d", burst), func(b *testing.B) {
			rb, err := newRxBench(burst, 64, false)
			require.NoError(b, err)
			defer rb.close()
			b.ReportAllocs()
			b.ResetTimer()
			var elapsed time.Duration
			for done := 0; done < b.N; {
				n := min(b.N-done, rxBenchBatch)
				b.StopTimer()
				require.NoError(b, rb.fill(n))
				b.StartTimer()
				start := time.Now()
				rb.drain()
				elapsed += time.Since(start)
				done += n
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/pkt")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pkts/s")
		})
	}
}
