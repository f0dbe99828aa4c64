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

// BenchmarkTwoGoroutines runs a producer and a consumer concurrently through
// TwoCoreBulk, unpinned and (where the machine allows) pinned to cpus 0 and
// 1. ns/elem is the sum of both sides' per-element time, the way ring_perf's
// two-core figures are added up; one op is one bulk.
func BenchmarkTwoGoroutines(b *testing.B) {
	for _, kind := range []string{"spsc", "mpmc"} {
		for _, pinned := range []bool{false, true} {
			var cpus []int
			placement := "unpinned"
			if pinned {
				cpus, placement = []int{0, 1}, "cpus=0,1"
			}
			for _, burst := range benchBursts {
				b.Run(fmt.Sprintf("%s/%s/burst=%d", kind, placement, burst), func(b *testing.B) {
					b.ReportAllocs()
					enq, deq, err := TwoCoreBulk(kind, burst, b.N*burst, cpus)
					if err != nil {
						b.Skip(err)
					}
					b.ReportMetric(enq, "enq-ns/elem")
					b.ReportMetric(deq, "deq-ns/elem")
					b.ReportMetric(enq+deq, "ns/elem")
				})
			}
		}
	}
}
