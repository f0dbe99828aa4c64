package qpx

import (
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/wire"
)

// The global QP number space.
const (
	// MaxQPN is the largest 24-bit QP number.
	MaxQPN = 1<<24 - 1
	// FirstQPN is the first number Open hands out: QP 0 (SMI) and QP 1
	// (GSI) are InfiniBand's management QPs.
	FirstQPN = 2
	// LastQPN is the last: 0xFFFFFF is the multicast QPN.
	LastQPN = MaxQPN - 1
	// Space is how many numbers Open rotates through before reusing one.
	Space = LastQPN - FirstQPN + 1
	// DefaultSlots is the default number of local contexts (a 6-bit local
	// QP number).
	DefaultSlots = 64
	// MaxSlots bounds Options.Slots.
	MaxSlots = 1 << 20
)

// Errors. Each is wrapped with the table's name and what to do.
var (
	// ErrFull: every local context is live. Close a QP, or raise
	// Options.Slots; a live QP is never evicted.
	ErrFull = errors.New("qpx: every local QP context is in use")
	// ErrUnknown: the QPN names no live QP.
	ErrUnknown = errors.New("qpx: no live QP has this number")
	// ErrLive: Bind was given a number a live QP holds.
	ErrLive = errors.New("qpx: the QP number is live")
	// ErrRange: a number outside FirstQPN..LastQPN.
	ErrRange = errors.New("qpx: QP number out of range")
)

// Access is what a QP lets its peer do (the RX check of each request).
type Access uint8

// Access bits, as ibv_access_flags.
const (
	AccessRemoteWrite Access = 1 << iota
	AccessRemoteRead
	AccessRemoteAtomic
	// AccessAll grants everything.
	AccessAll = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
)

// Context is one local QP context: what the packet builder needs to
// generate a header and what the disassembler needs to check one. The
// table owns the array; Context(local) returns a pointer into it.
type Context struct {
	// TX header generation.
	DestQPN uint32     // the peer's global QPN, written into each BTH sent
	NextPSN uint32     // the next PSN to send (24 bits)
	PKey    uint16     // the partition key written into each BTH sent
	Addrs   wire.Addrs // the peer's and our addresses; zero when not used
	// RX header checking.
	ExpectedPSN uint32 // the next PSN the peer should send (24 bits)
	Access      Access
	// Ref is the owner's reference to the QP's payload memory (an mbuf
	// handle, a region key, a connection slot): the context stays small
	// and the payload in bulk memory. Never dereferenced
	// here.
	Ref uint64
}

// Options configure New.
type Options struct {
	// Slots is the number of local QP contexts N (default 64, at most
	// MaxSlots). Local numbers are 0..N-1.
	Slots int
	// Seed keys the CAM's hash (0: cam.DefaultSeed). A table whose
	// lookups face forged packets should get a secret seed.
	Seed uint64
	// Start is the first number Open hands out (0: FirstQPN). Tests set it
	// near LastQPN to run through the wrap.
	Start uint32
	// Name labels the table in errors ("qpx" by default).
	Name string
}

// Stats are the table's counters.
type Stats struct {
	Live  int // QPs open now
	Slots int
	// Opened counts Open and Bind; Closed counts Close (each retires a
	// number); RefusedFull counts opens refused with ErrFull.
	Opened, Closed, RefusedFull uint64
	// Translated counts lookups that found a live QP; DropRetired those
	// whose number was handed out before and is retired now (a stale
	// packet); DropUnknown those whose number was never handed out or is
	// reserved.
	Translated, DropRetired, DropUnknown uint64
	// Rotations counts passes of the counter through the whole space;
	// SkippedLive counts numbers it stepped over because a QP still held
	// them.
	Rotations, SkippedLive uint64
	// Next is the number the next Open tries first.
	Next uint32
}

// Table is the CAM and its contexts. One goroutine (one lcore) owns it.
type Table struct {
	name string
	cam  *cam.Table[uint32]
	ctx  []Context
	qpn  []uint32 // local -> its global number, 0 when free
	// hint is a direct-mapped cache in front of the CAM (a one-way CAM,
	// as a TLB fronts a page table): hint[qpn & mask] holds qpn<<32 |
	// local+1 of the QP last opened there, 0 when none. A translation
	// that finds its number there needs no hash and one load; any other
	// goes to the CAM, which alone decides.
	hint []uint64
	// next is the number the next Open tries; start is where the counter
	// began, so that a number below next (or any number, once it wrapped)
	// counts as handed out.
	next, start uint32
	wrapped     bool

	opened, closed, refusedFull  uint64
	translated, retired, unknown uint64
	rotations, skippedLive       uint64
}

// New builds a table of opts.Slots local contexts. It allocates
// everything the table will use.
func New(opts Options) (*Table, error) {
	name := opts.Name
	if name == "" {
		name = "qpx"
	}
	if opts.Slots == 0 {
		opts.Slots = DefaultSlots
	}
	if opts.Slots < 1 || opts.Slots > MaxSlots {
		return nil, fmt.Errorf("%s: Options.Slots %d out of range (use 1..%d local QP contexts; 0 selects %d)", name, opts.Slots, MaxSlots, DefaultSlots)
	}
	start := opts.Start
	if start == 0 {
		start = FirstQPN
	}
	if start < FirstQPN || start > LastQPN {
		return nil, fmt.Errorf("%s: Options.Start %#x out of range (use %#x..%#x, or 0 for %#x)", name, start, FirstQPN, LastQPN, FirstQPN)
	}
	c, err := cam.New[uint32](cam.Options{Capacity: opts.Slots, Seed: opts.Seed, Name: name + " CAM"})
	if err != nil {
		return nil, err
	}
	hint := 64
	for hint < 4*opts.Slots {
		hint <<= 1
	}
	return &Table{
		name:  name,
		cam:   c,
		ctx:   make([]Context, opts.Slots),
		qpn:   make([]uint32, opts.Slots),
		hint:  make([]uint64, hint),
		next:  start,
		start: start,
	}, nil
}

// Slots returns N, the number of local contexts.
func (t *Table) Slots() int { return len(t.ctx) }

// Len returns the number of live QPs.
func (t *Table) Len() int { return t.cam.Len() }

// Open gives a new QP a local context initialised from init and a global
// number never handed out since the counter last passed it: the next one
// in rotation that no live QP holds. When every slot is live it returns
// ErrFull and changes nothing.
func (t *Table) Open(init Context) (qpn uint32, local int, err error) {
	if t.cam.Len() == len(t.ctx) {
		t.refusedFull++
		return 0, -1, fmt.Errorf("%s: %w (%d of Options.Slots = %d): close a QP or raise Slots", t.name, ErrFull, t.cam.Len(), len(t.ctx))
	}
	// At most Len() numbers are live, so this ends within Len()+1 steps.
	for {
		q := t.advance()
		idx, err := t.cam.Insert(q)
		if errors.Is(err, cam.ErrExists) {
			t.skippedLive++
			continue
		}
		if err != nil {
			// Below capacity the CAM refuses only keys forged to collide
			// (see package cam); ours are sequential.
			t.refusedFull++
			return 0, -1, fmt.Errorf("%s: %w: %v", t.name, ErrFull, err)
		}
		t.bindSlot(idx, q, &init)
		return q, int(idx), nil
	}
}

// advance returns the counter's number and moves it on, wrapping from
// LastQPN to FirstQPN.
func (t *Table) advance() uint32 {
	q := t.next
	if q == LastQPN {
		t.next = FirstQPN
		t.rotations++
	} else {
		t.next++
	}
	if t.next == t.start {
		t.wrapped = true
	}
	return q
}

func (t *Table) bindSlot(idx, q uint32, init *Context) {
	t.ctx[idx] = *init
	t.ctx[idx].DestQPN &= MaxQPN
	t.ctx[idx].NextPSN &= MaxQPN
	t.ctx[idx].ExpectedPSN &= MaxQPN
	t.qpn[idx] = q
	t.hint[q&uint32(len(t.hint)-1)] = uint64(q)<<32 | uint64(idx+1)
	t.opened++
}

// Bind opens a QP under the number qpn, which the caller chose (a peer
// learned it out of band; a capture is being replayed). It refuses a live
// number (ErrLive), a number outside FirstQPN..LastQPN (ErrRange) and a
// full table (ErrFull). The rotation counter does not move.
func (t *Table) Bind(qpn uint32, init Context) (local int, err error) {
	if qpn < FirstQPN || qpn > LastQPN {
		return -1, fmt.Errorf("%s: %w: %#x (use %#x..%#x)", t.name, ErrRange, qpn, FirstQPN, LastQPN)
	}
	if t.cam.Len() == len(t.ctx) {
		t.refusedFull++
		return -1, fmt.Errorf("%s: %w (%d of Options.Slots = %d): close a QP or raise Slots", t.name, ErrFull, t.cam.Len(), len(t.ctx))
	}
	idx, err := t.cam.Insert(qpn)
	switch {
	case errors.Is(err, cam.ErrExists):
		return -1, fmt.Errorf("%s: %w: %#x is held by local context %d (close it first)", t.name, ErrLive, qpn, idx)
	case err != nil:
		t.refusedFull++
		return -1, fmt.Errorf("%s: %w: %v", t.name, ErrFull, err)
	}
	t.bindSlot(idx, qpn, &init)
	return int(idx), nil
}

// Close ends the QP numbered qpn: its local context is free at once (the
// next Open may take it, under another number) and qpn is retired, so a
// packet still carrying it matches nothing. ErrUnknown if no live QP has
// the number.
func (t *Table) Close(qpn uint32) error {
	idx, ok := t.cam.Delete(qpn)
	if !ok {
		return fmt.Errorf("%s: close %#x: %w", t.name, qpn, ErrUnknown)
	}
	t.ctx[idx] = Context{}
	t.qpn[idx] = 0
	if h := &t.hint[qpn&uint32(len(t.hint)-1)]; *h>>32 == uint64(qpn) {
		*h = 0
	}
	t.closed++
	return nil
}

// CloseLocal closes the QP in local context local, if one is live there.
func (t *Table) CloseLocal(local int) error {
	if local < 0 || local >= len(t.qpn) || t.qpn[local] == 0 {
		return fmt.Errorf("%s: close local context %d: %w", t.name, local, ErrUnknown)
	}
	return t.Close(t.qpn[local])
}

// Translate returns the local context of the live QP numbered qpn: the
// disassembler's (and the builder's) one CAM access per packet. A miss is
// counted as retired or unknown; the caller drops the packet.
func (t *Table) Translate(qpn uint32) (local int, ok bool) {
	if h := t.hint[qpn&uint32(len(t.hint)-1)]; h>>32 == uint64(qpn) && uint32(h) != 0 {
		t.translated++
		return int(uint32(h)) - 1, true
	}
	idx, ok := t.cam.Lookup(qpn)
	if ok {
		t.translated++
		return int(idx), true
	}
	t.countMiss(qpn)
	return -1, false
}

// Lookup is Translate without counting.
func (t *Table) Lookup(qpn uint32) (local int, ok bool) {
	idx, ok := t.cam.Lookup(qpn)
	return int(idx), ok
}

// TranslateBurst translates qpns[i] for each i (at most cam.MaxBurst) into
// locals[i], setting bit i of found for each live QP, counting each miss
// as Translate does; locals[i] of a miss is -1. The CAM's burst lookup
// overlaps the cache misses of a large table.
func (t *Table) TranslateBurst(qpns []uint32, locals []int32) (found uint64) {
	var idxs [cam.MaxBurst]uint32
	found = t.cam.LookupBurst(qpns, idxs[:len(qpns)])
	for i := range qpns {
		if found&(1<<i) != 0 {
			locals[i] = int32(idxs[i])
			continue
		}
		locals[i] = -1
		t.countMiss(qpns[i])
	}
	t.translated += uint64(popcount(found))
	return found
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// countMiss classifies a number no live QP holds.
func (t *Table) countMiss(qpn uint32) {
	if t.Issued(qpn) {
		t.retired++
	} else {
		t.unknown++
	}
}

// Issued reports whether Open has handed out qpn since the table was
// made (so a packet carrying it, now that no live QP holds it, is stale).
func (t *Table) Issued(qpn uint32) bool {
	if qpn < FirstQPN || qpn > LastQPN {
		return false
	}
	switch {
	case t.wrapped:
		return true
	case t.rotations == 0:
		return qpn >= t.start && qpn < t.next
	default: // past LastQPN, not yet back at start
		return qpn >= t.start || qpn < t.next
	}
}

// Context returns local context local (0 ≤ local < Slots). The pointer is
// the table's; it describes the QP until that QP closes.
func (t *Table) Context(local int) *Context { return &t.ctx[local] }

// QPN returns the global number of the QP in local context local, or 0
// when the context is free.
func (t *Table) QPN(local int) uint32 { return t.qpn[local] }

// Live reports whether local context local holds a live QP.
func (t *Table) Live(local int) bool {
	return local >= 0 && local < len(t.qpn) && t.qpn[local] != 0
}

// Next returns the number the next Open tries first.
func (t *Table) Next() uint32 { return t.next }

// FastForward moves the rotation counter to qpn as if every number
// between were handed out and closed (they count as retired): tests use
// it to run through the whole 2^24 space without 16 million opens.
func (t *Table) FastForward(qpn uint32) error {
	if qpn < FirstQPN || qpn > LastQPN {
		return fmt.Errorf("%s: %w: fast-forward to %#x (use %#x..%#x)", t.name, ErrRange, qpn, FirstQPN, LastQPN)
	}
	d := dist(t.next, qpn)
	if d == 0 {
		return nil
	}
	if ds := dist(t.next, t.start); ds != 0 && ds <= d {
		t.wrapped = true
	}
	if qpn < t.next {
		t.rotations++
	}
	t.next = qpn
	return nil
}

// dist is how many steps the counter takes from a to b.
func dist(a, b uint32) uint32 { return (b - a + Space) % Space }

// Stats returns the counters. Call it on the owning goroutine.
func (t *Table) Stats() Stats {
	return Stats{
		Live: t.cam.Len(), Slots: len(t.ctx),
		Opened: t.opened, Closed: t.closed, RefusedFull: t.refusedFull,
		Translated: t.translated, DropRetired: t.retired, DropUnknown: t.unknown,
		Rotations: t.rotations, SkippedLive: t.skippedLive, Next: t.next,
	}
}

// String summarises the table on one line.
func (s Stats) String() string {
	return fmt.Sprintf("live=%d/%d opened=%d closed=%d refused_full=%d translated=%d drop_retired=%d drop_unknown=%d rotations=%d next=%#06x",
		s.Live, s.Slots, s.Opened, s.Closed, s.RefusedFull, s.Translated, s.DropRetired, s.DropUnknown, s.Rotations, s.Next)
}
