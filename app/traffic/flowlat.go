package traffic

import "math/bits"

// FlowLatency is one flow's latency histogram: log-linear, flowLatSub
// linear buckets per octave, so a quantile is within 1/flowLatSub (12.5
// %) of the true value — coarser than the sink's HDR histogram (1 %),
// which would take 100 times the memory per flow. Latencies of 2^32 ns
// (4.3 s) and more share the top bucket; a quantile there is the flow's
// maximum.
type FlowLatency struct {
	counts [flowLatBuckets]uint32
	n      uint64
	max    uint64
}

const (
	flowLatBits    = 3
	flowLatSub     = 1 << flowLatBits
	flowLatTop     = 32 // octaves covered
	flowLatBuckets = (flowLatTop - flowLatBits + 1) * flowLatSub
)

func flowLatBucket(v uint64) int {
	if v < flowLatSub {
		return int(v)
	}
	e := uint(bits.Len64(v)) - 1 - flowLatBits
	return min(int(e+1)<<flowLatBits+int((v>>e)&(flowLatSub-1)), flowLatBuckets-1)
}

// flowLatUpper is one past the largest value of bucket b.
func flowLatUpper(b int) uint64 {
	b++
	if b < flowLatSub {
		return uint64(b)
	}
	e := uint(b>>flowLatBits) - 1
	return uint64(flowLatSub+b&(flowLatSub-1)) << e
}

func (h *FlowLatency) record(ns uint64) {
	h.counts[flowLatBucket(ns)]++
	h.n++
	h.max = max(h.max, ns)
}

// A sink does not record into a flow's histogram frame by frame: that
// would touch a line of a kilobyte-sized record per frame, beside the
// flow's FlowStats. It keeps a run per flow instead — the bucket of the
// flow's last latency and how many latencies in a row fell in it, one
// uint32 in a small slice — and adds a run to the histogram only when
// the flow's latency leaves that bucket (and at Stop). The count and
// maximum are the flow's FlowStats.LatCount and LatencyMax, filled in
// when the histogram is published.
const (
	runBits = 24
	runMax  = 1<<runBits - 1
)

// latRun is a flow's pending run: bucket<<runBits | count (count 0:
// none).
type latRun uint32

// add counts ns in run r; when ns falls in another bucket (or the run is
// full) it first adds r's count to h.
func (r *latRun) add(h *FlowLatency, ns uint64) {
	b := latRun(flowLatBucket(ns))
	if p := *r; p>>runBits == b && p&runMax != runMax {
		*r = p + 1
		return
	}
	r.flush(h)
	*r = b<<runBits | 1
}

// flush adds r's count to h and empties r.
func (r *latRun) flush(h *FlowLatency) {
	if c := uint32(*r & runMax); c != 0 {
		h.counts[*r>>runBits] += c
	}
	*r = 0
}

// Count is how many latencies were recorded.
func (h *FlowLatency) Count() uint64 { return h.n }

// Quantile returns the q-quantile (0 < q <= 1) in nanoseconds: the
// largest value of the bucket holding it, at most the flow's maximum; 0
// when nothing was recorded.
func (h *FlowLatency) Quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := max(uint64(q*float64(h.n)+0.999999), 1)
	var seen uint64
	for b, c := range h.counts {
		seen += uint64(c)
		if seen >= rank {
			return min(flowLatUpper(b)-1, h.max)
		}
	}
	return h.max
}

// Merge adds o (the same flow seen by another queue's sink).
func (h *FlowLatency) Merge(o *FlowLatency) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// MergeFlowLatencies adds every flow of o into dst (which grows to o's
// length).
func MergeFlowLatencies(dst, o []FlowLatency) []FlowLatency {
	for len(dst) < len(o) {
		dst = append(dst, FlowLatency{})
	}
	for i := range o {
		dst[i].Merge(&o[i])
	}
	return dst
}
