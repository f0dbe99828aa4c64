package reorder

import (
	"fmt"
	"testing"
)

// benchWindow builds an engine holding outstanding transactions
// [0, outstanding) of one stream.
func benchWindow(b *testing.B, outstanding int) (e *Engine, base, next uint32) {
	e, err := New(Options{Capacity: outstanding, Seed: 7})
	if err != nil {
		b.Fatal(err)
	}
	for ; next < uint32(outstanding); next++ {
		if _, err := e.Register(1, SpaceRSN, next); err != nil {
			b.Fatal(err)
		}
	}
	return e, 0, next
}

// BenchmarkCycle measures one transaction's Register + MarkReady +
// PopReady (and the PopReady that finds the next head missing or pending)
// with a window of outstanding transactions. One op is one transaction.
//
// inorder: every arrival is the head. reversed8: arrivals come in blocks of
// eight in reverse order, so seven wait and the eighth releases all eight.
func BenchmarkCycle(b *testing.B) {
	for _, outstanding := range []int{64, 65536} {
		b.Run(fmt.Sprintf("inorder/outstanding=%d", outstanding), func(b *testing.B) {
			e, base, next := benchWindow(b, outstanding)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, ok := e.MarkReady(base, 1, SpaceRSN, base); !ok {
					b.Fatal("MarkReady")
				}
				for {
					if _, ok := e.PopReady(1, SpaceRSN, &base); !ok {
						break
					}
				}
				if _, err := e.Register(1, SpaceRSN, next); err != nil {
					b.Fatal(err)
				}
				next++
			}
		})
		b.Run(fmt.Sprintf("reversed8/outstanding=%d", outstanding), func(b *testing.B) {
			e, base, next := benchWindow(b, outstanding)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := uint32(i % 8)
				if _, ok := e.MarkReady(base, 1, SpaceRSN, base+7-k); !ok {
					b.Fatal("MarkReady")
				}
				for {
					if _, ok := e.PopReady(1, SpaceRSN, &base); !ok {
						break
					}
				}
				if k == 7 {
					for next != base+uint32(outstanding) {
						if _, err := e.Register(1, SpaceRSN, next); err != nil {
							b.Fatal(err)
						}
						next++
					}
				}
			}
		})
	}
}
