package mcsq

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/rings"
)

// QueueOptions configure Engine.NewQueue. At least one of RC and DC is
// required.
type QueueOptions struct {
	// Name labels the queue in errors and stats.
	Name string
	// Depth is how many WRs the queue holds from Post to the host's poll
	// of their CQE (default 4096; rounded up to a power of two). The post
	// ring, the WR table, the reorder buffer and the CQ all hold Depth, so
	// a CQE always has room.
	Depth int
	// RC serves QPN identifiers, DC flow IDs and 5-tuples. Several queues
	// may share a pool.
	RC, DC *Pool
	// Ordered releases CQEs in posting order through a reorder buffer,
	// coalescing consecutive successes (CQE.Count). Otherwise a CQE is
	// posted as each WR completes.
	Ordered bool
	// MaxCoalesce bounds the WRs one ordered CQE covers (default 32).
	MaxCoalesce int
	// Burst is the most WRs the distributor takes from the queue per poll
	// (default 64).
	Burst int
	// Lookahead is how many WRs behind a waiting head the distributor
	// looks at, and the most that may overtake one waiting head (default
	// 256, or Depth when that is smaller). While the head waits for an SQ, a WR behind it whose
	// identifier no earlier waiting WR has is placed if it can be (its
	// identifier bound to an SQ with room, or a free SQ left); a WR never
	// overtakes an earlier one of its own identifier, nor a local
	// operation. Set StrictHOL for none: the plain wait.
	Lookahead int
	// StrictHOL turns the lookahead off: everything behind a waiting head
	// waits with it.
	StrictHOL bool
}

// slot is one entry of a queue's WR table. Between Post and the CQE poll
// it belongs to, in turn: the posting goroutine (until it enqueues the
// index), the poll loop (distribution to completion), the CQ reader.
type slot struct {
	wr   WR
	gen  uint32
	seq  uint64
	pool *Pool
	sq   int32 // SQ index in pool, -1 none
	done bool
	cqe  CQE
}

// Queue is a multi-channel send queue (MCSQ): any goroutine posts WRs for
// any number of targets; the engine's poll loop distributes them over the
// SQs of the queue's pools and reports their completions on the queue's
// CQ, which any goroutine polls (Completions).
type Queue struct {
	e     *Engine
	idx   int
	opts  QueueOptions
	mask  uint32
	slots []slot
	free  *rings.MPMC[uint32] // WR slots available to Post
	sub   *rings.MPSC[uint32] // posted WRs, in posting order, to the poll loop
	cq    *rings.MPMC[uint32] // WR slots whose CQE is ready, to the host
	space chan struct{}       // signalled when slots are freed (PostWait)

	closed atomic.Bool
	busy   atomic.Uint64

	// Poll-loop state.
	stage       []uint32 // taken from sub, not yet distributed (head first)
	sh, sn      int
	order       []uint32 // reorder buffer: slots in posting order (Ordered)
	oh, on      int
	nextSeq     uint64
	outstanding int // distributed remote WRs not yet completed (local-op fence)
	holSince    int64
	holding     bool
	overtook    int    // WRs placed past the current waiting head
	scanEpoch   uint64 // engine epoch of the last lookahead scan
	rescan      bool   // the head moved since: scan again
	held        keySet // identifiers of WRs waiting (lookahead)
	cnt         counters
}

// NewQueue makes an MCSQ on the engine's poll loop. Call it before Start
// (or from the poll loop).
func (e *Engine) NewQueue(o QueueOptions) (*Queue, error) {
	if o.RC == nil && o.DC == nil {
		return nil, fmt.Errorf("%w: QueueOptions needs an RC or a DC pool (set RC, DC or both)", ErrInvalidOptions)
	}
	if o.RC != nil && (o.RC.kind != RC || o.RC.e != e) {
		return nil, fmt.Errorf("%w: QueueOptions.RC must be an RC pool of this engine", ErrInvalidOptions)
	}
	if o.DC != nil && (o.DC.kind != DC || o.DC.e != e) {
		return nil, fmt.Errorf("%w: QueueOptions.DC must be a DC pool of this engine", ErrInvalidOptions)
	}
	if len(e.queues) >= maxQueues {
		return nil, fmt.Errorf("%w: at most %d queues per engine", ErrInvalidOptions, maxQueues)
	}
	if o.Depth == 0 {
		o.Depth = 4096
	}
	if o.Depth < 2 || o.Depth > maxSlots {
		return nil, fmt.Errorf("%w: QueueOptions.Depth %d out of range (use 2 to %d)", ErrInvalidOptions, o.Depth, maxSlots)
	}
	o.Depth = 1 << bits.Len(uint(o.Depth-1))
	if o.MaxCoalesce == 0 {
		o.MaxCoalesce = 32
	}
	if o.MaxCoalesce < 1 {
		return nil, fmt.Errorf("%w: QueueOptions.MaxCoalesce %d must be at least 1", ErrInvalidOptions, o.MaxCoalesce)
	}
	if o.Burst == 0 {
		o.Burst = 64
	}
	if o.Burst < 1 {
		return nil, fmt.Errorf("%w: QueueOptions.Burst %d must be at least 1", ErrInvalidOptions, o.Burst)
	}
	if o.Lookahead == 0 {
		// The default never exceeds a shallow queue's depth: a queue of
		// 64 WRs looks at most 64 behind its head.
		o.Lookahead = min(256, o.Depth)
	}
	if o.Lookahead < 0 || o.Lookahead > o.Depth {
		return nil, fmt.Errorf("%w: QueueOptions.Lookahead %d out of range (1 to Depth %d; StrictHOL turns it off)", ErrInvalidOptions, o.Lookahead, o.Depth)
	}
	if o.StrictHOL {
		o.Lookahead = 0
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("mcsq%d", len(e.queues))
	}
	q := &Queue{e: e, idx: len(e.queues), opts: o, mask: uint32(o.Depth - 1),
		slots: make([]slot, o.Depth), stage: make([]uint32, max(o.Burst, o.Lookahead+1)), space: make(chan struct{}, 1)}
	if o.Lookahead > 0 {
		q.held = newKeySet(o.Lookahead + 1)
	}
	var err error
	if q.free, err = rings.NewMPMC[uint32](o.Depth); err != nil {
		return nil, err
	}
	if q.sub, err = rings.NewMPSC[uint32](o.Depth); err != nil {
		return nil, err
	}
	if q.cq, err = rings.NewMPMC[uint32](o.Depth); err != nil {
		return nil, err
	}
	for i := range o.Depth {
		q.slots[i].sq = -1
		one := [1]uint32{uint32(i)}
		q.free.EnqueueBulk(one[:])
	}
	if o.Ordered {
		q.order = make([]uint32, o.Depth)
	}
	e.queues = append(e.queues, q)
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.opts.Name }

// Ordered reports whether CQEs come in posting order.
func (q *Queue) Ordered() bool { return q.opts.Ordered }

// check validates a WR against the queue without touching shared state.
func (q *Queue) check(wr *WR) error {
	switch {
	case wr.Op.remote():
		switch wr.ID.Kind {
		case KindQPN:
			if q.opts.RC == nil {
				return fmt.Errorf("%w: %v on queue %s, which has no RC pool (post QPNs to a queue with QueueOptions.RC)", ErrWrongKind, wr.ID, q.opts.Name)
			}
			if wr.ID.N > 1<<24-1 {
				return fmt.Errorf("%w: QPN %#x is wider than 24 bits", ErrBadWR, wr.ID.N)
			}
		case KindFlow, KindTuple:
			if q.opts.DC == nil {
				return fmt.Errorf("%w: %v on queue %s, which has no DC pool (post flow IDs and 5-tuples to a queue with QueueOptions.DC)", ErrWrongKind, wr.ID, q.opts.Name)
			}
			if int(wr.Target) >= int(q.e.nTargets.Load()) {
				return fmt.Errorf("%w: target %d", ErrUnknownTarget, wr.Target)
			}
		default:
			return fmt.Errorf("%w: WR.ID has no kind (build it with QPN, Flow or Tuple)", ErrBadWR)
		}
		if wr.Len < 0 || wr.Len > maxLen {
			return fmt.Errorf("%w: WR.Len %d out of range (0 to %d)", ErrBadWR, wr.Len, maxLen)
		}
	case wr.Op == OpRegister:
		if len(wr.Mem) == 0 {
			return fmt.Errorf("%w: OpRegister needs WR.Mem", ErrBadWR)
		}
	case wr.Op == OpCopy:
		if wr.Len < 0 || wr.Len > maxLen {
			return fmt.Errorf("%w: WR.Len %d out of range (0 to %d)", ErrBadWR, wr.Len, maxLen)
		}
	case wr.Op == OpDeregister:
	default:
		return fmt.Errorf("%w: WR.Op %d is not an operation (OpPush, OpPull, OpSend, OpRegister, OpDeregister, OpCopy)", ErrBadWR, wr.Op)
	}
	return nil
}

// Post hands wr to the queue from any goroutine: it copies the WR into a
// free slot of the WR table and enqueues the slot's index on the
// lock-free post ring the poll loop drains. It never blocks: a full table
// is ErrBusy. A malformed WR, an identifier of a kind the queue has no pool
// for, or a post after Close is refused with an error saying which, and
// nothing is queued. Post does not allocate.
func (q *Queue) Post(wr *WR) error {
	if q.closed.Load() {
		return ErrClosed
	}
	if err := q.check(wr); err != nil {
		return err
	}
	var one [1]uint32
	if q.free.DequeueBurst(one[:]) == 0 {
		q.busy.Add(1)
		return ErrBusy
	}
	s := &q.slots[one[0]]
	s.wr = *wr
	if s.gen++; s.gen == 0 {
		s.gen = 1 // a WR's Tag has a generation: 0 is Options.Foreign's
	}
	// sub has a place for every slot, so this cannot fail.
	q.sub.EnqueueBulk(one[:])
	return nil
}

// PostWait is Post that waits for room while ctx allows.
func (q *Queue) PostWait(ctx context.Context, wr *WR) error {
	for {
		err := q.Post(wr)
		if err != ErrBusy {
			if err == nil && q.free.Len() > 0 {
				q.signal() // pass the wake-up on to another waiter
			}
			return err
		}
		select {
		case <-q.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (q *Queue) signal() {
	select {
	case q.space <- struct{}{}:
	default:
	}
}

// Completions moves up to len(out) CQEs into out and returns how many. Any
// goroutine may call it, several at once. A WR's buffers are the host's
// again once its CQE (or one covering it) is polled.
func (q *Queue) Completions(out []CQE) int {
	var idx [32]uint32
	n := 0
	for n < len(out) {
		k := q.cq.DequeueBurst(idx[:min(len(idx), len(out)-n)])
		if k == 0 {
			break
		}
		for _, i := range idx[:k] {
			s := &q.slots[i]
			out[n] = s.cqe
			n++
			s.cqe = CQE{}
			s.wr = WR{}
		}
		q.free.EnqueueBulk(idx[:k])
	}
	if n > 0 {
		q.signal()
	}
	return n
}

// Close stops the queue taking WRs: Post fails with ErrClosed from now on.
// WRs already posted are still distributed and completed.
func (q *Queue) Close() error {
	q.closed.Store(true)
	return nil
}

// Stats returns the queue's counters (any goroutine).
func (q *Queue) Stats() Stats {
	s := q.cnt.snapshot()
	s.Busy = q.busy.Load()
	return s
}
