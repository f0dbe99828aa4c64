package qpx_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/peregrine-net/peregrine/core/qpx"
)

// BenchmarkTranslate: one translation per packet, live QPNs in random
// order (bench/qpx compares it with a Go map in the same run).
func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{64, 65536} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			tb, err := qpx.New(qpx.Options{Slots: n})
			if err != nil {
				b.Fatal(err)
			}
			qs := make([]uint32, n)
			for i := range qs {
				if qs[i], _, err = tb.Open(qpx.Context{}); err != nil {
					b.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			keys := make([]uint32, 4096)
			for i := range keys {
				keys[i] = qs[r.IntN(n)]
			}
			b.ReportAllocs()
			b.ResetTimer()
			sum := 0
			for i := range b.N {
				l, _ := tb.Translate(keys[i&4095])
				sum += l
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
}

// BenchmarkRetireReopen: close a live QP and open another on a full table.
func BenchmarkRetireReopen(b *testing.B) {
	tb, err := qpx.New(qpx.Options{Slots: 64})
	if err != nil {
		b.Fatal(err)
	}
	live := make([]uint32, 64)
	for i := range live {
		live[i], _, _ = tb.Open(qpx.Context{})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i & 63
		if err := tb.Close(live[j]); err != nil {
			b.Fatal(err)
		}
		if live[j], _, err = tb.Open(qpx.Context{}); err != nil {
			b.Fatal(err)
		}
	}
}
