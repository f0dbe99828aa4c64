package rfc2544

import (
	"sync/atomic"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// armed is one trial on the traffic loop: its generator, the UDP source
// port that tells its frames from a late one of an earlier trial, and
// what the loop counted. The loop owns received, stale and lat until it
// has closed the trial (closed is then signalled).
type armed struct {
	gen      *traffic.Generator
	srcPort  uint16
	received uint64
	lat      hist.HDR
	// startAt and doneAt are the loop's times of the trial's first poll
	// and of the poll that found the generator done: the send time, to
	// a loop iteration's precision.
	startAt, doneAt clock.Time
	rx              atomic.Uint64 // received, for the controller's drain wait
}

// trialStage is the traffic side of the veth harness, one stage on one
// loop: it polls the current trial's generator on the generator port and
// receives on the sink port, counting the frames stamped with the trial's
// source port and recording their one-way latency (the real clock, read
// once per received burst, minus the transmit stamp; both are
// CLOCK_MONOTONIC in this process, nanosecond resolution). Frames are
// freed to the loop's cache as soon as they are read.
type trialStage struct {
	pool  *mbuf.Pool
	sink  port.Port
	cache *mbuf.Cache
	clk   clock.Clock
	burst []mbuf.Handle

	next     atomic.Pointer[armed] // handed over by the controller
	closeReq atomic.Bool
	closed   chan *armed // the trial just closed, to the controller
	cur      *armed
	stale    atomic.Uint64 // stamped frames of no current trial
	foreign  atomic.Uint64 // frames without a stamp
}

func newTrialStage(pool *mbuf.Pool, sink port.Port, cache *mbuf.Cache) *trialStage {
	return &trialStage{pool: pool, sink: sink, cache: cache, clk: clock.NewReal(), burst: make([]mbuf.Handle, 32), closed: make(chan *armed, 1)}
}

func (s *trialStage) Name() string { return "rfc2544-trial" }

func (s *trialStage) Poll(now clock.Time) int {
	if a := s.next.Swap(nil); a != nil {
		s.cur = a
	}
	work := 0
	cur := s.cur
	if cur != nil {
		if cur.startAt == 0 {
			cur.startAt = now
		}
		work += cur.gen.Poll(now)
		if cur.doneAt == 0 && cur.gen.Done() {
			cur.doneAt = now
		}
	}
	n := s.sink.RxBurst(0, s.burst)
	if n > 0 {
		t := int64(s.clk.Now())
		for _, h := range s.burst[:n] {
			st, ok := traffic.ReadStamp(s.pool.Data(h))
			switch {
			case !ok:
				s.foreign.Add(1)
			case cur == nil || st.SrcPort != cur.srcPort:
				s.stale.Add(1)
			default:
				cur.received++
				if t >= st.Time {
					cur.lat.Record(uint64(t - st.Time))
				}
			}
		}
		s.cache.Free(s.burst[:n])
		if cur != nil {
			cur.rx.Store(cur.received)
		}
		work += n
	}
	if cur != nil && s.closeReq.Load() {
		s.closeReq.Store(false)
		s.cur = nil
		// Frames a stalled generator still holds go back to the pool.
		cur.gen.Stop(now)
		s.closed <- cur
	}
	return work
}
