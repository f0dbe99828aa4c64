package rings

import (
	"fmt"
	"testing"
)

var benchBursts = []int{1, 8, 32, 64}

// BenchmarkSingleBulk is ring_perf's single-core test: one goroutine
// enqueues a bulk and dequeues it again, so it measures the calls' own cost
// with every cache line local.
func BenchmarkSingleBulk(b *testing.B) {
	for _, k := range ringKinds {
		for _, burst := range benchBursts {
			b.Run(fmt.Sprintf("%s/burst=%d", k.name, burst), func(b *testing.B) {
				r, err := k.make(1024)
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]uint32, burst)
				b.ReportAllocs()
				for b.Loop() {
					if r.EnqueueBulk(buf) != burst || r.DequeueBulk(buf) != burst {
						b.Fatal("bulk call on a ring with room failed")
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/elem")
			})
		}
	}
}
