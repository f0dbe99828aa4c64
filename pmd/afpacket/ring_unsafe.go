package afpacket

import (
	"sync/atomic"
	"unsafe"
)

// The status words of ring blocks and slots are shared with the kernel,
// which writes a block's frames (or reads a slot's data) before storing
// the status that hands it over. Acquire loads and release stores order the
// data accesses on our side.

// loadStatus atomically reads the u32 at b[off:], which must be 4-aligned.
func loadStatus(b []byte, off int) uint32 {
	_ = b[off+3]
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off])))
}

// storeStatus atomically writes v to the u32 at b[off:], which must be
// 4-aligned.
func storeStatus(b []byte, off int, v uint32) {
	_ = b[off+3]
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off])), v)
}
