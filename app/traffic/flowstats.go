package traffic

// SeqWindow is how far behind the highest sequence number a flow has seen
// a frame may arrive and still be checked for duplication: one bit each.
const SeqWindow = 64

// jumpMemory is how many recent sequence jumps a flow remembers to measure
// reordering extent (RFC 4737 section 4.2.2): a frame that fills a hole
// older than that is counted reordered, its extent unknown.
const jumpMemory = 4

// jump is one arrival that skipped sequence numbers: the holes start..its
// own number, made by arrival number at.
type jump struct{ start, at uint64 }

// FlowStats is one flow's accounting, by RFC 4737's definitions: a frame
// is reordered when its sequence number is below NextExp, the next
// expected (one past the highest seen); its reordering extent is how many
// frames arrived between the earliest-arriving frame with a higher number
// and it.
type FlowStats struct {
	flowHot

	// Duplicates counts the arrivals of a number already received
	// (checked within SeqWindow of NextExp).
	Duplicates uint64
	// Reordered counts frames that arrived with a number below NextExp;
	// BeyondWindow those of them more than SeqWindow behind, which were
	// not checked for duplication. ExtentSum and MaxExtent sum and bound
	// the reordering extents measured; ExtentUnknown counts reordered
	// frames whose extent was not (their hole was older than the last
	// four jumps).
	Reordered, BeyondWindow uint64
	ExtentSum, MaxExtent    uint64
	ExtentUnknown           uint64

	jumps  [jumpMemory]jump // oldest first
	njumps uint8
}

// flowHot is all an in-order frame touches of its flow, one 64-byte
// line (56 bytes of it used: how many frames arrived is not kept there,
// it is Received + Duplicates). A sink keeps its flows' flowHot in a slice of its own, dense (640
// KB at 10,000 flows, within a core's L2), and the rest of each
// FlowStats in another that only reordering, duplicates and jumps touch.
type flowHot struct {
	// NextExp is one past the highest sequence number received.
	NextExp uint64
	seen    uint64 // bit i: number NextExp−1−i received
	// Received counts distinct frames.
	Received uint64
	// LatencyMin, LatencyMax and LatSum over LatCount frames, nanoseconds.
	LatencyMin, LatencyMax, LatSum, LatCount uint64
	_                                        [8]byte // a flow's line is a whole cache line
}

// Lost is the frames of the flow never received below NextExp: loss
// after the last frame received is invisible to the receiver (compare
// Received with what the sender sent for that).
func (f *FlowStats) Lost() uint64 { return f.NextExp - min(f.Received, f.NextExp) }

// MeanExtent is the mean reordering extent of the frames whose extent
// was measured.
func (f *FlowStats) MeanExtent() float64 {
	n := f.Reordered - f.ExtentUnknown
	if n == 0 {
		return 0
	}
	return float64(f.ExtentSum) / float64(n)
}

// LatencyMean is the mean one-way latency in nanoseconds.
func (f *FlowStats) LatencyMean() float64 {
	if f.LatCount == 0 {
		return 0
	}
	return float64(f.LatSum) / float64(f.LatCount)
}

// account adds one arrival of seq. It reports false for a duplicate,
// whose latency the caller does not record.
func (f *FlowStats) account(seq uint64) bool { return f.accountWith(&f.flowHot, seq) }

// accountWith is account with the flow's hot fields in h rather than
// f's own: f's are not read, and f is touched only when seq is not the
// next expected number.
func (f *FlowStats) accountWith(h *flowHot, seq uint64) bool {
	a := h.Received + f.Duplicates // this frame's arrival number
	if seq >= h.NextExp {
		if seq > h.NextExp {
			f.remember(jump{start: h.NextExp, at: a})
		}
		if shift := seq + 1 - h.NextExp; shift >= SeqWindow {
			h.seen = 1
		} else {
			h.seen = h.seen<<shift | 1
		}
		h.NextExp = seq + 1
		h.Received++
		return true
	}
	back := h.NextExp - 1 - seq
	if back < SeqWindow {
		bit := uint64(1) << back
		if h.seen&bit != 0 {
			f.Duplicates++
			return false
		}
		h.seen |= bit
	} else {
		f.BeyondWindow++
	}
	h.Received++
	f.Reordered++
	// The jump that made seq's hole is the latest one starting at or
	// below it; its arrival is the earliest of a higher number.
	for i := int(f.njumps) - 1; i >= 0; i-- {
		if j := f.jumps[i]; j.start <= seq {
			e := a - j.at
			f.ExtentSum += e
			f.MaxExtent = max(f.MaxExtent, e)
			return true
		}
	}
	f.ExtentUnknown++
	return true
}

func (f *FlowStats) remember(j jump) {
	if int(f.njumps) < jumpMemory {
		f.jumps[f.njumps] = j
		f.njumps++
		return
	}
	copy(f.jumps[:], f.jumps[1:])
	f.jumps[jumpMemory-1] = j
}

func (f *flowHot) latency(ns uint64) {
	if f.LatCount == 0 || ns < f.LatencyMin {
		f.LatencyMin = ns
	}
	f.LatencyMax = max(f.LatencyMax, ns)
	f.LatSum += ns
	f.LatCount++
}

// merge adds o's counters (the same flow seen by another queue's sink).
func (f *FlowStats) merge(o *FlowStats) {
	f.Received += o.Received
	f.Duplicates += o.Duplicates
	f.Reordered += o.Reordered
	f.BeyondWindow += o.BeyondWindow
	f.ExtentSum += o.ExtentSum
	f.MaxExtent = max(f.MaxExtent, o.MaxExtent)
	f.ExtentUnknown += o.ExtentUnknown
	f.NextExp = max(f.NextExp, o.NextExp)
	if o.LatCount > 0 && (f.LatCount == 0 || o.LatencyMin < f.LatencyMin) {
		f.LatencyMin = o.LatencyMin
	}
	f.LatencyMax = max(f.LatencyMax, o.LatencyMax)
	f.LatSum += o.LatSum
	f.LatCount += o.LatCount
}

// MergeFlows adds every flow of o into dst (which grows to o's length):
// the per-flow totals of several sinks.
func MergeFlows(dst []FlowStats, o []FlowStats) []FlowStats {
	for len(dst) < len(o) {
		dst = append(dst, FlowStats{})
	}
	for i := range o {
		dst[i].merge(&o[i])
	}
	return dst
}
