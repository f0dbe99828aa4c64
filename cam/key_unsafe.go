package cam

import "unsafe"

// keyWords returns the bytes of a key as two words: its 32-bit elements 0 and
// 1 in lo, 2 and 3 in hi (on amd64, bytes 0–7 and 8–15 little-endian), zero
// where the key is shorter. New has checked that K is 4, 8, 12 or 16 bytes,
// aligned to at least 4, of integers and booleans with no padding, so two
// keys are == exactly when their words are equal.
//
// It stays under the inliner's budget, and the size is a constant in each
// instantiation, so the branches fold away. Reading 32-bit elements satisfies
// checkptr (the race detector's alignment check) and lets the compiler keep a
// key that arrived in registers in registers.
func keyWords[K comparable](k *K) (lo, hi uint64) {
	p := unsafe.Pointer(k)
	size := unsafe.Sizeof(*k)
	lo = uint64(*(*uint32)(p))
	if size > 4 {
		lo |= uint64(*(*uint32)(unsafe.Add(p, 4))) << 32
	}
	if size > 8 {
		hi = uint64(*(*uint32)(unsafe.Add(p, 8)))
	}
	if size > 12 {
		hi |= uint64(*(*uint32)(unsafe.Add(p, 12))) << 32
	}
	return lo, hi
}

// putKeyWords stores words that keyWords returned for some key back into a
// key, so that a path that carries a key as its words (fewer registers than
// the key's fields) can still store or pass the key.
func putKeyWords[K comparable](k *K, lo, hi uint64) {
	p := unsafe.Pointer(k)
	size := unsafe.Sizeof(*k)
	*(*uint32)(p) = uint32(lo)
	if size > 4 {
		*(*uint32)(unsafe.Add(p, 4)) = uint32(lo >> 32)
	}
	if size > 8 {
		*(*uint32)(unsafe.Add(p, 8)) = uint32(hi)
	}
	if size > 12 {
		*(*uint32)(unsafe.Add(p, 12)) = uint32(hi >> 32)
	}
}
