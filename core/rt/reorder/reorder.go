package reorder

import (
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/cam"
)

// Space is an independent sequence space within a connection: requests
// (RSN) and solicitations (SSN) are ordered separately. Up to MaxSpaces
// spaces, numbered 0 to MaxSpaces-1, are accepted; Register refuses others
// with ErrBadSpace and the other calls treat them as never registered.
type Space uint8

const (
	// SpaceRSN orders transactions by request sequence number.
	SpaceRSN Space = 0
	// SpaceSSN orders transactions by solicitation sequence number.
	SpaceSSN Space = 1

	// MaxSpaces is the number of sequence spaces per connection.
	MaxSpaces = 4
)

// Valid reports whether s is one of the MaxSpaces accepted spaces.
func (s Space) Valid() bool { return s < MaxSpaces }

// Key is the CAM key of a transaction. Its three 32-bit fields leave no
// padding, as package cam requires.
type Key struct {
	CID   uint32
	Space uint32
	Seq   uint32
}

// Sentinel errors; test with errors.Is. They are returned bare, so a
// refused Register allocates nothing.
var (
	// ErrFull: Capacity transactions are outstanding. The engine is unchanged.
	ErrFull = errors.New("reorder: engine full (raise Options.Capacity or wait for releases)")
	// ErrDuplicate: the key is already registered. The existing entry's
	// index is returned with it and the engine is unchanged.
	ErrDuplicate = errors.New("reorder: transaction already registered (each (CID, space, seq) once)")
	// ErrBadSpace: the space is not below MaxSpaces.
	ErrBadSpace = errors.New("reorder: sequence space out of range (use 0 to 3)")
)

// Options configures an Engine.
type Options struct {
	// Capacity is the most transactions outstanding at once and the bound
	// of the entry indexes: [0, Capacity). 1 ≤ Capacity ≤ cam.MaxCapacity.
	Capacity int
	// Seed keys the CAM's hash; 0 selects cam.DefaultSeed. The same seed
	// and the same calls give the same indexes.
	Seed uint64
}

// Stats are the engine's counters. All are cumulative.
type Stats struct {
	// Registered counts successful Registers.
	Registered uint64
	// Released counts transactions returned by PopReady.
	Released uint64
	// Taken counts transactions returned by Take.
	Taken uint64
	// Waits counts accepted arrivals that were not at the head of the order
	// (seq != base) and so wait in the CAM.
	Waits uint64
	// Unmatched counts arrivals for a key that is not registered.
	Unmatched uint64
	// Duplicates counts arrivals for a transaction already marked ready.
	Duplicates uint64
	// Full counts Registers refused with ErrFull.
	Full uint64
}

// Entry states, one byte per entry index.
const (
	stateFree    uint8 = iota // index not handed out
	statePending              // registered, waiting for its arrival
	stateReady                // arrived, waiting for the head of the order
)

// Engine is the reorder engine of one lcore. It is not safe for concurrent
// use.
type Engine struct {
	table *cam.Table[Key]
	state []uint8
	stats Stats
	// held counts each space's registered transactions, so that a caller
	// can tell without a CAM lookup that no key of a space can match.
	held [MaxSpaces]int
}

// New builds an engine for opts.Capacity outstanding transactions. All of
// its memory is allocated here.
func New(opts Options) (*Engine, error) {
	if opts.Capacity < 1 {
		return nil, fmt.Errorf("reorder: Capacity %d must be at least 1 (set Options.Capacity to the most outstanding transactions)", opts.Capacity)
	}
	if opts.Capacity > cam.MaxCapacity {
		return nil, fmt.Errorf("reorder: Capacity %d exceeds %d (lower Options.Capacity)", opts.Capacity, cam.MaxCapacity)
	}
	table, err := cam.New[Key](cam.Options{Capacity: opts.Capacity, Seed: opts.Seed, Name: "reorder"})
	if err != nil {
		return nil, fmt.Errorf("reorder: building the CAM: %w", err)
	}
	return &Engine{table: table, state: make([]uint8, opts.Capacity)}, nil
}

// Cap returns Options.Capacity.
func (e *Engine) Cap() int { return e.table.Cap() }

// Len returns the number of transactions registered and not yet released
// or taken.
func (e *Engine) Len() int { return e.table.Len() }

// Stats returns a copy of the counters.
func (e *Engine) Stats() Stats { return e.stats }

// Register records an outstanding transaction, pending (not ready), and
// returns its entry index, which the caller uses to index its contexts
// until PopReady or Take returns it. If the key is already registered it
// returns the existing index and ErrDuplicate; if Capacity transactions are
// outstanding, ErrFull (counted in Stats.Full); if sp is not valid,
// ErrBadSpace. A refused Register changes nothing else.
func (e *Engine) Register(cid uint32, sp Space, seq uint32) (idx uint32, err error) {
	if !sp.Valid() {
		return 0, ErrBadSpace
	}
	idx, err = e.table.Insert(Key{CID: cid, Space: uint32(sp), Seq: seq})
	if err != nil {
		if err == cam.ErrExists {
			return idx, ErrDuplicate
		}
		// cam refuses only with ErrExists or ErrFull.
		e.stats.Full++
		return 0, ErrFull
	}
	e.state[idx] = statePending
	e.stats.Registered++
	e.held[sp]++
	return idx, nil
}

// Held returns how many transactions of space sp are registered: while it
// is 0 no key of sp can match, and a caller may skip its Lookup.
func (e *Engine) Held(sp Space) int {
	if !sp.Valid() {
		return 0
	}
	return e.held[sp]
}

// Lookup returns the entry index of a registered transaction, ready or not,
// without changing anything.
func (e *Engine) Lookup(cid uint32, sp Space, seq uint32) (idx uint32, ok bool) {
	if !sp.Valid() {
		return 0, false
	}
	return e.table.Lookup(Key{CID: cid, Space: uint32(sp), Seq: seq})
}

// MarkReady records the arrival for a registered transaction, which PopReady
// may then release once every transaction before it in its space has been
// released. base is the caller's current base for (cid, sp); an arrival with
// seq != base is counted in Stats.Waits.
//
// It returns ok=false and changes nothing but a counter if the key is not
// registered (Stats.Unmatched; idx is 0) or the transaction is already ready
// (Stats.Duplicates; idx is its index, so the caller may inspect it).
func (e *Engine) MarkReady(base uint32, cid uint32, sp Space, seq uint32) (idx uint32, ok bool) {
	idx, ok = e.Lookup(cid, sp, seq)
	if !ok {
		e.stats.Unmatched++
		return 0, false
	}
	if e.state[idx] == stateReady {
		e.stats.Duplicates++
		return idx, false
	}
	e.state[idx] = stateReady
	if seq != base {
		e.stats.Waits++
	}
	return idx, true
}

// PopReady releases the transaction at the head of the order of (cid, sp):
// if (cid, sp, *base) is registered and ready, it deletes it, increments
// *base (mod 2^32) and returns its index, which the caller must finish with
// before its next Register. Otherwise it returns ok=false and changes
// nothing. Call it until ok=false to release every follower already ready.
func (e *Engine) PopReady(cid uint32, sp Space, base *uint32) (idx uint32, ok bool) {
	idx, ok = e.Lookup(cid, sp, *base)
	if !ok || e.state[idx] != stateReady {
		return 0, false
	}
	e.table.DeleteIndex(idx)
	e.state[idx] = stateFree
	e.held[sp]--
	*base++
	e.stats.Released++
	return idx, true
}

// PopReadyBurst calls PopReady until it returns ok=false or idxs is full,
// stores the released indexes in idxs in sequence order and returns how
// many it stored. A return of len(idxs) means more may be ready.
func (e *Engine) PopReadyBurst(cid uint32, sp Space, base *uint32, idxs []uint32) int {
	for n := range idxs {
		idx, ok := e.PopReady(cid, sp, base)
		if !ok {
			return n
		}
		idxs[n] = idx
	}
	return len(idxs)
}

// Take removes a registered transaction, ready or not, regardless of the
// order (unordered connections, aborts), and returns its index, which the
// caller must finish with before its next Register. A base that pointed at
// it is not moved: the caller decides how its space continues.
func (e *Engine) Take(cid uint32, sp Space, seq uint32) (idx uint32, ok bool) {
	if !sp.Valid() {
		return 0, false
	}
	idx, ok = e.table.Delete(Key{CID: cid, Space: uint32(sp), Seq: seq})
	if !ok {
		return 0, false
	}
	e.state[idx] = stateFree
	e.held[sp]--
	e.stats.Taken++
	return idx, true
}

// Ready reports whether entry idx is registered and marked ready. It is
// false for a free or out-of-range index.
func (e *Engine) Ready(idx uint32) bool {
	return idx < uint32(len(e.state)) && e.state[idx] == stateReady
}

// KeyAt returns the transaction that entry idx holds, for callers that kept
// the index but not the key (a retransmission context, a timer).
func (e *Engine) KeyAt(idx uint32) (k Key, ok bool) { return e.table.KeyAt(idx) }

// Clear removes every transaction without counting it; indexes are handed
// out again from 0. O(Capacity): for resets, not for the packet path.
func (e *Engine) Clear() {
	e.table.Clear()
	clear(e.state)
	clear(e.held[:])
}
