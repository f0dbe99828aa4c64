package hist

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHDRBucketsCoverEveryValue(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 123456789, 1 << 40, 1<<64 - 1} {
		b := bucketIn(v, hdrSubBits)
		require.Less(t, b, hdrBuckets, "value %d", v)
		require.LessOrEqual(t, lowerIn(b, hdrSubBits), v, "value %d bucket %d", v, b)
		if b+1 < hdrBuckets {
			next := lowerIn(b+1, hdrSubBits)
			require.Greater(t, next, v, "value %d bucket %d", v, b)
			// The width of a bucket over its lower edge is the error bound.
			lo := lowerIn(b, hdrSubBits)
			require.LessOrEqual(t, float64(next-1-lo), HDRError*float64(lo)+1e-9, "value %d", v)
		}
	}
}

// TestHDRQuantileWithinOnePercent checks the promise users rely on: every
// quantile of a wide distribution within 1 % of the exact one.
func TestHDRQuantileWithinOnePercent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	var h HDR
	vals := make([]uint64, 200000)
	for i := range vals {
		// Log-normal-ish: microseconds to tens of milliseconds.
		vals[i] = uint64(1000 * (1 + r.ExpFloat64()*r.ExpFloat64()*200))
		h.Record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := h.Quantile(q)
		require.GreaterOrEqual(t, got, exact, "q=%v", q)
		require.LessOrEqual(t, float64(got), float64(exact)*1.01, "q=%v: %d vs exact %d", q, got, exact)
	}
	require.Equal(t, vals[0], h.Min())
	require.Equal(t, vals[len(vals)-1], h.Quantile(1))
	require.Equal(t, uint64(len(vals)), h.Count())
}

func TestHDRBucketsAndCoarseKeepEveryValue(t *testing.T) {
	var h HDR
	var direct Histogram
	for v := range uint64(5000) {
		h.Record(v * 37)
		direct.Record(v * 37)
	}
	var total uint64
	var last uint64
	h.Buckets(func(b Bucket) {
		require.LessOrEqual(t, b.Lo, b.Hi)
		require.GreaterOrEqual(t, b.Lo, last)
		last = b.Hi + 1
		total += b.Count
	})
	require.Equal(t, h.Count(), total)
	c := h.Coarse()
	require.Equal(t, direct.Count(), c.Count())
	require.Equal(t, direct.Min(), c.Min())
	require.Equal(t, direct.Max(), c.Max())
	require.Equal(t, direct.Mean(), c.Mean())
	for _, q := range []float64{0.5, 0.99} {
		require.InEpsilon(t, float64(direct.Quantile(q)), float64(c.Quantile(q)), 0.07)
	}
}

func TestHDRMergeEqualsRecordingBoth(t *testing.T) {
	var a, b, both HDR
	for i := range uint64(1000) {
		a.Record(i * 3)
		b.Record(i * 11)
		both.Record(i * 3)
		both.Record(i * 11)
	}
	a.Merge(&b)
	require.Equal(t, both, a)
	var empty HDR
	require.Zero(t, empty.Quantile(0.5))
}

func TestHDRRecordDoesNotAllocate(t *testing.T) {
	var h HDR
	require.Zero(t, testing.AllocsPerRun(1000, func() { h.Record(987654) }))
}

// TestHDRRecordAllEqualsRecord: values recorded a slice at a time, in
// runs of one bucket and values that change bucket every time, across the
// linear range, octave edges and the top bucket, leave the histogram
// Record leaves.
func TestHDRRecordAllEqualsRecord(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	var direct, all HDR
	vals := []uint64{5, 0, 0, 127, 128, 128, 129, 255, 256, 257, 1000, 1001, 1<<64 - 1, 1 << 63, 1<<63 + 1, 0}
	for range 5000 {
		base := r.Uint64N(1 << (r.IntN(40) + 1))
		for range r.IntN(20) + 1 {
			vals = append(vals, base+r.Uint64N(base/100+1))
		}
	}
	for _, v := range vals {
		direct.Record(v)
	}
	for len(vals) > 0 {
		n := min(len(vals), r.IntN(40))
		all.RecordAll(vals[:n])
		vals = vals[n:]
	}
	require.Equal(t, direct, all)
	burst := []uint64{1000, 1001, 1003, 999, 5000}
	require.Zero(t, testing.AllocsPerRun(1000, func() { all.RecordAll(burst) }))
}
