//go:build !amd64

package tsc

import (
	_ "unsafe" // for go:linkname
)

// Supported reports whether Read returns real TSC ticks; on this
// architecture it returns monotonic nanoseconds instead.
const Supported = false

// Read returns the runtime's monotonic clock in nanoseconds, standing in for
// the TSC on architectures without an RDTSC implementation here.
func Read() uint64 {
	return uint64(nanotime())
}

// nanotime is the runtime's monotonic clock: no allocation, unlike
// time.Now, and no package-level reference instant to keep.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
