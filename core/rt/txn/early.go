package txn

import (
	"fmt"

	"github.com/peregrine-net/peregrine/core/rt"
)

// OpenEarly is Open over rt.Endpoint.OpenEarly: operations posted at once
// are sent at once, right behind the ConnOpen, without waiting for the
// target's ConnAccept (a round trip). sched/mcsq's DC SQs connect this
// way. See "Early data" in core/rt/dcconnect.go for how a lost or refused
// connect is recovered.
func (e *Endpoint) OpenEarly(peer rt.PeerAddr, opts ConnOptions) (*Conn, error) {
	if len(e.freeCon) == 0 {
		return nil, rt.ErrTableFull
	}
	if opts.OpTimeout < 0 {
		return nil, fmt.Errorf("txn: ConnOptions.OpTimeout %v must not be negative", opts.OpTimeout)
	}
	rc, err := e.rt.OpenEarly(peer)
	if err != nil {
		return nil, err
	}
	c := e.attach(rc)
	if c == nil {
		rc.Abort()
		return nil, rt.ErrTableFull
	}
	c.ordered = opts.Ordered
	c.opTimeout = opts.OpTimeout
	if opts.Weight > 1 {
		_ = e.sch.SetWeight(int(c.handle.idx), opts.Weight)
	}
	return c.handle, nil
}

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
