package rings

import (
	"sync/atomic"

	"github.com/peregrine-net/peregrine/internal/release"
)

// SPSC is a bounded ring for exactly one producer goroutine and one
// consumer goroutine (Len, Free and Cap may be called from anywhere). The
// zero value is not usable; call NewSPSC.
type SPSC[T any] struct {
	_ [cacheLinePad]byte
	storage[T]
	_    [cacheLinePad]byte
	prod singleSide
	_    [singleSidePad]byte
	cons singleSide
	_    [singleSidePad]byte
}

// NewSPSC returns an empty ring holding up to capacity elements; capacity
// must be a power of two in [2, MaxCapacity].
func NewSPSC[T any](capacity int) (*SPSC[T], error) {
	s, err := newStorage[T](capacity)
	if err != nil {
		return nil, err
	}
	return &SPSC[T]{storage: s}, nil
}

// EnqueueBulk copies all of src into the ring and returns len(src), or
// copies nothing and returns 0 when there is not room for all of it.
func (r *SPSC[T]) EnqueueBulk(src []T) int {
	return spEnqueue(&r.storage, &r.prod, &r.cons, src, true)
}

// EnqueueBurst copies as much of src as fits and returns how many it copied.
func (r *SPSC[T]) EnqueueBurst(src []T) int {
	return spEnqueue(&r.storage, &r.prod, &r.cons, src, false)
}

// DequeueBulk fills all of dst and returns len(dst), or takes nothing and
// returns 0 when fewer than len(dst) elements are held.
func (r *SPSC[T]) DequeueBulk(dst []T) int {
	return scDequeue(&r.storage, &r.cons, &r.prod.tail, dst, true)
}

// DequeueBurst fills dst with as many elements as are held, up to len(dst),
// and returns how many.
func (r *SPSC[T]) DequeueBurst(dst []T) int {
	return scDequeue(&r.storage, &r.cons, &r.prod.tail, dst, false)
}

// Len returns how many elements the ring holds; under concurrent use it is
// a snapshot that may be stale by the time it returns.
func (r *SPSC[T]) Len() int {
	consTail := r.cons.tail.Load()
	return r.count(consTail, r.prod.tail.Load())
}

// Free returns Cap() - Len().
func (r *SPSC[T]) Free() int { return r.Cap() - r.Len() }

// Cap returns the capacity the ring was made with.
func (r *SPSC[T]) Cap() int { return int(r.capacity) }

// spEnqueue is the single-producer enqueue: no reservation, one store of
// the tail to publish.
func spEnqueue[T any](s *storage[T], prod, cons *singleSide, src []T, bulk bool) int {
	want := s.clampRequest(len(src), bulk)
	if want == 0 {
		return 0
	}
	tail := prod.tail.Load()
	if free := s.capacity + prod.cachedOther - tail; want > free {
		prod.cachedOther = cons.tail.Load()
		free = s.capacity + prod.cachedOther - tail
		if want > free {
			if bulk || free == 0 {
				return 0
			}
			want = free
		}
	}
	s.copyIn(tail, src[:want])
	release.Store64(&prod.tail, tail+want)
	return int(want)
}

// scDequeue is the single-consumer dequeue; prodTail is the producer side's
// published tail (a singleSide's in SPSC, a headTail's in MPSC).
func scDequeue[T any](s *storage[T], cons *singleSide, prodTail *atomic.Uint64, dst []T, bulk bool) int {
	want := s.clampRequest(len(dst), bulk)
	if want == 0 {
		return 0
	}
	head := cons.tail.Load()
	if avail := cons.cachedOther - head; want > avail {
		cons.cachedOther = prodTail.Load()
		avail = cons.cachedOther - head
		if want > avail {
			if bulk || avail == 0 {
				return 0
			}
			want = avail
		}
	}
	s.copyOut(head, dst[:want])
	release.Store64(&cons.tail, head+want)
	return int(want)
}
