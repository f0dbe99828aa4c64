// Package release publishes a value written by a single owner goroutine to
// readers on other cores with release ordering only — no full fence.
//
// Rings publish their tails this way and per-lcore caches their counters:
// on amd64 a plain MOV already has release order (x86-TSO keeps stores in
// order), while atomic.Uint64.Store compiles to XCHG, a full fence that
// waits for the store buffer to drain. Readers use atomic.Uint64.Load.
// Under the race detector, and on other architectures, Store64 is
// atomic.Uint64.Store so the detector sees the ordering.
//
// This package imports nothing of ours, so rings and cam (which import
// nothing above them) may use it.
package release
