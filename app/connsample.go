package app

import (
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// ConnSampler publishes the round-trip time and congestion window of a
// set of connections for other goroutines (metrics, live figures). A
// connection's state may be read only on the goroutine that polls its
// endpoint, so the sampler is a stage on that loop: every Every it reads
// them and stores the figures atomically. It reports no work, so it never
// keeps an idle loop awake.
type ConnSampler struct {
	conns func() []*txn.Conn
	every clock.Time
	next  clock.Time

	srtt, window, live atomic.Int64
}

// NewConnSampler samples conns() every every (at least 1ms).
func NewConnSampler(conns func() []*txn.Conn, every time.Duration) *ConnSampler {
	return &ConnSampler{conns: conns, every: clock.Time(max(every, time.Millisecond))}
}

// Name names the stage.
func (s *ConnSampler) Name() string { return "conn-sampler" }

// Poll samples when the period has passed.
func (s *ConnSampler) Poll(now clock.Time) int {
	if now < s.next {
		return 0
	}
	s.next = now + s.every
	var srtt, window, live int64
	for _, c := range s.conns() {
		if !c.Live() {
			continue
		}
		t := c.Transport()
		live++
		srtt += t.Stats().SRTT
		if cc := t.Congestion(); cc != nil {
			window += int64(cc.Window())
		}
	}
	if live > 0 {
		srtt /= live
	}
	s.srtt.Store(srtt)
	s.window.Store(window)
	s.live.Store(live)
	return 0
}

// Sample returns, from any goroutine, the latest sample: the mean smoothed
// RTT of the live connections, the sum of their congestion windows
// (packets) and how many were live.
func (s *ConnSampler) Sample() (srtt time.Duration, window, conns int) {
	return time.Duration(s.srtt.Load()), int(s.window.Load()), int(s.live.Load())
}
