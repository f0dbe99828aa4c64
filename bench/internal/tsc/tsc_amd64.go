package tsc

// Supported reports whether Read returns real TSC ticks (true on amd64)
// rather than monotonic nanoseconds.
const Supported = true

// Read returns the current time-stamp counter (RDTSC). Like DPDK's
// rte_rdtsc it does not serialise: instructions may be reordered around it
// by a few cycles, which is noise against the thousands of cycles a
// benchmark brackets.
//
//go:noescape
func Read() uint64
