package rt

import (
	"fmt"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/core/wire"
)

// BenchmarkSendDeliverAck: one packet sent by a, delivered at b, and its
// ACK processed at a, over a mem pair, per burst of packets.
func BenchmarkSendDeliverAck(b *testing.B) {
	for _, burst := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("burst=%d", burst), func(b *testing.B) {
			h := newHarness(b, func(a, bo *Options) { a.Burst, bo.Burst = max(burst, 8), max(burst, 8) })
			ca, _ := h.connect()
			h.check = false
			delivered := 0
			setDeliver(h.b, func(*Conn, *wire.Header, []byte) Verdict { delivered++; return Accept })
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
