package txn

import (
	"fmt"
)

// LocalSpan returns the n bytes at addr of a registered region, for a
// local operation (sched/mcsq's local copy); the bytes stay the caller's
// memory, aliased, not copied. An unknown (or deregistered) region or a
// span it does not hold is an error matching ErrLocalRegion.
func (e *Endpoint) LocalSpan(r Region, addr uint64, n int) ([]byte, error) {
	if n < 0 || n > MaxMessage {
		return nil, ErrTooLong
	}
	mem, why := e.regions.span(r.Key, addr, uint32(n), 0)
	if why != refuseNone {
		return nil, fmt.Errorf("%w: local region %#x [%d, +%d): %v", ErrLocalRegion, r.Key, addr, n, why)
	}
	return mem, nil
}
