//go:build !amd64 || race

package release

import "sync/atomic"

// Store64 publishes a tail. Without the amd64 assembly (or under the
// race detector, which must see the store to know it orders the slot
// accesses) a sequentially consistent store stands in for a release store.
func Store64(addr *atomic.Uint64, val uint64) { addr.Store(val) }

// CPURelax would be a spin-wait hint; without assembly there is none.
func CPURelax() {}

// StoreCounter64 stores a statistics counter that only the calling goroutine
// writes; without the amd64 build (or under the race detector) it is an
// atomic store.
func StoreCounter64(addr *atomic.Uint64, val uint64) { addr.Store(val) }
