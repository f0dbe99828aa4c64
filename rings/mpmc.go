package rings

import "github.com/peregrine-net/peregrine/internal/release"

// MPMC is a bounded ring any number of goroutines may enqueue to and dequeue
// from concurrently. The zero value is not usable; call NewMPMC.
type MPMC[T any] struct {
	_ [cacheLinePad]byte
	storage[T]
	_    [cacheLinePad]byte
	prod headTail
	_    [headTailPad]byte
	cons headTail
	_    [headTailPad]byte
}

// NewMPMC returns an empty ring holding up to capacity elements; capacity
// must be a power of two in [2, MaxCapacity].
func NewMPMC[T any](capacity int) (*MPMC[T], error) {
	s, err := newStorage[T](capacity)
	if err != nil {
		return nil, err
	}
	return &MPMC[T]{storage: s}, nil
}

// EnqueueBulk copies all of src into the ring and returns len(src), or
// copies nothing and returns 0 when there is not room for all of it.
func (r *MPMC[T]) EnqueueBulk(src []T) int { return r.enqueue(src, true) }

// EnqueueBurst copies as much of src as fits and returns how many it copied.
func (r *MPMC[T]) EnqueueBurst(src []T) int { return r.enqueue(src, false) }

// DequeueBulk fills all of dst and returns len(dst), or takes nothing and
// returns 0 when fewer than len(dst) elements are held.
func (r *MPMC[T]) DequeueBulk(dst []T) int { return r.dequeue(dst, true) }

// DequeueBurst fills dst with as many elements as are held, up to len(dst),
// and returns how many.
func (r *MPMC[T]) DequeueBurst(dst []T) int { return r.dequeue(dst, false) }

func (r *MPMC[T]) enqueue(src []T, bulk bool) int {
	return mpEnqueue(&r.storage, &r.prod, &r.cons.tail, src, bulk)
}

func (r *MPMC[T]) dequeue(dst []T, bulk bool) int {
	want := r.clampRequest(len(dst), bulk)
	if want == 0 {
		return 0
	}
	oldHead, n := mcReserve(&r.cons, &r.prod.tail, r.capacity, want, bulk)
	if n == 0 {
		return 0
	}
	r.copyOut(oldHead, dst[:n])
	waitTurn(&r.cons, oldHead)
	release.Store64(&r.cons.tail, oldHead+n)
	return int(n)
}

// Len returns how many elements the ring holds; under concurrent use it is
// a snapshot that may be stale by the time it returns.
func (r *MPMC[T]) Len() int {
	consTail := r.cons.tail.Load()
	return r.count(consTail, r.prod.tail.Load())
}

// Free returns Cap() - Len().
func (r *MPMC[T]) Free() int { return r.Cap() - r.Len() }

// Cap returns the capacity the ring was made with.
func (r *MPMC[T]) Cap() int { return int(r.capacity) }
