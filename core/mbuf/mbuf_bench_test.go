package mbuf

import (
	"fmt"
	"testing"
)

var benchBulks = []int{1, 8, 32, 64}

func newBenchPool(b *testing.B) *Pool {
	b.Helper()
	p, err := New(Options{Name: "bench", Frames: 16384})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, c := range *p.caches.Load() {
			c.Flush()
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	})
	return p
}

func reportPerElem(b *testing.B, elemsPerOp int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(elemsPerOp), "ns/elem")
}

// BenchmarkCacheGetPutBulk: one raw get and one put of bulk handles per op.
func BenchmarkCacheGetPutBulk(b *testing.B) {
	for _, bulk := range benchBulks {
		b.Run(fmt.Sprint("bulk=", bulk), func(b *testing.B) {
			p := newBenchPool(b)
			c := p.NewCache()
			hs := make([]Handle, bulk)
			b.ReportAllocs()
			for b.Loop() {
				if c.GetBulk(hs) != bulk {
					b.Fatal("pool exhausted")
				}
				c.PutBulk(hs)
			}
			reportPerElem(b, bulk)
		})
	}
}

// BenchmarkCacheAllocFree: AllocBulk (with metadata reset) and Free per op.
func BenchmarkCacheAllocFree(b *testing.B) {
	for _, bulk := range benchBulks {
		b.Run(fmt.Sprint("bulk=", bulk), func(b *testing.B) {
			p := newBenchPool(b)
			c := p.NewCache()
			hs := make([]Handle, bulk)
			b.ReportAllocs()
			for b.Loop() {
				if c.AllocBulk(hs) != bulk {
					b.Fatal("pool exhausted")
				}
				c.Free(hs)
			}
			reportPerElem(b, bulk)
		})
	}
}

// BenchmarkPoolAllocFree: the shared path (MPMC ring) with no cache.
func BenchmarkPoolAllocFree(b *testing.B) {
	for _, bulk := range benchBulks {
		b.Run(fmt.Sprint("bulk=", bulk), func(b *testing.B) {
			p := newBenchPool(b)
			hs := make([]Handle, bulk)
			b.ReportAllocs()
			for b.Loop() {
				if p.AllocBulk(hs) != bulk {
					b.Fatal("pool exhausted")
				}
				p.Free(hs)
			}
			reportPerElem(b, bulk)
		})
	}
}

// BenchmarkParallel: every goroutine (GOMAXPROCS of them) allocates and
// frees, with a cache each or all on the shared ring.
func BenchmarkParallel(b *testing.B) {
	for _, cached := range []bool{true, false} {
		for _, bulk := range []int{1, 32} {
			b.Run(fmt.Sprintf("cached=%v/bulk=%d", cached, bulk), func(b *testing.B) {
				p := newBenchPool(b)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					hs := make([]Handle, bulk)
					alloc, free := p.AllocBulk, p.Free
					if cached {
						c := p.NewCache()
						defer c.Flush()
						alloc, free = c.AllocBulk, c.Free
					}
					for pb.Next() {
						if alloc(hs) == bulk {
							free(hs)
						}
					}
				})
				reportPerElem(b, bulk)
			})
		}
	}
}
