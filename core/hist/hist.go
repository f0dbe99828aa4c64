package hist

import (
	"math"
	"math/bits"
)

const (
	subBits = 4 // 16 linear sub-buckets per power of two
	sub     = 1 << subBits
	// Buckets covers every uint64: values below sub map 1:1, then 16 per
	// octave up to 2^64.
	buckets = (64 - subBits + 1) * sub
)

// Histogram counts uint64 values (typically nanoseconds).
type Histogram struct {
	counts [buckets]uint64
	n      uint64
	sum    uint64
	min    uint64
	max    uint64
}

func bucketOf(v uint64) int {
	if v < sub {
		return int(v)
	}
	e := bits.Len64(v) - 1 - subBits // octave above the linear range
	return (e+1)*sub + int((v>>uint(e))&(sub-1))
}

// lowerBound is the smallest value that maps to bucket b.
func lowerBound(b int) uint64 {
	if b < sub {
		return uint64(b)
	}
	e := b/sub - 1
	return uint64(sub+b%sub) << uint(e)
}

// Record adds one value.
func (h *Histogram) Record(v uint64) {
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count returns how many values were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are exact.
func (h *Histogram) Min() uint64 { return h.min }
func (h *Histogram) Max() uint64 { return h.max }

// Mean is exact (modulo overflow of the running sum past 2^64).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n)
}

// Quantile returns a value v such that about q of the recorded values are
// <= v (q in [0, 1]); the answer is the upper edge of the bucket holding the
// q-th value, clamped to the exact max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			if b+1 < buckets {
				return min(lowerBound(b+1)-1, h.max)
			}
			return h.max
		}
	}
	return h.max
}

// Reset clears the histogram.
func (h *Histogram) Reset() { *h = Histogram{} }
