package hist

import "math/bits"

const (
	hdrSubBits = 7 // 128 linear sub-buckets per octave: ≤ 1/128 relative error
	hdrSub     = 1 << hdrSubBits
	// hdrBuckets covers every uint64, as Histogram does.
	hdrBuckets = (64 - hdrSubBits + 1) * hdrSub
)

// HDRError is HDR's worst relative error: a bucket's width over its lower
// edge, 1/128 (0.78 %).
const HDRError = 1.0 / hdrSub

// HDR is a log-linear histogram in the manner of HdrHistogram: values below
// 128 are counted exactly, and every octave above is cut into 128 equal
// buckets, so Quantile's answer is within HDRError of the true value.
// It is 58 KiB, a plain value (copy it to snapshot it), and Record never
// allocates.
type HDR struct {
	counts [hdrBuckets]uint64
	summary
}

// Record adds one value.
func (h *HDR) Record(v uint64) {
	h.counts[bucketIn(v, hdrSubBits)]++
	h.record(v)
}

// Merge adds o's counts to h.
func (h *HDR) Merge(o *HDR) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.merge(&o.summary)
}

// Quantile is as Histogram.Quantile, within HDRError.
func (h *HDR) Quantile(q float64) uint64 {
	return quantileIn(h.counts[:], &h.summary, q, hdrSubBits)
}

// Reset clears the histogram.
func (h *HDR) Reset() { *h = HDR{} }

// Bucket is one non-empty bucket: Count values v with Lo <= v <= Hi.
type Bucket struct {
	Lo, Hi, Count uint64
}

// Buckets calls fn for every non-empty bucket in ascending order, the form
// in which a histogram is exported (CSV rows, JSON arrays).
func (h *HDR) Buckets(fn func(Bucket)) {
	if h.n == 0 {
		return
	}
	for b, c := range h.counts {
		if c == 0 {
			continue
		}
		hi := ^uint64(0)
		if b+1 < hdrBuckets {
			hi = lowerIn(b+1, hdrSubBits) - 1
		}
		fn(Bucket{Lo: lowerIn(b, hdrSubBits), Hi: hi, Count: c})
	}
}

// Coarse returns h's values in a Histogram (each bucket's count recorded at
// its lower edge, min, max, count and sum kept exactly), for code that
// takes the smaller kind.
func (h *HDR) Coarse() Histogram {
	var c Histogram
	h.Buckets(func(b Bucket) { c.counts[bucketOf(b.Lo)] += b.Count })
	c.summary = h.summary
	return c
}

// RecordAll adds every value of vs, as Record would one by one, at less
// cost when consecutive values fall in one bucket, as the latencies of a
// burst of frames mostly do: a value in the bucket of the one before
// costs a comparison and an increment in registers, and the histogram's
// memory is written once per run and once for the count, sum, min and
// max of all of vs.
func (h *HDR) RecordAll(vs []uint64) {
	if len(vs) == 0 {
		return
	}
	var lo, width, run, sum, hi uint64 // the run's bucket: lo <= v < lo+width
	mn := ^uint64(0)
	for _, v := range vs {
		if v-lo >= width {
			if run > 0 {
				h.counts[bucketIn(lo, hdrSubBits)] += run
			}
			// Values below hdrSub have a bucket each; an octave above
			// is cut into hdrSub buckets of 2^e.
			e := uint(0)
			if v >= hdrSub {
				e = uint(bits.Len64(v)) - 1 - hdrSubBits
			}
			lo, width, run = v>>e<<e, 1<<e, 0
		}
		run++
		sum += v
		mn, hi = min(mn, v), max(hi, v)
	}
	h.counts[bucketIn(lo, hdrSubBits)] += run
	h.merge(&summary{n: uint64(len(vs)), sum: sum, min: mn, max: hi})
}
