package rings

// MPSC is a bounded ring any number of goroutines may enqueue to
// concurrently and exactly one goroutine dequeues from (Len, Free and Cap
// may be called from anywhere). The zero value is not usable; call NewMPSC.
type MPSC[T any] struct {
	_ [cacheLinePad]byte
	storage[T]
	_    [cacheLinePad]byte
	prod headTail
	_    [headTailPad]byte
	cons singleSide
	_    [singleSidePad]byte
}

// NewMPSC returns an empty ring holding up to capacity elements; capacity
// must be a power of two in [2, MaxCapacity].
func NewMPSC[T any](capacity int) (*MPSC[T], error) {
	s, err := newStorage[T](capacity)
	if err != nil {
		return nil, err
	}
	return &MPSC[T]{storage: s}, nil
}

// EnqueueBulk copies all of src into the ring and returns len(src), or
// copies nothing and returns 0 when there is not room for all of it.
func (r *MPSC[T]) EnqueueBulk(src []T) int { return r.enqueue(src, true) }

// EnqueueBurst copies as much of src as fits and returns how many it copied.
func (r *MPSC[T]) EnqueueBurst(src []T) int { return r.enqueue(src, false) }

// DequeueBulk fills all of dst and returns len(dst), or takes nothing and
// returns 0 when fewer than len(dst) elements are held.
func (r *MPSC[T]) DequeueBulk(dst []T) int {
	return scDequeue(&r.storage, &r.cons, &r.prod.tail, dst, true)
}

// DequeueBurst fills dst with as many elements as are held, up to len(dst),
// and returns how many.
func (r *MPSC[T]) DequeueBurst(dst []T) int {
	return scDequeue(&r.storage, &r.cons, &r.prod.tail, dst, false)
}

func (r *MPSC[T]) enqueue(src []T, bulk bool) int {
	return mpEnqueue(&r.storage, &r.prod, &r.cons.tail, src, bulk)
}

// Len returns how many elements the ring holds; under concurrent use it is
// a snapshot that may be stale by the time it returns.
func (r *MPSC[T]) Len() int {
	consTail := r.cons.tail.Load()
	return r.count(consTail, r.prod.tail.Load())
}

// Free returns Cap() - Len().
func (r *MPSC[T]) Free() int { return r.Cap() - r.Len() }

// Cap returns the capacity the ring was made with.
func (r *MPSC[T]) Cap() int { return int(r.capacity) }
