package roce_test

import (
	"fmt"
	"testing"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
)

// BenchmarkStage: the stage's work per packet (ProcessToHost then
// ProcessToNet on the same frame, which leaves it as it was), no port I/O.
func BenchmarkStage(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			r := newRig(b, roce.Options{})
			q, l, err := r.tb.Open(qpx.Context{PKey: 0xffff, Access: qpx.AccessAll})
			if err != nil {
				b.Fatal(err)
			}
			r.tb.Context(l).DestQPN = q
			frame := build(b, roce.FrameSpec{Addrs: addrs4(), BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: q},
				Payload: make([]byte, size-14-20-8-12-4)})
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			b.ResetTimer()
			for range b.N {
				c := r.tb.Context(l)
				c.ExpectedPSN, c.NextPSN = 0, 0
				if !r.stage.ProcessToHost(frame) || !r.stage.ProcessToNet(frame) {
					b.Fatal("dropped")
				}
			}
			b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "pkts/s")
		})
	}
}
