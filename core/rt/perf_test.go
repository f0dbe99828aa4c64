package rt

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestRxCostNsPerPacketRuns(t *testing.T) {
	ns, err := RxCostNsPerPacket(5000)
	require.NoError(t, err)
	require.Greater(t, ns, 0.0)
	ns, err = MeasureRxCost(RxCostOptions{Packets: 5000, NoUDPChecksum: true})
	require.NoError(t, err)
	require.Greater(t, ns, 0.0)
	ns, err = MeasureRxCost(RxCostOptions{Packets: 5000, HeadersOnly: true})
	require.NoError(t, err)
	require.Greater(t, ns, 0.0)
	_, err = MeasureRxCost(RxCostOptions{})
	require.ErrorContains(t, err, "RxCostOptions.Packets 0 must be positive")
}

// TestRxBenchTakesTheFastPath: the frames the receive-cost bench feeds are
// the common case, so every one is decoded by wire.DecodeFastIPv4; the
// figure would be meaningless if they fell back on the general decoder.
func TestRxBenchTakesTheFastPath(t *testing.T) {
	for _, noCsum := range []bool{false, true} {
		rb, err := newRxBench(DefaultBurst, 64, noCsum)
		require.NoError(t, err)
		require.NoError(t, rb.fill(8))
		for _, h := range rb.port.queue[rb.port.head:] {
			var hd wire.Header
			_, ok := wire.DecodeFastIPv4(rb.pool.Data(h), rb.e.localIP4, rb.e.localPort, &hd)
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

// BenchmarkSendDeliverAck: one packet sent by a, delivered at b, and its
// ACK processed at a, over a mem pair, per burst of packets.
func BenchmarkSendDeliverAck(b *testing.B) {
	for _, burst := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("burst=%d", burst), func(b *testing.B) {
			h := newHarness(b, func(a, bo *Options) { a.Burst, bo.Burst = max(burst, 8), max(burst, 8) })
			ca, _ := h.connect()
			h.check = false
			delivered := 0
			h.b.SetDeliver(func(*Conn, *wire.Header, []byte) Verdict { delivered++; return Accept })
			p := payload(1, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += burst {
				for range burst {
					if _, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData}, p); err != nil {
						b.Fatal(err)
					}
				}
				for h.a.Outstanding() > 0 {
					h.clk.Advance(time.Microsecond)
					h.a.Poll(h.clk.Now())
					h.b.Poll(h.clk.Now())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
		})
	}
}

// TestRxBenchHeadersOnlyFreesEveryFrame: the floor measurement takes every
// prepared frame and returns it to the pool; the endpoint sees none.
func TestRxBenchHeadersOnlyFreesEveryFrame(t *testing.T) {
	rb, err := newRxBench(DefaultBurst, 64, false)
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
