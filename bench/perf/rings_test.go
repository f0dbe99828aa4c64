package perf

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRingTwoCoreBulkRuns(t *testing.T) {
	for _, kind := range []string{"spsc", "mpmc"} {
		t.Run(kind, func(t *testing.T) {
			enq, deq, err := RingTwoCoreBulk(kind, 8, 20_000, nil)
			require.NoError(t, err)
			require.Positive(t, enq)
			require.Positive(t, deq)
		})
	}
}

func TestRingTwoCoreBulkRejectsBadArguments(t *testing.T) {
	cases := []struct {
		kind   string
		burst  int
		elems  int
		cpus   []int
		errHas string
	}{
		{"fifo", 8, 100, nil, `kind "fifo"`},
		{"spsc", 0, 100, nil, "burst 0"},
		{"spsc", 8, 0, nil, "elems 0"},
		{"spsc", 8, 100, []int{0}, "cpus [0]"},
	}
	for _, c := range cases {
		_, _, err := RingTwoCoreBulk(c.kind, c.burst, c.elems, c.cpus)
		require.ErrorContains(t, err, c.errHas)
	}
}

// BenchmarkRingTwoGoroutines runs a producer and a consumer concurrently
// through RingTwoCoreBulk, unpinned and (where the machine allows) pinned
// to cpus 0 and 1. ns/elem is the sum of both sides' per-element time, the
// way ring_perf's two-core figures are added up; one op is one bulk. (The
// single-goroutine ring benchmarks are rings' own, in rings/.)
func BenchmarkRingTwoGoroutines(b *testing.B) {
	for _, kind := range []string{"spsc", "mpmc"} {
		for _, pinned := range []bool{false, true} {
			var cpus []int
			placement := "unpinned"
			if pinned {
				cpus, placement = []int{0, 1}, "cpus=0,1"
			}
			for _, burst := range []int{1, 8, 32, 64} {
				b.Run(fmt.Sprintf("%s/%s/burst=%d", kind, placement, burst), func(b *testing.B) {
					b.ReportAllocs()
					enq, deq, err := RingTwoCoreBulk(kind, burst, b.N*burst, cpus)
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
