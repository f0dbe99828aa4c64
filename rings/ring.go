package rings

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
)

// ErrCapacity is wrapped by every constructor error caused by a bad capacity.
var ErrCapacity = errors.New("rings: invalid capacity")

// MaxCapacity is the largest capacity a ring accepts. Indexes are free-running
// uint32 counters, so the distance between a head and a tail must fit in 32
// bits with room to tell "full" from "empty".
const MaxCapacity = 1 << 31

// cacheLinePad separates the producer's and the consumer's hot words. 128
// rather than 64 because the adjacent-line prefetcher pulls cache lines in
// pairs, which would otherwise make neighbouring lines false-share.
const cacheLinePad = 128

// spinsBeforeYield bounds how long a producer (consumer) spins waiting for
// an earlier reservation to be published before it yields the processor. With
// more goroutines than cores the earlier reserver may have been preempted
// between its CAS and its tail store; spinning on then only burns the slice
// that reserver needs to finish.
const spinsBeforeYield = 64

type capacityError struct{ msg string }

func (e *capacityError) Error() string { return e.msg }
func (e *capacityError) Unwrap() error { return ErrCapacity }

func checkCapacity(capacity int) error {
	switch {
	case capacity < 2:
		return &capacityError{fmt.Sprintf("rings: capacity %d is too small: it must be >= 2 and a power of two (use 2 or more)", capacity)}
	case capacity > MaxCapacity:
		return &capacityError{fmt.Sprintf("rings: capacity %d is too large: it must be <= %d (use %d or less)", capacity, MaxCapacity, MaxCapacity)}
	case capacity&(capacity-1) != 0:
		next := 1 << bits.Len(uint(capacity))
		return &capacityError{fmt.Sprintf("rings: capacity %d is not a power of two (use %d)", capacity, next)}
	}
	return nil
}

// headTail is one side (producer or consumer) of a ring. head is where the
// next reservation starts; tail is how far the side has published. Slots in
// [tail, head) are being copied by callers that reserved them.
type headTail struct {
	head atomic.Uint32
	tail atomic.Uint32
}

// storage is the read-only part of a ring, shared by both sides.
type storage[T any] struct {
	slots    []T
	mask     uint32
	capacity uint32
}

func newStorage[T any](capacity int) (storage[T], error) {
	if err := checkCapacity(capacity); err != nil {
		return storage[T]{}, err
	}
	return storage[T]{
		slots:    make([]T, capacity),
		mask:     uint32(capacity - 1),
		capacity: uint32(capacity),
	}, nil
}

// copyIn writes src into the slots starting at free-running index at,
// wrapping at most once.
func (s *storage[T]) copyIn(at uint32, src []T) {
	idx := at & s.mask
	n := copy(s.slots[idx:], src)
	if n < len(src) {
		copy(s.slots, src[n:])
	}
}

// copyOut reads len(dst) slots starting at free-running index at.
func (s *storage[T]) copyOut(at uint32, dst []T) {
	idx := at & s.mask
	n := copy(dst, s.slots[idx:])
	if n < len(dst) {
		copy(dst[n:], s.slots)
	}
}

// clampRequest turns a caller's slice length into the number of elements to
// move: bulk requests larger than the ring can never succeed, burst requests
// are cut to the capacity (the ring cannot move more than that at once).
func (s *storage[T]) clampRequest(n int, bulk bool) uint32 {
	if n > int(s.capacity) {
		if bulk {
			return 0
		}
		return s.capacity
	}
	return uint32(n)
}

// count is the number of elements between a consumer tail and a producer
// tail. The two loads are not one snapshot, so the difference may briefly
// exceed the capacity; clamp it.
func (s *storage[T]) count(consTail, prodTail uint32) int {
	n := prodTail - consTail
	if n > s.capacity {
		return int(s.capacity)
	}
	return int(n)
}

// waitTurn spins until side.tail reaches oldHead, i.e. every caller that
// reserved before us has published, so tails advance in reservation order.
func waitTurn(side *headTail, oldHead uint32) {
	for spins := 0; side.tail.Load() != oldHead; spins++ {
		if spins < spinsBeforeYield {
			cpuRelax()
			continue
		}
		runtime.Gosched()
		spins = 0
	}
}

// mpReserve reserves up to want slots on the producer side for one of many
// producers. It returns the old head and the number reserved (0: nothing).
func mpReserve(prod *headTail, consTail *atomic.Uint32, capacity, want uint32, bulk bool) (uint32, uint32) {
	for {
		oldHead := prod.head.Load()
		free := capacity + consTail.Load() - oldHead
		n := want
		if n > free {
			if bulk {
				return 0, 0
			}
			n = free
			if n == 0 {
				return 0, 0
			}
		}
		if prod.head.CompareAndSwap(oldHead, oldHead+n) {
			return oldHead, n
		}
	}
}

// mcReserve reserves up to want filled slots for one of many consumers.
func mcReserve(cons *headTail, prodTail *atomic.Uint32, want uint32, bulk bool) (uint32, uint32) {
	for {
		oldHead := cons.head.Load()
		avail := prodTail.Load() - oldHead
		n := want
		if n > avail {
			if bulk {
				return 0, 0
			}
			n = avail
			if n == 0 {
				return 0, 0
			}
		}
		if cons.head.CompareAndSwap(oldHead, oldHead+n) {
			return oldHead, n
		}
	}
}
