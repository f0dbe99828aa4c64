package hist

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBucketBoundsAreMonotoneAndCover(t *testing.T) {
	for _, v := range []uint64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 1 << 40, 1<<64 - 1} {
		b := bucketOf(v)
		require.Less(t, b, buckets, "value %d", v)
		require.LessOrEqual(t, lowerBound(b), v, "value %d bucket %d", v, b)
		if b+1 < buckets {
			require.Greater(t, lowerBound(b+1), v, "value %d bucket %d", v, b)
		}
	}
}

func TestQuantileWithinRelativeError(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var h Histogram
	vals := make([]uint64, 100000)
	for i := range vals {
		vals[i] = uint64(r.ExpFloat64() * 50000)
		h.Record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := h.Quantile(q)
		require.GreaterOrEqual(t, got, exact, "q=%v", q)
		require.LessOrEqual(t, float64(got), float64(exact)*1.0625+1, "q=%v", q)
	}
	require.Equal(t, vals[0], h.Min())
	require.Equal(t, vals[len(vals)-1], h.Max())
	require.Equal(t, h.Max(), h.Quantile(1))
}

func TestMergeEqualsRecordingBoth(t *testing.T) {
	var a, b, both Histogram
	for i := range uint64(1000) {
		a.Record(i * 3)
		b.Record(i * 7)
		both.Record(i * 3)
		both.Record(i * 7)
	}
	a.Merge(&b)
	require.Equal(t, both, a)
	var empty Histogram
	require.Zero(t, empty.Quantile(0.5))
}

func TestRecordDoesNotAllocate(t *testing.T) {
	var h Histogram
	require.Zero(t, testing.AllocsPerRun(1000, func() { h.Record(12345) }))
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	for i := range b.N {
		h.Record(uint64(i))
	}
}
