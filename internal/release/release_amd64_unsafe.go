//go:build amd64 && !race

package release

import (
	"sync/atomic"
	"unsafe"
)

// Store64 stores val to *addr with release ordering only: a plain
// MOV, which x86-TSO never reorders with the earlier loads and stores of the
// slots it publishes. atomic.Uint64.Store is an XCHG, a full fence that
// stalls until the store buffer — every line just written — has
// drained; on the packet path that stall is the largest single cost of a
// ring call. The function is assembly so the compiler cannot move memory
// accesses across it. The race detector cannot see it, so race builds use
// atomic.Uint64.Store instead (publish_other.go).
//
//go:noescape
func Store64(addr *atomic.Uint64, val uint64)

// CPURelax executes PAUSE: it tells the core (and the hypervisor) that this
// is a spin-wait, so the spinner stops flooding the other core's cache line
// with loads.
func CPURelax()

// Store64 writes the word at the start of an atomic.Uint64; this
// fails to compile if that type ever holds more than its uint64.
var _ [8 - unsafe.Sizeof(atomic.Uint64{})]byte
var _ [unsafe.Sizeof(atomic.Uint64{}) - 8]byte

// StoreCounter64 stores a statistics counter that only the calling goroutine
// writes: a plain, inlinable MOV (no call, no fence). Unlike Store64 it
// orders nothing else — use it for counts that readers only sum, never to
// publish data. An aligned 8-byte MOV cannot tear on amd64.
func StoreCounter64(addr *atomic.Uint64, val uint64) {
	*(*uint64)(unsafe.Pointer(addr)) = val
}
