package portstat

import (
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// cacheLine is 128 rather than 64 because the adjacent-line prefetcher pulls
// lines in pairs.
const cacheLine = 128

// Queue is one queue's counters.
type Queue struct {
	_         [cacheLine]byte
	RxPackets atomic.Uint64
	RxBytes   atomic.Uint64
	RxDropped atomic.Uint64
	RxNoBuf   atomic.Uint64
	RxErrors  atomic.Uint64
	_         [cacheLine - 5*8]byte
	TxPackets atomic.Uint64
	TxBytes   atomic.Uint64
	TxDropped atomic.Uint64
	TxErrors  atomic.Uint64
	_         [cacheLine - 4*8]byte
}

// AddRx counts a received burst of packets holding bytes bytes.
func (q *Queue) AddRx(packets int, bytes uint64) {
	if packets > 0 {
		q.RxPackets.Add(uint64(packets))
		q.RxBytes.Add(bytes)
	}
}

// AddTx counts a transmitted burst of packets holding bytes bytes.
func (q *Queue) AddTx(packets int, bytes uint64) {
	if packets > 0 {
		q.TxPackets.Add(uint64(packets))
		q.TxBytes.Add(bytes)
	}
}

// AddTxDropped counts n packets refused by TxBurst.
func (q *Queue) AddTxDropped(n int) {
	if n > 0 {
		q.TxDropped.Add(uint64(n))
	}
}

// Counters are a port's per-queue counters.
type Counters struct {
	queues []Queue
}

// New returns zeroed counters for n queues.
func New(n int) *Counters {
	return &Counters{queues: make([]Queue, n)}
}

// Queue returns queue i's counters; i must be in range.
func (c *Counters) Queue(i int) *Queue { return &c.queues[i] }

// Len returns the number of queues.
func (c *Counters) Len() int { return len(c.queues) }

// Snapshot sums the counters into a port.Stats. It allocates the Queues
// slice, so it is for control paths only.
func (c *Counters) Snapshot() port.Stats {
	s := port.Stats{Queues: make([]port.QueueStats, len(c.queues))}
	for i := range c.queues {
		q := &c.queues[i]
		qs := port.QueueStats{
			RxPackets: q.RxPackets.Load(),
			RxBytes:   q.RxBytes.Load(),
			TxPackets: q.TxPackets.Load(),
			TxBytes:   q.TxBytes.Load(),
			RxDropped: q.RxDropped.Load(),
			TxDropped: q.TxDropped.Load(),
		}
		s.Queues[i] = qs
		s.RxPackets += qs.RxPackets
		s.RxBytes += qs.RxBytes
		s.TxPackets += qs.TxPackets
		s.TxBytes += qs.TxBytes
		s.RxDropped += qs.RxDropped
		s.TxDropped += qs.TxDropped
		s.RxNoBuf += q.RxNoBuf.Load()
		s.Errors += q.RxErrors.Load() + q.TxErrors.Load()
	}
	return s
}

// Bytes returns the sum of the data lengths of hs.
func Bytes(pool *mbuf.Pool, hs []mbuf.Handle) uint64 {
	var n uint64
	for _, h := range hs {
		n += uint64(pool.Meta(h).DataLen)
	}
	return n
}
