package perf

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

func newPool(t testing.TB) *mbuf.Pool {
	t.Helper()
	p, err := mbuf.New(mbuf.Options{Name: "perf", Frames: 16384})
	require.NoError(t, err)
	// Close fails on a leak: every frame the measurement took is back.
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func TestPoolCachedGetPutBulkRuns(t *testing.T) {
	p := newPool(t)
	ns, err := PoolCachedGetPutBulk(p, 8, 32, 10_000)
	require.NoError(t, err)
	require.Positive(t, ns)
	require.Zero(t, p.InUse(), "the measurement gave every frame back")
}

func TestPoolCachedGetPutBulkRejectsBadArguments(t *testing.T) {
	p := newPool(t)
	for _, c := range []struct {
		bulk, keep, elems int
		errHas            string
	}{
		{0, 32, 100, "bulk 0"},
		{8, 12, 100, "keep 12 must be a positive multiple of bulk 8"},
		{8, 32, 0, "elems 0"},
		{8, 1 << 20, 100, "exceeds the"},
	} {
		_, err := PoolCachedGetPutBulk(p, c.bulk, c.keep, c.elems)
		require.ErrorContains(t, err, c.errHas)
	}
}

// BenchmarkPoolCachedGetPutBulk runs the DPDK mempool_perf-style loop of
// PoolCachedGetPutBulk.
func BenchmarkPoolCachedGetPutBulk(b *testing.B) {
	for _, keep := range []int{32, 128} {
		for _, bulk := range []int{1, 4, 32} {
			b.Run(fmt.Sprintf("keep=%d/bulk=%d", keep, bulk), func(b *testing.B) {
				p := newPool(b)
				b.ReportAllocs()
				var total float64
				for b.Loop() {
					ns, err := PoolCachedGetPutBulk(p, bulk, keep, 1<<16)
					if err != nil {
						b.Fatal(err)
					}
					total += ns
				}
				b.ReportMetric(total/float64(b.N), "ns/elem")
			})
		}
	}
}
