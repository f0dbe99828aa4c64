package smallops

import (
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
)

// stallMeter is a stage that measures, on its loop, the gaps between two
// consecutive iterations (the loop's own clock reading, passed to every
// stage): a gap longer than over is a stall, the loop off its CPU (the
// hypervisor or the kernel ran something else) or held up. A busy loop's
// iterations are microseconds apart, so a gap past the transport's RTO
// floor is a time the peer got no ACK from this loop, and each one may
// have cost a retransmit timeout. The loop writes, the measuring
// goroutine reads; a stall costs two atomic stores, an iteration none.
type stallMeter struct {
	name    string
	loop    string
	over    time.Duration
	last    clock.Time
	stalls  atomic.Uint64
	longest atomic.Int64 // nanoseconds
}

func newStallMeter(loop string, over time.Duration) *stallMeter {
	return &stallMeter{name: "stalls-" + loop, loop: loop, over: over}
}

func (m *stallMeter) Name() string { return m.name }

// Poll notes the gap since the loop's previous iteration; it does no
// work, so it never keeps the loop from idling.
func (m *stallMeter) Poll(now clock.Time) int {
	if m.last != 0 {
		if gap := now.Sub(m.last); gap > m.over {
			m.stalls.Add(1)
			if int64(gap) > m.longest.Load() {
				m.longest.Store(int64(gap))
			}
		}
	}
	m.last = now
	return 0
}

// stallCount is one loop's stalls in a measured window.
type stallCount struct {
	loop    string
	n       uint64
	longest time.Duration // over the row, warm-up included
}
