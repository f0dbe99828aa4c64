package traffic

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// SinkOptions configures a Sink.
type SinkOptions struct {
	Port  port.Port
	Queue int
	Pool  *mbuf.Pool
	Burst int // frames per RxBurst (0 → 32)
	Flows int // flows to track sequence numbers for (0 → 1); others count as foreign
	// SrcPort is flow 0's UDP source port, the generator's
	// Addressing.SrcPort (0: BaseSrcPort).
	SrcPort uint16
	// Latency records now − transmit stamp. Meaningful only when sender and
	// sink read the same clock (same process, or clock.Real in processes on
	// one machine).
	Latency bool
	// Clock, when set, is read once per burst received, after RxBurst,
	// for the latency: the loop's timestamp is taken when its iteration
	// starts, the same reading a generator on the same loop stamped its
	// frames with (a latency of 0). nil uses the loop's timestamp. It must
	// be the sender's clock, or one comparable to it (clock.Real).
	Clock clock.Clock
	// Cache is the poll loop's mbuf cache to free into; nil makes one.
	Cache *mbuf.Cache
	// PerFlow keeps FlowStats for every flow (loss, RFC 4737 reordering,
	// duplicates, latency min/mean/max) and records latency in an HDR
	// histogram (1 %) instead of the coarse one; Interval, when set,
	// closes an interval histogram that often, on the loop's clock (see
	// Interval).
	PerFlow  bool
	Interval time.Duration
	// FlowHistograms, with PerFlow, also keeps a FlowLatency histogram per
	// flow (~1 KiB each) for per-flow latency percentiles
	// (Sink.FlowLatencies); it costs more per frame than PerFlow alone
	// (see the package doc).
	FlowHistograms bool
}

// Sink is a stage that receives stamped frames, checks their sequence
// numbers per flow and frees them.
type Sink struct {
	opts  SinkOptions
	cache *mbuf.Cache
	burst []mbuf.Handle
	next  []uint64 // expected sequence number per flow

	local SinkStats // owned by the polling goroutine
	lat   hist.Histogram

	mu        sync.Mutex // guards published and latSnap
	published SinkStats
	latSnap   hist.Histogram
	received  atomic.Uint64 // also in published; lock-free for wait loops
	polls     uint32

	rx *flowRx // nil unless PerFlow
}

// SinkStats are the sink's counters.
type SinkStats struct {
	Received uint64 // stamped frames of tracked flows
	Bytes    uint64 // bytes of every frame received
	InOrder  uint64 // frames whose sequence number was the one expected
	// Gaps counts sequence numbers skipped when a frame arrived ahead of the
	// expected one; Late counts frames that arrived behind it (reordered or
	// duplicated). With no duplicates, lost = Gaps − Late.
	Gaps uint64
	Late uint64
	// Foreign counts frames without a stamp or from an untracked flow.
	Foreign uint64
}

// NewSink validates opts and builds a sink.
func NewSink(opts SinkOptions) (*Sink, error) {
	if err := checkEndpoint("sink", opts.Port, opts.Pool, opts.Queue, &opts.Burst, &opts.Flows); err != nil {
		return nil, err
	}
	if opts.SrcPort == 0 {
		opts.SrcPort = BaseSrcPort
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("traffic: sink interval %v must be >= 0 (0: no interval histograms)", opts.Interval)
	}
	if opts.FlowHistograms && !opts.PerFlow {
		return nil, fmt.Errorf("traffic: sink FlowHistograms needs PerFlow")
	}
	s := &Sink{
		opts:  opts,
		cache: cacheOr(opts.Cache, opts.Pool),
		burst: make([]mbuf.Handle, opts.Burst),
		next:  make([]uint64, opts.Flows),
	}
	if opts.PerFlow {
		s.rx = newFlowRx(opts.Flows, opts.Burst, opts.FlowHistograms)
	}
	return s, nil
}

// Name implements lcore.Stage.
func (s *Sink) Name() string { return "sink" }

// WakeFDs implements lcore.Waker: the queue's descriptor, when its port
// has one.
func (s *Sink) WakeFDs(fds []int) []int {
	return append(fds, port.RxWaitFD(s.opts.Port, s.opts.Queue))
}

// Poll receives and checks one burst.
func (s *Sink) Poll(now clock.Time) int {
	if s.rx != nil && s.opts.Interval > 0 && now >= s.rx.nextClose {
		s.rx.close(now, s.opts.Interval)
	}
	n := s.opts.Port.RxBurst(s.opts.Queue, s.burst)
	if n == 0 {
		return 0
	}
	bufs := s.burst[:n]
	if s.opts.Latency && s.opts.Clock != nil {
		now = max(now, s.opts.Clock.Now())
	}
	if s.rx != nil {
		// The flows' NextExp are the expected numbers: s.next is not
		// touched, one cache line per frame fewer.
		s.rx.poll(s, bufs, now)
	} else {
		s.plain(bufs, now)
	}
	s.cache.Free(bufs)
	s.received.Store(s.local.Received + s.local.Foreign)
	if s.polls++; s.polls&63 == 0 {
		s.publish()
	}
	return n
}

// plain accounts a burst without PerFlow.
func (s *Sink) plain(bufs []mbuf.Handle, now clock.Time) {
	for _, h := range bufs {
		data := s.opts.Pool.Data(h)
		s.local.Bytes += uint64(len(data))
		st, ok := ReadStamp(data)
		st.Flow = st.SrcPort - s.opts.SrcPort
		if !ok || int(st.Flow) >= len(s.next) {
			s.local.Foreign++
			continue
		}
		s.local.Received++
		switch exp := s.next[st.Flow]; {
		case st.Seq == exp:
			s.local.InOrder++
			s.next[st.Flow] = exp + 1
		case st.Seq > exp:
			s.local.Gaps += st.Seq - exp
			s.next[st.Flow] = st.Seq + 1
		default:
			s.local.Late++
		}
		if s.opts.Latency && int64(now) >= st.Time {
			s.lat.Record(uint64(int64(now) - st.Time))
		}
	}
}

func (s *Sink) publish() {
	s.mu.Lock()
	s.published = s.local
	if s.rx == nil {
		s.latSnap = s.lat
	}
	s.mu.Unlock()
}

// Stop implements the lcore stop hook: publishes final counters and returns
// the cache to the pool.
func (s *Sink) Stop(now clock.Time) {
	if s.rx != nil {
		s.rx.close(now, 0)
	}
	s.publish()
	s.cache.Flush()
}

// Frames returns how many frames the sink has taken in (stamped or not);
// cheap enough for a wait loop. Safe from any goroutine.
func (s *Sink) Frames() uint64 { return s.received.Load() }

// Stats returns the counters as of the last publication (every 64 busy
// polls, and at Stop). Safe from any goroutine.
func (s *Sink) Stats() SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published
}

// Latency returns a copy of the latency histogram as of the last
// publication (with PerFlow: the HDR total's, as of the last closed
// interval or Stop). Safe from any goroutine.
func (s *Sink) Latency() hist.Histogram {
	if s.rx != nil {
		return s.rx.coarse()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latSnap
}
