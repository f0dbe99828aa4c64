// Package tsc reads the CPU's time-stamp counter, the clock DPDK's
// autotests (rte_rdtsc) report their cycle figures in, so that peregrine's
// benchmarks can be stated in the same unit on the same machine.
//
// Read is one RDTSC instruction on amd64: no allocation, no lock, no
// syscall, cheap enough to bracket a burst. On other architectures
// Supported is false and Read returns the runtime's monotonic nanoseconds,
// so code still runs and Hz reports about 1e9.
//
// Hz calibrates ticks per second against the monotonic clock; call it once
// per run (it takes about 100 ms), never on a fast path.
//
// The package owns no buffers or handles.
package tsc
