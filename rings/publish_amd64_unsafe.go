//go:build amd64 && !race

package rings

import (
	"sync/atomic"
	"unsafe"
)

// storeRelease32 stores val to *addr with release ordering only: a plain
// MOV, which x86-TSO never reorders with the earlier loads and stores of the
// slots it publishes. atomic.Uint32.Store is an XCHG, a full fence that
// stalls until the store buffer — every slot line just written — has
// drained; on the packet path that stall is the largest single cost of a
// ring call. The function is assembly so the compiler cannot move memory
// accesses across it. The race detector cannot see it, so race builds use
// atomic.Uint32.Store instead (publish_other.go).
//
//go:noescape
func storeRelease32(addr *atomic.Uint32, val uint32)

// cpuRelax executes PAUSE: it tells the core (and the hypervisor) that this
// is a spin-wait, so the spinner stops flooding the other core's cache line
// with loads.
func cpuRelax()

// storeRelease32 writes the word at the start of an atomic.Uint32; this
// fails to compile if that type ever holds more than its uint32.
var _ [4 - unsafe.Sizeof(atomic.Uint32{})]byte
var _ [unsafe.Sizeof(atomic.Uint32{}) - 4]byte
