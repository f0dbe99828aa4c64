package cam

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrFull: Insert was refused because the table holds Cap() keys (or, far
	// beyond any realistic probability, because no displacement path and no
	// stash slot was left; see doc.go). The table is unchanged.
	ErrFull = errors.New("cam: table full")
	// ErrExists: Insert found the key already present; the existing index is
	// returned with it and the table is unchanged.
	ErrExists = errors.New("cam: key already present")
)

const (
	// MaxCapacity is the largest Capacity accepted: a bucket stores entry
	// indexes in 24 bits.
	MaxCapacity = 1 << 24

	// DefaultSeed is the hash seed used when Options.Seed is 0, so that two
	// tables built with zero Options behave identically.
	DefaultSeed uint64 = 0x2d358dccaa6c78a5

	slotsPerBucket = 4
	stashSize      = 16
	// maxPathNodes bounds the breadth-first search for a displacement path:
	// at most this many full buckets (4 keys each) are examined per Insert.
	maxPathNodes = 64

	indexMask      = 1<<24 - 1
	overflowSticky = 255

	posStash   = 1 << 30 // pos[idx] for a stashed key: posStash | stash slot
	posFree    = 1 << 31 // pos[idx] for a free index: posFree | next free index
	posLowMask = 1<<30 - 1
)

// Options configures a Table. Capacity is required; the zero value of the
// other fields is valid.
type Options struct {
	// Capacity is the number of keys the table is guaranteed to hold and the
	// bound of the indexes it returns: [0, Capacity). 1 ≤ Capacity ≤ MaxCapacity.
	Capacity int
	// Seed keys the hash. 0 selects DefaultSeed (not a random one): with the
	// same seed and the same operation sequence every returned index is the
	// same, so a simulation replays exactly. Give tables that face forged
	// packets a secret seed.
	Seed uint64
	// Name labels the table in errors and String.
	Name string
}

// bucket holds four keys in place behind 16 bytes of metadata: meta[i] is
// slot i's 8-bit tag (0 for an empty slot; a key's tag is never 0) and
// meta[4+3i:7+3i] its entry index, 24 bits little-endian. For a 12-byte key a
// bucket is exactly one 64-byte cache line, so a lookup that hits its primary
// bucket reads one line, and the four tags are one 32-bit word.
type bucket[K comparable] struct {
	meta [16]byte
	keys [slotsPerBucket]K
}

func (bk *bucket[K]) tags() uint32 { return binary.LittleEndian.Uint32(bk.meta[:4]) }

// index reads slot's entry index as the top 24 bits of the word that ends
// where the index does, so that every read stays inside meta.
func (bk *bucket[K]) index(slot int) uint32 {
	return binary.LittleEndian.Uint32(bk.meta[3+3*(slot&3):]) >> 8
}

// set fills an empty slot. Tags and index are each written as one 32-bit
// word, the width they are read at, so that a lookup right after an insert
// gets them by store-to-load forwarding rather than waiting for the store.
func (bk *bucket[K]) set(slot int, tag, idx uint32, k K) {
	slot &= 3
	binary.LittleEndian.PutUint32(bk.meta[:4], bk.tags()|tag<<(8*slot))
	w := bk.meta[3+3*slot : 7+3*slot]
	binary.LittleEndian.PutUint32(w, binary.LittleEndian.Uint32(w)&0xff|idx<<8)
	bk.keys[slot] = k
}

// clear empties a slot. The key stays behind: keys hold no pointers, and
// only a slot whose tag matches has its key compared.
func (bk *bucket[K]) clear(slot int) {
	binary.LittleEndian.PutUint32(bk.meta[:4], bk.tags()&^(0xff<<(8*(slot&3))))
}

type stashSlot[K comparable] struct {
	key     K
	tag     uint32
	idx     uint32
	primary uint32
	alt     uint32
}

// pathNode is one full bucket visited by the displacement search: the key in
// slot via of the parent node's bucket can move into bucket.
type pathNode struct {
	bucket uint32
	parent int16
	via    uint8
}

// Table is a fixed-capacity exact-match table (a software CAM). It maps a key
// to an entry index in [0, Cap()) that stays the same until the key is
// deleted; callers keep per-entry state in their own array indexed by it.
//
// A Table is not safe for concurrent use: like every per-lcore structure in
// peregrine it is owned by one goroutine.
type Table[K comparable] struct {
	buckets []bucket[K]
	// overflow[b] counts keys whose primary bucket is b but that live in their
	// alternate bucket or in the stash. While it is 0 a lookup that misses
	// bucket b is a definite miss. It saturates at overflowSticky and then
	// stays there (lookups of that bucket merely check the alternate too).
	overflow []uint8
	// pos[idx] locates the key of entry idx: bucket<<2|slot, posStash|slot,
	// or posFree|next for a free index (the free list is threaded through pos).
	pos       []uint32
	hashKeys  hashKeys
	nbuckets  uint64
	freeHead  uint32
	length    int
	capacity  int
	matchSIMD bool
	name      string

	// Scratch space of the burst calls' two passes, kept here because a
	// local array would be zeroed on every call.
	burstHash  [MaxBurst]uint64
	burstMatch [MaxBurst]uint32
	// sinkTags keeps prefetch's loads from being optimised away.
	sinkTags uint32

	stashLen int
	stash    [stashSize]stashSlot[K]
	path     [maxPathNodes]pathNode

	displacements uint64
	stashed       uint64
	fullRejects   uint64
}

// Stats are counters for diagnostics and tests.
type Stats struct {
	Len, Cap int
	// Buckets is the number of 4-slot buckets (at least Cap/2, so the load is
	// at most 50 %).
	Buckets int
	// InStash is the number of keys currently in the 16-entry overflow stash.
	InStash int
	// Displacements counts keys moved to their other bucket by Insert.
	Displacements uint64
	// Stashed counts Inserts that had to use the stash.
	Stashed uint64
	// FullRejects counts Inserts refused with ErrFull.
	FullRejects uint64
	// SIMD reports whether tag matching uses simd/archsimd.
	SIMD bool
}

// New builds a table for keys of type K: 4, 8, 12 or 16 bytes aligned to at
// least 4, made of integers and booleans (in structs and arrays) with no
// padding — e.g. uint32, uint64, Key16, or struct{CID, Win, PSN uint32}. The
// table hashes the key's bytes and compares keys with ==; any other K is
// refused with an error that names the problem (a padded
// struct{CID uint32; Win uint8; PSN uint32} is told to widen Win). All memory
// is allocated here; no other method allocates.
func New[K comparable](opts Options) (*Table[K], error) {
	name := opts.Name
	if name == "" {
		name = "cam"
	}
	if opts.Capacity < 1 || opts.Capacity > MaxCapacity {
		return nil, fmt.Errorf("%s: capacity %d is out of range (use 1 to %d)", name, opts.Capacity, MaxCapacity)
	}
	if err := checkKeyType(reflect.TypeFor[K]()); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = DefaultSeed
	}
	nb := bucketsFor(opts.Capacity)
	t := &Table[K]{
		buckets:   make([]bucket[K], nb),
		overflow:  make([]uint8, nb),
		pos:       make([]uint32, opts.Capacity),
		hashKeys:  newHashKeys(seed),
		nbuckets:  uint64(nb),
		capacity:  opts.Capacity,
		matchSIMD: simdAvailable(),
		name:      name,
	}
	t.resetFree()
	return t, nil
}

// bucketsFor sizes the table for a load of at most 50 %: with two candidate
// buckets of four slots, breadth-first displacement and a stash, Capacity keys
// then fit with overwhelming probability (see doc.go), and most keys sit in
// their primary bucket, so most lookups read one bucket.
func bucketsFor(capacity int) int {
	return max((capacity+1)/2, 2)
}

func (t *Table[K]) resetFree() {
	for i := range t.pos {
		t.pos[i] = posFree | uint32(i+1)
	}
	t.freeHead = 0
}

// Len returns the number of keys present.
func (t *Table[K]) Len() int { return t.length }

// Cap returns Options.Capacity: the guaranteed number of keys and the bound of
// every index.
func (t *Table[K]) Cap() int { return t.capacity }

// String names the table and its fill.
func (t *Table[K]) String() string {
	return fmt.Sprintf("%s(%d/%d)", t.name, t.length, t.capacity)
}

// Stats returns the table's counters.
func (t *Table[K]) Stats() Stats {
	return Stats{
		Len: t.length, Cap: t.capacity, Buckets: len(t.buckets), InStash: t.stashLen,
		Displacements: t.displacements, Stashed: t.stashed, FullRejects: t.fullRejects,
		SIMD: t.matchSIMD,
	}
}

// tagOf is the hash's low byte, with 0 (the empty mark) mapped to 1 without
// a branch. Range reduction barely uses the low byte, so tags and buckets are
// independent.
func tagOf(h uint64) uint32 {
	tag := uint32(h & 0xff)
	return tag + (tag-1)>>31
}

// primaryOf and altOf reduce the hash's two 32-bit halves to bucket numbers by
// multiply-shift, so the bucket count need not be a power of two.
func (t *Table[K]) primaryOf(h uint64) uint32 {
	return uint32((h & 0xffffffff) * t.nbuckets >> 32)
}

func (t *Table[K]) altOf(h uint64, primary uint32) uint32 {
	alt := uint32((h >> 32) * t.nbuckets >> 32)
	if alt == primary {
		alt++
		if uint64(alt) == t.nbuckets {
			alt = 0
		}
	}
	return alt
}

func (t *Table[K]) hashOf(k *K) uint64 {
	lo, hi := keyWords(k)
	return t.hashKeys.hash(lo, hi)
}

// match returns a mask with bit 8i+7 set for each slot i of bk whose tag is
// tag (tag 0: each empty slot). Hot paths call it directly so both flavours
// inline.
func (t *Table[K]) match(bk *bucket[K], tag uint32) uint32 {
	if simdBuild && t.matchSIMD {
		return matchTagsSIMD(&bk.meta, tag)
	}
	return matchTags(bk.tags(), tag)
}

// findIn returns the slot of the key with words lo, hi in bucket b, or -1.
// Keys are compared by their words, which New made equivalent to ==.
func (t *Table[K]) findIn(b uint32, lo, hi uint64, tag uint32) int {
	bk := &t.buckets[b]
	for m := t.match(bk, tag); m != 0; m &= m - 1 {
		i := bits.TrailingZeros32(m) >> 3
		if klo, khi := keyWords(&bk.keys[i&3]); klo == lo && khi == hi {
			return i
		}
	}
	return -1
}

func (t *Table[K]) findStash(lo, hi uint64, tag uint32) int {
	for i := 0; i < t.stashLen; i++ {
		s := &t.stash[i]
		if klo, khi := keyWords(&s.key); s.tag == tag && klo == lo && khi == hi {
			return i
		}
	}
	return -1
}

// Lookup returns the entry index of k. Worst case: one hash, two buckets
// (8 tag checks, key compares only on tag matches) and the 16-slot stash;
// typically one bucket.
func (t *Table[K]) Lookup(k K) (idx uint32, ok bool) {
	// The hot paths spell out hashOf, which is over the inlining budget, and
	// compare keys by their words, which they already hold.
	lo, hi := keyWords(&k)
	h := t.hashKeys.hash(lo, hi)
	b := t.primaryOf(h)
	bk := &t.buckets[b]
	var m uint32
	if simdBuild && t.matchSIMD {
		m = matchTagsSIMD(&bk.meta, tagOf(h))
	} else {
		m = matchTags(bk.tags(), tagOf(h))
	}
	for ; m != 0; m &= m - 1 {
		i := int(bits.TrailingZeros32(m) >> 3)
		if klo, khi := keyWords(&bk.keys[i&3]); klo == lo && khi == hi {
			return bk.index(i), true
		}
	}
	if t.overflow[b] == 0 {
		return 0, false
	}
	return t.lookupElsewhere(lo, hi, b)
}

// lookupElsewhere searches the alternate bucket and the stash. It recomputes
// the hash: keeping it live across the common path would cost a spill there.
func (t *Table[K]) lookupElsewhere(lo, hi uint64, primary uint32) (uint32, bool) {
	h := t.hashKeys.hash(lo, hi)
	tag := tagOf(h)
	alt := t.altOf(h, primary)
	if i := t.findIn(alt, lo, hi, tag); i >= 0 {
		return t.buckets[alt].index(i), true
	}
	if i := t.findStash(lo, hi, tag); i >= 0 {
		return t.stash[i].idx, true
	}
	return 0, false
}

// Insert adds k and returns its new entry index. If k is present it returns
// the existing index and ErrExists; if the table is full it returns ErrFull.
// Either way a refused Insert leaves the table unchanged. Worst case: a lookup,
// a breadth-first search over at most 64 full buckets (256 key hashes) and at
// most 4 moves of keys (never of entry indexes); typically one bucket write.
func (t *Table[K]) Insert(k K) (idx uint32, err error) {
	lo, hi := keyWords(&k)
	return t.insertHashed(k, lo, hi, t.hashKeys.hash(lo, hi))
}

func (t *Table[K]) insertHashed(k K, lo, hi, h uint64) (uint32, error) {
	tag := tagOf(h)
	b1 := t.primaryOf(h)
	bk := &t.buckets[b1]
	var m, free uint32
	if simdBuild && t.matchSIMD {
		m, free = matchTagsSIMD(&bk.meta, tag), matchTags(bk.tags(), 0)
	} else {
		tags := bk.tags()
		m, free = matchTags(tags, tag), matchTags(tags, 0)
	}
	for ; m != 0; m &= m - 1 {
		i := int(bits.TrailingZeros32(m) >> 3)
		if klo, khi := keyWords(&bk.keys[i&3]); klo == lo && khi == hi {
			return bk.index(i), ErrExists
		}
	}
	if t.overflow[b1] != 0 {
		if idx, ok := t.lookupElsewhere(lo, hi, b1); ok {
			return idx, ErrExists
		}
	}
	if t.length == t.capacity {
		t.fullRejects++
		return 0, ErrFull
	}
	if free != 0 { // place(b1, …) spelled out: place is over the inlining budget
		slot := int(bits.TrailingZeros32(free)>>3) & 3
		idx := t.takeIndex()
		bk.set(slot, tag, idx, k)
		t.pos[idx] = b1<<2 | uint32(slot)
		return idx, nil
	}
	b2 := t.altOf(h, b1)
	if free := t.match(&t.buckets[b2], 0); free != 0 {
		t.incOverflow(b1)
		return t.place(b2, int(bits.TrailingZeros32(free)>>3), k, tag), nil
	}
	return t.insertSlow(k, tag, b1, b2)
}

// MaxBurst is the most keys one burst call takes: found masks are uint64.
const MaxBurst = 64

// The burst calls work in two passes, as DPDK's rte_hash bulk lookups do:
// the first hashes every key and reads each primary bucket's tags, loads that
// do not depend on one another and so overlap in the memory system; the
// second does the per-key work on buckets now in cache. Results are exactly
// those of the single-key calls made in order.

// LookupBurst looks up keys[i] for each i < len(keys) (at most MaxBurst),
// stores the index of each key found in idxs[i] and sets bit i of found;
// idxs[i] of a key not found is left alone. It panics if len(keys) >
// MaxBurst or len(idxs) < len(keys).
func (t *Table[K]) LookupBurst(keys []K, idxs []uint32) (found uint64) {
	checkBurst(len(keys), len(idxs))
	idxs = idxs[:len(keys)]
	hs, ms := &t.burstHash, &t.burstMatch
	for i := range keys {
		lo, hi := keyWords(&keys[i])
		h := t.hashKeys.hash(lo, hi)
		hs[i&(MaxBurst-1)] = h
		if simdBuild && t.matchSIMD {
			ms[i&(MaxBurst-1)] = matchTagsSIMD(&t.buckets[t.primaryOf(h)].meta, tagOf(h))
		} else {
			ms[i&(MaxBurst-1)] = matchTags(t.buckets[t.primaryOf(h)].tags(), tagOf(h))
		}
	}
keys:
	for i := range keys {
		lo, hi := keyWords(&keys[i])
		b := t.primaryOf(hs[i&(MaxBurst-1)])
		bk := &t.buckets[b]
		for m := ms[i&(MaxBurst-1)]; m != 0; m &= m - 1 {
			s := int(bits.TrailingZeros32(m) >> 3)
			if klo, khi := keyWords(&bk.keys[s&3]); klo == lo && khi == hi {
				idxs[i] = bk.index(s)
				found |= 1 << i
				continue keys
			}
		}
		if t.overflow[b] != 0 {
			if idx, ok := t.lookupElsewhere(lo, hi, b); ok {
				idxs[i] = idx
				found |= 1 << i
			}
		}
	}
	return found
}

// InsertBurst inserts keys in order, storing each new index in idxs[i],
// until one fails: it returns how many were inserted and, if that is fewer
// than len(keys), the error of keys[n] — ErrExists with the existing index in
// idxs[n], or ErrFull. It panics if len(keys) > MaxBurst or len(idxs) <
// len(keys).
func (t *Table[K]) InsertBurst(keys []K, idxs []uint32) (n int, err error) {
	checkBurst(len(keys), len(idxs))
	idxs = idxs[:len(keys)]
	t.prefetch(keys)
	for i := range keys {
		lo, hi := keyWords(&keys[i])
		idx, err := t.insertHashed(keys[i], lo, hi, t.burstHash[i&(MaxBurst-1)])
		idxs[i] = idx
		if err != nil {
			return i, err
		}
	}
	return len(keys), nil
}

// DeleteBurst deletes each present key of keys (at most MaxBurst), storing
// the index it had in idxs[i] and setting bit i of found. It panics if
// len(keys) > MaxBurst or len(idxs) < len(keys).
func (t *Table[K]) DeleteBurst(keys []K, idxs []uint32) (found uint64) {
	checkBurst(len(keys), len(idxs))
	idxs = idxs[:len(keys)]
	t.prefetch(keys)
	for i := range keys {
		lo, hi := keyWords(&keys[i])
		if idx, ok := t.deleteHashed(lo, hi, t.burstHash[i&(MaxBurst-1)]); ok {
			idxs[i] = idx
			found |= 1 << i
		}
	}
	return found
}

func checkBurst(keys, idxs int) {
	if keys > MaxBurst {
		panic(fmt.Sprintf("cam: burst of %d keys (at most MaxBurst, %d)", keys, MaxBurst))
	}
	if idxs < keys {
		panic(fmt.Sprintf("cam: burst of %d keys with room for %d indexes", keys, idxs))
	}
}

// prefetch is the first pass of InsertBurst and DeleteBurst: hash every key
// into burstHash and touch its primary bucket's tags.
func (t *Table[K]) prefetch(keys []K) {
	var touched uint32
	for i := range keys {
		lo, hi := keyWords(&keys[i])
		h := t.hashKeys.hash(lo, hi)
		t.burstHash[i&(MaxBurst-1)] = h
		touched |= t.buckets[t.primaryOf(h)].tags()
	}
	t.sinkTags = touched
}

// place stores k in an empty slot and takes an index off the free list.
func (t *Table[K]) place(b uint32, slot int, k K, tag uint32) uint32 {
	idx := t.takeIndex()
	t.buckets[b].set(slot, tag, idx, k)
	t.pos[idx] = b<<2 | uint32(slot&3)
	return idx
}

func (t *Table[K]) takeIndex() uint32 {
	idx := t.freeHead
	t.freeHead = t.pos[idx] & posLowMask
	t.length++
	return idx
}

func (t *Table[K]) freeIndex(idx uint32) {
	t.pos[idx] = posFree | t.freeHead
	t.freeHead = idx
	t.length--
}

func (t *Table[K]) incOverflow(b uint32) {
	if t.overflow[b] != overflowSticky {
		t.overflow[b]++
	}
}

func (t *Table[K]) decOverflow(b uint32) {
	if t.overflow[b] != overflowSticky {
		t.overflow[b]--
	}
}

// insertSlow handles both candidate buckets being full: find the shortest
// chain of keys that can each move to their other bucket, ending at a free
// slot; the search only reads, so a failed search changes nothing. Failing
// that, use the stash; failing that, ErrFull.
func (t *Table[K]) insertSlow(k K, tag, b1, b2 uint32) (uint32, error) {
	if node, slot, dest, ok := t.searchPath(b1, b2); ok {
		root, freed := t.displace(node, slot, dest)
		if root != b1 {
			t.incOverflow(b1)
		}
		return t.place(root, freed, k, tag), nil
	}
	if t.stashLen < stashSize {
		idx := t.takeIndex()
		t.stash[t.stashLen] = stashSlot[K]{key: k, tag: tag, idx: idx, primary: b1, alt: b2}
		t.pos[idx] = posStash | uint32(t.stashLen)
		t.stashLen++
		t.stashed++
		t.incOverflow(b1)
		return idx, nil
	}
	t.fullRejects++
	return 0, ErrFull
}

// searchPath runs a breadth-first search from the two full buckets. It returns
// the path node whose key in slot can move to the free slot dest of its other
// bucket.
func (t *Table[K]) searchPath(b1, b2 uint32) (node, slot int, dest uint32, ok bool) {
	t.path[0] = pathNode{bucket: b1, parent: -1}
	t.path[1] = pathNode{bucket: b2, parent: -1}
	n := 2
	for head := 0; head < n; head++ {
		b := t.path[head].bucket
		for s := range slotsPerBucket {
			other := t.otherBucket(&t.buckets[b].keys[s], b)
			if t.match(&t.buckets[other], 0) != 0 {
				return head, s, other, true
			}
			if n < maxPathNodes && !t.onPath(head, other) {
				t.path[n] = pathNode{bucket: other, parent: int16(head), via: uint8(s)}
				n++
			}
		}
	}
	return 0, 0, 0, false
}

// onPath reports whether bucket b is node or one of its ancestors: a path
// that visits a bucket twice would move a key out of a slot already reused.
func (t *Table[K]) onPath(node int, b uint32) bool {
	for n := node; n >= 0; n = int(t.path[n].parent) {
		if t.path[n].bucket == b {
			return true
		}
	}
	return false
}

func (t *Table[K]) otherBucket(k *K, b uint32) uint32 {
	h := t.hashOf(k)
	p := t.primaryOf(h)
	if b == p {
		return t.altOf(h, p)
	}
	return p
}

// displace executes a path found by searchPath from its free end back to the
// root, so every move goes into a slot just emptied. It returns the root
// bucket and its slot now free.
func (t *Table[K]) displace(node, slot int, dest uint32) (root uint32, freed int) {
	destSlot := int(bits.TrailingZeros32(t.match(&t.buckets[dest], 0)) >> 3)
	for {
		src := t.path[node].bucket
		t.moveKey(src, slot, dest, destSlot)
		parent := int(t.path[node].parent)
		if parent < 0 {
			return src, slot
		}
		dest, destSlot = src, slot
		slot = int(t.path[node].via)
		node = parent
	}
}

func (t *Table[K]) moveKey(src uint32, slot int, dst uint32, dstSlot int) {
	sb := &t.buckets[src]
	k, tag, idx := sb.keys[slot&3], uint32(sb.meta[slot&3]), sb.index(slot)
	t.buckets[dst].set(dstSlot, tag, idx, k)
	sb.clear(slot)
	t.pos[idx] = dst<<2 | uint32(dstSlot&3)
	if p := t.primaryOf(t.hashOf(&k)); p == src {
		t.incOverflow(p)
	} else {
		t.decOverflow(p)
	}
	t.displacements++
}

// Delete removes k and returns the index it had. Same bounds as Lookup.
func (t *Table[K]) Delete(k K) (idx uint32, ok bool) {
	lo, hi := keyWords(&k)
	return t.deleteHashed(lo, hi, t.hashKeys.hash(lo, hi))
}

func (t *Table[K]) deleteHashed(lo, hi, h uint64) (uint32, bool) {
	b1 := t.primaryOf(h)
	bk := &t.buckets[b1]
	var m uint32
	if simdBuild && t.matchSIMD {
		m = matchTagsSIMD(&bk.meta, tagOf(h))
	} else {
		m = matchTags(bk.tags(), tagOf(h))
	}
	for ; m != 0; m &= m - 1 {
		i := int(bits.TrailingZeros32(m) >> 3)
		if klo, khi := keyWords(&bk.keys[i&3]); klo == lo && khi == hi {
			// removeSlot(b1, i, b1) spelled out: it is over the inlining budget
			idx := bk.index(i)
			bk.clear(i)
			t.freeIndex(idx)
			if t.stashLen != 0 {
				t.unstashInto(b1, i)
			}
			return idx, true
		}
	}
	if t.overflow[b1] == 0 {
		return 0, false
	}
	return t.deleteElsewhere(lo, hi, b1)
}

func (t *Table[K]) deleteElsewhere(lo, hi uint64, b1 uint32) (uint32, bool) {
	h := t.hashKeys.hash(lo, hi)
	tag := tagOf(h)
	b2 := t.altOf(h, b1)
	if i := t.findIn(b2, lo, hi, tag); i >= 0 {
		return t.removeSlot(b2, i, b1), true
	}
	if i := t.findStash(lo, hi, tag); i >= 0 {
		return t.removeStash(i), true
	}
	return 0, false
}

// DeleteIndex removes the key that entry idx holds, for callers that know the
// index but not the key. It reports false if idx is out of range or free.
func (t *Table[K]) DeleteIndex(idx uint32) bool {
	if idx >= uint32(t.capacity) {
		return false
	}
	p := t.pos[idx]
	switch {
	case p&posFree != 0:
		return false
	case p&posStash != 0:
		t.removeStash(int(p & posLowMask))
	default:
		b, slot := p>>2, int(p&3)
		t.removeSlot(b, slot, t.primaryOf(t.hashOf(&t.buckets[b].keys[slot])))
	}
	return true
}

func (t *Table[K]) removeSlot(b uint32, slot int, primary uint32) uint32 {
	bk := &t.buckets[b]
	idx := bk.index(slot)
	bk.clear(slot)
	if b != primary {
		t.decOverflow(primary)
	}
	t.freeIndex(idx)
	if t.stashLen != 0 {
		t.unstashInto(b, slot)
	}
	return idx
}

func (t *Table[K]) removeStash(i int) uint32 {
	idx := t.stash[i].idx
	t.decOverflow(t.stash[i].primary)
	t.dropStash(i)
	t.freeIndex(idx)
	return idx
}

// dropStash removes stash slot i by moving the last one into it.
func (t *Table[K]) dropStash(i int) {
	last := t.stashLen - 1
	if i != last {
		t.stash[i] = t.stash[last]
		t.pos[t.stash[i].idx] = posStash | uint32(i)
	}
	t.stash[last] = stashSlot[K]{}
	t.stashLen--
}

// unstashInto moves the first stashed key that may live in bucket b into its
// just-freed slot, so the stash drains as the table empties.
func (t *Table[K]) unstashInto(b uint32, slot int) {
	for i := 0; i < t.stashLen; i++ {
		s := &t.stash[i]
		if s.primary != b && s.alt != b {
			continue
		}
		t.buckets[b].set(slot, s.tag, s.idx, s.key)
		t.pos[s.idx] = b<<2 | uint32(slot&3)
		if b == s.primary {
			t.decOverflow(b)
		}
		t.dropStash(i)
		return
	}
}

// KeyAt returns the key that entry idx holds.
func (t *Table[K]) KeyAt(idx uint32) (k K, ok bool) {
	if idx >= uint32(t.capacity) {
		return k, false
	}
	p := t.pos[idx]
	switch {
	case p&posFree != 0:
		return k, false
	case p&posStash != 0:
		return t.stash[p&posLowMask].key, true
	default:
		return t.buckets[p>>2].keys[p&3], true
	}
}

// Range calls fn for every present entry in increasing index order until fn
// returns false. fn may Delete or DeleteIndex any entry (a timeout scan
// retiring what expired); keys inserted during Range may or may not be
// visited. Cost is O(Cap()).
func (t *Table[K]) Range(fn func(idx uint32, k K) bool) {
	for i := range t.pos {
		k, ok := t.KeyAt(uint32(i))
		if ok && !fn(uint32(i), k) {
			return
		}
	}
}

// Clear removes every key; indexes are handed out again from 0. O(Cap()).
func (t *Table[K]) Clear() {
	clear(t.buckets)
	clear(t.overflow)
	clear(t.stash[:])
	t.stashLen = 0
	t.length = 0
	t.resetFree()
}
