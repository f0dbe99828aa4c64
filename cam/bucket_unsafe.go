package cam

import (
	"encoding/binary"
	"unsafe"
)

// The hot paths (Lookup, Insert, Delete and their burst forms) reach buckets,
// keys, entry indexes and overflow counts through these accessors, which skip
// the bounds checks: a bucket number comes from primaryOf or altOf, which
// mask a hash below len(buckets) = len(overflow), and a slot
// number from slotOf, which is below slotsPerBucket. Without the checks (and
// their panic calls) Lookup is a leaf function without a stack frame.

// bucketAt returns bucket b < len(buckets).
func (t *Table[K]) bucketAt(b uint32) *bucket[K] {
	return (*bucket[K])(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.buckets)), uintptr(b)*unsafe.Sizeof(bucket[K]{})))
}

// primaryBucket is bucketAt(primaryOf(h)) without the round trip through
// uint32.
func (t *Table[K]) primaryBucket(h uint64) *bucket[K] {
	return (*bucket[K])(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.buckets)), uintptr(h&t.bucketMask)*unsafe.Sizeof(bucket[K]{})))
}

// overflowAt returns the overflow count of bucket b < len(buckets).
func (t *Table[K]) overflowAt(b uint32) uint8 {
	return *(*uint8)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.overflow)), uintptr(b)))
}

// keyAt returns the key of slot s < slotsPerBucket.
func (bk *bucket[K]) keyAt(s uintptr) *K {
	return (*K)(unsafe.Add(unsafe.Pointer(&bk.keys), s*unsafe.Sizeof(bk.keys[0])))
}

// The metadata accessors below are plain functions of the bucket's meta
// array, not methods of the generic bucket: a generic method inlined into
// another generic function still loads its dictionary and nil-checks it,
// two instructions and a load on every hot path that called one.

// metaTags returns the four slots' tags as one word, slot i in byte i.
func metaTags(meta *[16]byte) uint32 {
	return binary.LittleEndian.Uint32(meta[tagsOff:])
}

// indexWord returns the 32-bit word that ends with slot s's index: it
// starts one byte before the index, on the previous index's last byte or,
// for slot 0, on the last byte of the keys, which come first in the bucket.
func indexWord(meta *[16]byte, s uintptr) *[4]byte {
	return (*[4]byte)(unsafe.Add(unsafe.Pointer(meta), 3*s-1))
}

// metaIndex reads slot s's entry index (s < slotsPerBucket).
func metaIndex(meta *[16]byte, s uintptr) uint32 {
	return binary.LittleEndian.Uint32(indexWord(meta, s)[:]) >> 8
}

// metaSet fills slot s's tag and index (s < slotsPerBucket). Both words are
// read before either is written; the index word's first byte is left as it
// was.
func metaSet(meta *[16]byte, s uintptr, tag, idx uint32) {
	w := indexWord(meta, s)
	tags, old := metaTags(meta), binary.LittleEndian.Uint32(w[:])
	binary.LittleEndian.PutUint32(meta[tagsOff:], tags|tag<<(8*s))
	binary.LittleEndian.PutUint32(w[:], old&0xff|idx<<8)
}

// metaClear empties slot s (s < slotsPerBucket).
func metaClear(meta *[16]byte, s uintptr) {
	binary.LittleEndian.PutUint32(meta[tagsOff:], metaTags(meta)&^(0xff<<(8*s)))
}

// indexAt is index for slot s < slotsPerBucket.
func (bk *bucket[K]) indexAt(s uintptr) uint32 { return metaIndex(&bk.meta, s) }

// posIn returns the position record of entry index idx < len(pos).
func posIn(pos []uint32, idx uint32) *uint32 {
	return (*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(pos)), uintptr(idx)*4))
}

// posAt returns the position record of entry index idx < Cap().
func (t *Table[K]) posAt(idx uint32) *uint32 { return posIn(t.pos, idx) }

// stashAt returns stash slot i < stashLen.
func (t *Table[K]) stashAt(i uintptr) *stashSlot[K] {
	return (*stashSlot[K])(unsafe.Add(unsafe.Pointer(&t.stash), i*unsafe.Sizeof(t.stash[0])))
}
