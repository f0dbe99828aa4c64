package pcap

import (
	"sync"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// stampTable carries each frame's capture timestamp from the Reader that
// filled it to a Writer or Mirror on the same pool, so a pcap→pcap run
// keeps the input's timestamps. It is indexed by handle. An entry counts
// only while the frame's Meta.RxTime is still the one the reader set
// (alloc zeroes Meta), so a frame freed and reused by another port is
// stamped by the writer's clock instead.
//
// The reader writes an entry when it fills a frame, the writer reads it
// when the frame reaches it: the frame's owner at each step is the only
// goroutine touching its entry, and the hand-over between them (a ring,
// a stage's burst) orders the two.
type stampTable struct {
	refs int     // guarded by stampTables.mu
	wall []int64 // capture time, ns since the Unix epoch; 0: none
	tag  []int64 // the Meta.RxTime the reader set
}

var stampTables struct {
	mu sync.Mutex
	m  map[*mbuf.Pool]*stampTable
}

// acquireStamps returns pool's table, making it on first use; each
// acquire is matched by a releaseStamps.
func acquireStamps(pool *mbuf.Pool) *stampTable {
	stampTables.mu.Lock()
	defer stampTables.mu.Unlock()
	if stampTables.m == nil {
		stampTables.m = map[*mbuf.Pool]*stampTable{}
	}
	t := stampTables.m[pool]
	if t == nil {
		t = &stampTable{wall: make([]int64, pool.Frames()), tag: make([]int64, pool.Frames())}
		stampTables.m[pool] = t
	}
	t.refs++
	return t
}

func releaseStamps(pool *mbuf.Pool) {
	stampTables.mu.Lock()
	defer stampTables.mu.Unlock()
	if t := stampTables.m[pool]; t != nil {
		if t.refs--; t.refs <= 0 {
			delete(stampTables.m, pool)
		}
	}
}

// set records frame h's capture time; rxTime is the Meta.RxTime it was
// given.
func (t *stampTable) set(h mbuf.Handle, rxTime, wall int64) {
	if int(h) < len(t.wall) {
		t.wall[h], t.tag[h] = wall, rxTime
	}
}

// take returns frame h's capture time (ns since the Unix epoch) and
// clears it, or 0 when h did not come from a reader or was reused since.
func (t *stampTable) take(h mbuf.Handle, rxTime int64) int64 {
	if int(h) >= len(t.wall) || t.wall[h] == 0 || t.tag[h] != rxTime {
		return 0
	}
	w := t.wall[h]
	t.wall[h] = 0
	return w
}
