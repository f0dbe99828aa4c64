package txn

import (
	"errors"
	"fmt"
)

// Access says what a registered region allows peers to do with it.
type Access uint8

const (
	// RemoteWrite lets peers push into the region.
	RemoteWrite Access = 1 << iota
	// RemoteRead lets peers pull from it.
	RemoteRead
)

// Region is a registered memory region: the key peers name it by and its
// length. Local operations name it too (the source of a push, the
// destination of a pull).
type Region struct {
	Key uint32
	Len int
}

type region struct {
	mem    []byte
	access Access
	gen    uint16
	live   bool
}

// Errors of Register and Deregister.
var (
	ErrRegionsFull   = errors.New("txn: every region slot is in use (raise Options.MaxRegions or deregister one)")
	ErrUnknownRegion = errors.New("txn: no such registered region")
)

// regions is the table of registered memory. A key is the slot index plus
// one in the low 16 bits and a generation in the high 16, so a key that
// was deregistered stops matching even when its slot is reused.
type regions struct {
	slots []region
	free  []uint16
}

func newRegions(n int) regions {
	r := regions{slots: make([]region, n), free: make([]uint16, 0, n)}
	for i := n - 1; i >= 0; i-- {
		r.free = append(r.free, uint16(i))
	}
	return r
}

func (r *regions) register(mem []byte, access Access) (Region, error) {
	if len(r.free) == 0 {
		return Region{}, ErrRegionsFull
	}
	if len(mem) == 0 {
		return Region{}, errors.New("txn: cannot register an empty region")
	}
	if access&^(RemoteWrite|RemoteRead) != 0 {
		return Region{}, fmt.Errorf("txn: access %#x has undefined bits (use RemoteWrite|RemoteRead)", uint8(access))
	}
	i := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	s := &r.slots[i]
	s.gen++
	if s.gen == 0 {
		s.gen = 1
	}
	s.mem, s.access, s.live = mem, access, true
	return Region{Key: uint32(s.gen)<<16 | uint32(i+1), Len: len(mem)}, nil
}

func (r *regions) get(key uint32) *region {
	i := int(key&0xffff) - 1
	if i < 0 || i >= len(r.slots) {
		return nil
	}
	s := &r.slots[i]
	if !s.live || uint32(s.gen) != key>>16 {
		return nil
	}
	return s
}

func (r *regions) deregister(key uint32) error {
	s := r.get(key)
	if s == nil {
		return fmt.Errorf("%w: key %#x", ErrUnknownRegion, key)
	}
	s.mem, s.live = nil, false
	r.free = append(r.free, uint16(key&0xffff-1))
	return nil
}

// span returns mem[addr:addr+n] of region key if the region exists, allows
// access and holds the whole span, else a reason.
func (r *regions) span(key uint32, addr uint64, n uint32, access Access) ([]byte, Refusal) {
	s := r.get(key)
	if s == nil {
		return nil, RefusalUnregistered
	}
	if s.access&access != access {
		return nil, RefusalAccess
	}
	if addr > uint64(len(s.mem)) || uint64(n) > uint64(len(s.mem))-addr {
		return nil, RefusalTooSmall
	}
	return s.mem[addr : addr+uint64(n) : addr+uint64(n)], refuseNone
}

// refuseNone is span's answer for a span it grants.
const refuseNone = RefusalUnspecified
