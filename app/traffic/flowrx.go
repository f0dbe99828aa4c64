package traffic

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// flowRx is a sink's per-flow side. The loop owns hot, cold, lat, runs,
// lats and cur; at the close of each interval (and at Stop) it folds cur
// into the total and copies both, and the flows (hot and cold joined),
// into the published snapshot under mu.
type flowRx struct {
	hot  []flowHot   // per flow: all an in-order frame touches
	cold []FlowStats // per flow: the rest (its flowHot unused)
	// lat and runs are nil unless SinkOptions.FlowHistograms.
	lat       []FlowLatency // per flow: runs reach it when a flow's latency changes bucket
	runs      []latRun      // per flow: 4 bytes, 40 KB at 10,000 flows (cache-resident)
	lats      []uint64      // one burst's latencies, recorded in cur at its end
	cur       hist.HDR      // this interval's latencies
	nextClose clock.Time
	negative  uint64 // frames whose stamp is ahead of now (clocks not comparable): not recorded

	mu      sync.Mutex
	total   hist.HDR
	pending hist.HDR // intervals closed since the last TakeIntervals
	closed  atomic.Uint64
	snap    []FlowStats
	negSnap uint64
	// latSnap is lat as of Stop: copied once, not every interval (a
	// kilobyte per flow).
	latSnap []FlowLatency
}

func newFlowRx(flows, burst int, histograms bool) *flowRx {
	r := &flowRx{hot: make([]flowHot, flows), cold: make([]FlowStats, flows), lats: make([]uint64, burst), snap: make([]FlowStats, flows)}
	if histograms {
		r.lat, r.runs = make([]FlowLatency, flows), make([]latRun, flows)
	}
	return r
}

// poll accounts a burst, the per-flow form of Sink.Poll's loop. A frame
// that is its flow's next expected one and has a latency, nearly every
// frame of a healthy stream, is accounted here in a few stores to its
// flow's hot line; every other goes through frame. The burst's
// latencies are recorded in the shared histogram at once, at the end.
func (r *flowRx) poll(s *Sink, bufs []mbuf.Handle, now clock.Time) {
	pool, base, latency := s.opts.Pool, s.opts.SrcPort, s.opts.Latency
	hot, lats, st := r.hot, r.lats, &s.local
	k := 0
	for _, m := range bufs {
		data := pool.Data(m)
		st.Bytes += uint64(len(data))
		stamp, ok := ReadStamp(data)
		flow := stamp.SrcPort - base
		if !ok || int(flow) >= len(hot) {
			st.Foreign++
			continue
		}
		st.Received++
		h := &hot[flow]
		lat := int64(now) - stamp.Time
		if stamp.Seq != h.NextExp || !latency || lat < 0 {
			r.frame(st, flow, stamp.Seq, latency, lat)
			continue
		}
		st.InOrder++
		h.NextExp++
		h.seen = h.seen<<1 | 1
		h.Received++
		h.latency(uint64(lat))
		if r.runs != nil {
			r.runs[flow].add(&r.lat[flow], uint64(lat))
		}
		lats[k] = uint64(lat)
		k++
	}
	r.cur.RecordAll(lats[:k])
}

// frame accounts one stamped frame of a tracked flow, in st's counters
// as the plain sink would and in the flow's; lat is now minus its
// transmit stamp.
func (r *flowRx) frame(st *SinkStats, flow uint16, seq uint64, withLatency bool, lat int64) {
	h := &r.hot[flow]
	switch exp := h.NextExp; {
	case seq == exp:
		st.InOrder++
	case seq > exp:
		st.Gaps += seq - exp
	default:
		st.Late++
	}
	if !r.cold[flow].accountWith(h, seq) || !withLatency {
		return
	}
	if lat < 0 {
		r.negative++
		return
	}
	h.latency(uint64(lat))
	if r.runs != nil {
		r.runs[flow].add(&r.lat[flow], uint64(lat))
	}
	r.cur.Record(uint64(lat))
}

// close ends the current interval at now; the next ends after every
// (0: none is scheduled, as at Stop).
func (r *flowRx) close(now clock.Time, every time.Duration) {
	r.mu.Lock()
	r.total.Merge(&r.cur)
	r.pending.Merge(&r.cur)
	for i := range r.snap {
		r.snap[i] = r.cold[i]
		r.snap[i].flowHot = r.hot[i]
	}
	r.negSnap = r.negative
	if every == 0 {
		for i := range r.runs {
			r.runs[i].flush(&r.lat[i])
		}
		r.latSnap = append(r.latSnap[:0], r.lat...)
		for i := range r.latSnap {
			r.latSnap[i].n, r.latSnap[i].max = r.hot[i].LatCount, r.hot[i].LatencyMax
		}
	}
	r.mu.Unlock()
	r.closed.Add(1)
	r.cur.Reset()
	if every > 0 {
		if r.nextClose == 0 {
			// The first call only starts the clock: an interval is a
			// whole period.
			r.total.Reset()
			r.pending.Reset()
			r.closed.Store(0)
		}
		r.nextClose = now.Add(every)
	}
}

func (r *flowRx) coarse() hist.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total.Coarse()
}

// Flows returns a copy of the per-flow counters as of the last closed
// interval or Stop (nil without PerFlow). Safe from any goroutine.
func (s *Sink) Flows() []FlowStats {
	if s.rx == nil {
		return nil
	}
	s.rx.mu.Lock()
	defer s.rx.mu.Unlock()
	out := make([]FlowStats, len(s.rx.snap))
	copy(out, s.rx.snap)
	return out
}

// FlowLatencies returns a copy of each flow's latency histogram as of
// Stop (nil before, and without FlowHistograms). Safe from any goroutine.
func (s *Sink) FlowLatencies() []FlowLatency {
	if s.rx == nil {
		return nil
	}
	s.rx.mu.Lock()
	defer s.rx.mu.Unlock()
	if s.rx.latSnap == nil {
		return nil
	}
	out := make([]FlowLatency, len(s.rx.latSnap))
	copy(out, s.rx.latSnap)
	return out
}

// LatencyHDR returns the HDR latency histogram of everything up to the
// last closed interval or Stop, and how many intervals have closed (0:
// none yet). Without PerFlow it is empty. Safe from any goroutine.
func (s *Sink) LatencyHDR() (total hist.HDR, intervals uint64) {
	if s.rx == nil {
		return
	}
	s.rx.mu.Lock()
	defer s.rx.mu.Unlock()
	return s.rx.total, s.rx.closed.Load()
}

// TakeIntervals returns the latencies of the intervals closed since the
// last call, and forgets them: an exporter that calls it every period
// loses no frame even when two intervals closed between its calls. Safe
// from any goroutine.
func (s *Sink) TakeIntervals() hist.HDR {
	if s.rx == nil {
		return hist.HDR{}
	}
	s.rx.mu.Lock()
	defer s.rx.mu.Unlock()
	h := s.rx.pending
	s.rx.pending.Reset()
	return h
}
