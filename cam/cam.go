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

// bucket holds four keys in place followed by 16 bytes of metadata: the
// four slots' entry indexes, 24 bits little-endian each, in meta[0:12] (slot
// i at meta[3i:3i+3]), then their 8-bit tags in meta[12:16] (0 for an empty
// slot; a key's tag is never 0). For a 12-byte key a bucket is exactly one
// 64-byte cache line, so a lookup that hits its primary bucket reads one
// line, and the four tags are one 32-bit word.
//
// Every access to meta is a 32-bit word: the tags word, or the word that
// ends with a slot's index (for slot 0 it starts on the last byte of the
// keys; bucket_unsafe.go). The tags word shares no byte with an index word,
// so the tags read that starts every operation is always forwarded from the
// latest store to it, never stalled behind an overlapping index store (a
// read that a store only partly covers waits until the store reaches the
// cache).
type bucket[K comparable] struct {
	keys [slotsPerBucket]K
	meta [16]byte
}

// tagsOff is where the tags word starts in meta.
const tagsOff = 12

func (bk *bucket[K]) tags() uint32 { return metaTags(&bk.meta) }

// tag returns slot's tag.
func (bk *bucket[K]) tag(slot int) uint32 { return uint32(bk.meta[tagsOff+slot&3]) }

// index reads slot's entry index.
func (bk *bucket[K]) index(slot int) uint32 { return bk.indexAt(uintptr(slot & 3)) }

// set fills an empty slot.
func (bk *bucket[K]) set(slot int, tag, idx uint32, k K) {
	metaSet(&bk.meta, uintptr(slot&3), tag, idx)
	bk.keys[slot&3] = k
}

// setWords is set for the key with words lo, hi.
func (bk *bucket[K]) setWords(slot int, tag, idx uint32, lo, hi uint64) {
	metaSet(&bk.meta, uintptr(slot&3), tag, idx)
	putKeyWords(bk.keyAt(uintptr(slot&3)), lo, hi)
}

// clear empties a slot. The key stays behind: keys hold no pointers, and
// only a slot whose tag matches has its key compared.
func (bk *bucket[K]) clear(slot int) {
	metaClear(&bk.meta, uintptr(slot&3))
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
	pos        []uint32
	hashKeys   hashKeys
	bucketMask uint64 // buckets - 1
	freeHead   uint32
	// fastLimit is Cap() while the stash is empty and 0 while it is not, so
	// that Insert's one test freeHead >= fastLimit catches both a full table
	// (the free list then ends at once, in Cap()) and a key that may be in
	// the stash.
	fastLimit uint32
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
	// Buckets is the number of 4-slot buckets (at least Cap, so the load is
	// at most 25 %).
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
		buckets:    make([]bucket[K], nb),
		overflow:   make([]uint8, nb),
		pos:        make([]uint32, opts.Capacity),
		hashKeys:   newHashKeys(seed),
		bucketMask: uint64(nb - 1),
		capacity:   opts.Capacity,
		matchSIMD:  simdAvailable(),
		name:       name,
	}
	t.resetFree()
	return t, nil
}

// bucketsFor sizes the table for a load of at most 25 %: with two candidate
// buckets of four slots, breadth-first displacement and a stash, Capacity keys
// then fit with overwhelming probability (see doc.go), and nearly all keys
// sit in their primary bucket. At 50 % load a sliding window of keys (delete
// the oldest, insert the newest) drifts to one key in nine living in its
// alternate bucket and one insert in five reading both buckets, each a
// mispredicted branch; at 25 % it is one in sixty and one in forty, which
// made that churn a quarter faster on a 64-key table and an eighth on a
// 65 536-key one, for twice the memory (64 bytes per key for a 12-byte key;
// lookups of a table too big for the cache measured the same at either
// load). The count is a power of two, so that a hash reduces to a bucket
// with a mask.
func bucketsFor(capacity int) int {
	n := 2
	for n < capacity {
		n <<= 1
	}
	return n
}

func (t *Table[K]) resetFree() {
	for i := range t.pos {
		t.pos[i] = posFree | uint32(i+1)
	}
	t.freeHead = 0
	t.fastLimit = uint32(t.capacity)
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

// A hash's bits are used three ways, without overlap up to 2^24 buckets
// (MaxCapacity): the low bits pick the primary bucket, the bits from 32 on
// the alternate, the top byte is the tag.

// tagOf is the hash's top seven bits with the top bit set, so that it is
// never 0 (the empty mark): one instruction after the shift. Seven bits make
// a slot's tag match another key's one time in 128, which costs a key
// compare (the fourth slot's chance of a false match per lookup is under 3 %).
func tagOf(h uint64) uint32 {
	return uint32(h>>57) | 0x80
}

// primaryOf and altOf mask the hash's low and high halves to bucket numbers
// (the bucket count is a power of two).
func (t *Table[K]) primaryOf(h uint64) uint32 {
	return uint32(h & t.bucketMask)
}

// altOf is never primary: a key whose two choices coincide takes the
// neighbouring bucket (the lowest bit flipped) as its alternate.
func (t *Table[K]) altOf(h uint64, primary uint32) uint32 {
	alt := uint32(h >> 32 & t.bucketMask)
	if alt == primary {
		alt ^= 1
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
	return matchFirst(bk.tags(), tag)
}

// findIn returns the slot of the key with words lo, hi in bucket b, or -1.
// Keys are compared by their words, which New made equivalent to ==.
func (t *Table[K]) findIn(b uint32, lo, hi uint64, tag uint32) int {
	bk := t.bucketAt(b)
	for m := t.match(bk, tag); m != 0; m &= m - 1 {
		i := slotOf(m)
		if klo, khi := keyWords(bk.keyAt(i)); (klo^lo)|(khi^hi) == 0 {
			return int(i)
		}
	}
	return -1
}

// slotOf returns the slot of the lowest bit of a match mask (non-zero).
func slotOf(m uint32) uintptr { return uintptr(bits.TrailingZeros32(m) >> 3) }

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
	// compare keys by their words, which they already hold. Lookup calls
	// nothing and spills nothing, so it runs without a stack frame.
	lo, hi := keyWords(&k)
	h := t.hashKeys.hash(lo, hi)
	bk := t.primaryBucket(h)
	var m uint32
	if simdBuild && t.matchSIMD {
		m = matchTagsSIMD(&bk.meta, tagOf(h))
	} else {
		m = matchFirst(metaTags(&bk.meta), tagOf(h))
	}
	for ; m != 0; m &= m - 1 {
		i := slotOf(m)
		if klo, khi := keyWords(bk.keyAt(i)); (klo^lo)|(khi^hi) == 0 {
			return metaIndex(&bk.meta, i), true
		}
	}
	// The alternate bucket and the stash, spelled out so that Lookup calls
	// nothing and needs no stack frame. The tag and the bucket mask are
	// recomputed from other expressions on purpose: shared with the primary
	// probe, the compiler would keep them live across it, in spill slots.
	b := uint32(h & uint64(len(t.buckets)-1))
	if t.overflowAt(b) == 0 {
		return 0, false
	}
	tag := uint32(h>>56)>>1 | 0x80
	bk = t.bucketAt(t.altOf(h, b))
	for m = matchFirst(metaTags(&bk.meta), tag); m != 0; m &= m - 1 {
		i := slotOf(m)
		if klo, khi := keyWords(bk.keyAt(i)); (klo^lo)|(khi^hi) == 0 {
			return metaIndex(&bk.meta, i), true
		}
	}
	for i := range uintptr(t.stashLen) {
		if s := t.stashAt(i); s.tag == tag {
			if klo, khi := keyWords(&s.key); (klo^lo)|(khi^hi) == 0 {
				return s.idx, true
			}
		}
	}
	return 0, false
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
	// The common case in a straight line: k's tag not in its primary
	// bucket, no key of that bucket living elsewhere (so k is absent,
	// unless it is in the stash), a free slot there. insertAlt handles a
	// key that may live in, or must go to, its alternate bucket; every
	// other case is insertChecked. Both start over from the key's words,
	// so that few values are live here.
	lo, hi := keyWords(&k)
	h := t.hashKeys.hash(lo, hi)
	b := t.primaryOf(h)
	bk := t.bucketAt(b)
	tags := metaTags(&bk.meta)
	if matchFirst(tags, tagOf(h)) != 0 || t.freeHead >= t.fastLimit {
		return t.insertChecked(lo, hi)
	}
	free := matchFirst(tags, 0)
	if free == 0 || t.overflowAt(b) != 0 {
		return t.insertAlt(lo, hi)
	}
	slot := slotOf(free)
	idx = t.freeHead
	t.freeHead = *posIn(t.pos, idx) & posLowMask
	t.length++
	binary.LittleEndian.PutUint32(bk.meta[tagsOff:], tags|tagOf(h)<<(8*slot))
	w := indexWord(&bk.meta, slot)
	binary.LittleEndian.PutUint32(w[:], binary.LittleEndian.Uint32(w[:])&0xff|idx<<8)
	putKeyWords(bk.keyAt(slot), lo, hi)
	*posIn(t.pos, idx) = b<<2 | uint32(slot)
	return idx, nil
}

// insertAlt is Insert of an absent key (its tag not in its primary bucket,
// the table neither full nor stashing) whose primary bucket is full or has
// keys living elsewhere: k may be in its alternate bucket, and goes there if
// the primary is full.
func (t *Table[K]) insertAlt(lo, hi uint64) (idx uint32, err error) {
	h := t.hashKeys.hash(lo, hi)
	b := t.primaryOf(h)
	bk := t.bucketAt(b)
	free := matchFirst(metaTags(&bk.meta), 0)
	alt := t.altOf(h, b)
	altTags := metaTags(&t.bucketAt(alt).meta)
	if matchFirst(altTags, tagOf(h)) != 0 {
		return t.insertChecked(lo, hi)
	}
	var slot uintptr
	switch {
	case free != 0:
		slot = slotOf(free)
	default:
		if free = matchFirst(altTags, 0); free == 0 {
			return t.insertChecked(lo, hi)
		}
		t.incOverflow(b)
		b, bk = alt, t.bucketAt(alt)
		slot = slotOf(free)
	}
	idx = t.takeIndex()
	metaSet(&bk.meta, slot, tagOf(h), idx)
	putKeyWords(bk.keyAt(slot), lo, hi)
	*posIn(t.pos, idx) = b<<2 | uint32(slot)
	return idx, nil
}

// insertChecked is Insert for every case, of the key with words lo, hi: it
// may be present (in its primary bucket, its alternate or the stash), the
// table may be full, both buckets may be full.
func (t *Table[K]) insertChecked(lo, hi uint64) (idx uint32, err error) {
	var k K
	putKeyWords(&k, lo, hi)
	h := t.hashKeys.hash(lo, hi)
	tag := tagOf(h)
	b1 := t.primaryOf(h)
	if i := t.findIn(b1, lo, hi, tag); i >= 0 {
		return t.bucketAt(b1).index(i), ErrExists
	}
	if t.overflowAt(b1) != 0 {
		if idx, ok := t.lookupElsewhere(lo, hi, b1); ok {
			return idx, ErrExists
		}
	}
	if t.length == t.capacity {
		t.fullRejects++
		return 0, ErrFull
	}
	if free := t.match(t.bucketAt(b1), 0); free != 0 {
		return t.place(b1, int(slotOf(free)), k, tag), nil
	}
	b2 := t.altOf(h, b1)
	if free := t.match(t.bucketAt(b2), 0); free != 0 {
		t.incOverflow(b1)
		return t.place(b2, int(slotOf(free)), k, tag), nil
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
			ms[i&(MaxBurst-1)] = matchTagsSIMD(&t.bucketAt(t.primaryOf(h)).meta, tagOf(h))
		} else {
			ms[i&(MaxBurst-1)] = matchFirst(t.bucketAt(t.primaryOf(h)).tags(), tagOf(h))
		}
	}
keys:
	for i := range keys {
		lo, hi := keyWords(&keys[i])
		b := t.primaryOf(hs[i&(MaxBurst-1)])
		bk := t.bucketAt(b)
		for m := ms[i&(MaxBurst-1)]; m != 0; m &= m - 1 {
			s := slotOf(m)
			if klo, khi := keyWords(bk.keyAt(s)); (klo^lo)|(khi^hi) == 0 {
				idxs[i] = bk.indexAt(s)
				found |= 1 << i
				continue keys
			}
		}
		if t.overflowAt(b) != 0 {
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
		idx, err := t.Insert(keys[i])
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
		if idx, ok := t.Delete(keys[i]); ok {
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
// and touch its primary bucket's tags. The second pass hashes again, which
// is cheaper than storing the hashes and calling a helper that takes one.
func (t *Table[K]) prefetch(keys []K) {
	var touched uint32
	for i := range keys {
		lo, hi := keyWords(&keys[i])
		touched |= t.bucketAt(t.primaryOf(t.hashKeys.hash(lo, hi))).tags()
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

// takeIndex pops the free list; the caller checked that the table is not
// full, so freeHead is a free index below Cap().
func (t *Table[K]) takeIndex() uint32 {
	idx := t.freeHead
	t.freeHead = *posIn(t.pos, idx) & posLowMask
	t.length++
	return idx
}

// freeIndex pushes an index that a present key held (so it is below Cap()).
func (t *Table[K]) freeIndex(idx uint32) {
	*posIn(t.pos, idx) = posFree | t.freeHead
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
		t.fastLimit = 0
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
	k, tag, idx := sb.keys[slot&3], sb.tag(slot), sb.index(slot)
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
	h := t.hashKeys.hash(lo, hi)
	b1 := t.primaryOf(h)
	bk := t.bucketAt(b1)
	var m uint32
	if simdBuild && t.matchSIMD {
		m = matchTagsSIMD(&bk.meta, tagOf(h))
	} else {
		m = matchFirst(metaTags(&bk.meta), tagOf(h))
	}
	for ; m != 0; m &= m - 1 {
		i := slotOf(m)
		if klo, khi := keyWords(bk.keyAt(i)); (klo^lo)|(khi^hi) == 0 {
			// removeSlot(b1, i, b1) spelled out: it is over the inlining budget
			idx := metaIndex(&bk.meta, i)
			metaClear(&bk.meta, i)
			t.freeIndex(idx)
			if t.stashLen != 0 {
				t.unstashInto(b1, int(i))
			}
			return idx, true
		}
	}
	if t.overflowAt(b1) == 0 {
		return 0, false
	}
	return t.deleteElsewhere(lo, hi, b1)
}

// deleteElsewhere deletes a key that is not in its primary bucket b1, from
// its alternate bucket or the stash. It recomputes the hash, as
// lookupElsewhere does.
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
	if t.stashLen == 0 {
		t.fastLimit = uint32(t.capacity)
	}
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
