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
	summary
}

// summary holds what both histogram kinds keep exactly beside their counts.
type summary struct {
	n   uint64
	sum uint64
	min uint64
	max uint64
}

func (s *summary) record(v uint64) {
	if s.n == 0 || v < s.min {
		s.min = v
	}
	if v > s.max {
		s.max = v
	}
	s.n++
	s.sum += v
}

func (s *summary) merge(o *summary) {
	if s.n == 0 || o.min < s.min {
		s.min = o.min
	}
	s.max = max(s.max, o.max)
	s.n += o.n
	s.sum += o.sum
}

// bucketIn maps v to its bucket in a log-linear layout of 2^sb linear
// sub-buckets per octave. sb is a constant at every call, so the inlined
// arithmetic is as cheap as a hand-specialised copy.
func bucketIn(v uint64, sb uint) int {
	if v < 1<<sb {
		return int(v)
	}
	e := uint(bits.Len64(v)) - 1 - sb // octave above the linear range
	return int(e+1)<<sb + int((v>>e)&(1<<sb-1))
}

// lowerIn is the smallest value that maps to bucket b of that layout.
func lowerIn(b int, sb uint) uint64 {
	if b < 1<<sb {
		return uint64(b)
	}
	e := uint(b>>sb) - 1
	return uint64(1<<sb+b&(1<<sb-1)) << e
}

// quantileIn answers Quantile over counts laid out with sb sub-bucket bits.
func quantileIn(counts []uint64, s *summary, q float64, sb uint) uint64 {
	if s.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(s.n)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range counts {
		seen += c
		if seen >= rank {
			if b+1 < len(counts) {
				return min(lowerIn(b+1, sb)-1, s.max)
			}
			return s.max
		}
	}
	return s.max
}

func bucketOf(v uint64) int   { return bucketIn(v, subBits) }
func lowerBound(b int) uint64 { return lowerIn(b, subBits) }

// Record adds one value.
func (h *Histogram) Record(v uint64) {
	h.counts[bucketOf(v)]++
	h.record(v)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.merge(&o.summary)
}

// Count returns how many values were recorded.
func (s *summary) Count() uint64 { return s.n }

// Min and Max are exact.
func (s *summary) Min() uint64 { return s.min }
func (s *summary) Max() uint64 { return s.max }

// Mean is exact (modulo overflow of the running sum past 2^64).
func (s *summary) Mean() float64 {
	if s.n == 0 {
		return 0
	}
	return float64(s.sum) / float64(s.n)
}

// Quantile returns a value v such that about q of the recorded values are
// <= v (q in [0, 1]); the answer is the upper edge of the bucket holding the
// q-th value, clamped to the exact max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) uint64 {
	return quantileIn(h.counts[:], &h.summary, q, subBits)
}

// Reset clears the histogram.
func (h *Histogram) Reset() { *h = Histogram{} }
