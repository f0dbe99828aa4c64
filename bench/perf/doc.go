// Package perf holds the measurement loops the bench scenarios and the
// product packages' Go benchmarks time: each drives one product package
// through its public API and returns a figure, nothing else. The scenarios
// (bench/foundation, bench/transportcore) decide what to compare a figure
// with and print the ratio; this package only measures.
//
// One file per product package, named after it:
//
//   - rings.go: RingTwoCoreBulk, a producer and a consumer goroutine on two
//     (optionally pinned) cores moving bulks, like DPDK's ring_perf_autotest;
//   - pool.go: PoolCachedGetPutBulk, get and put in bulks through one
//     mbuf.Cache, like mempool_perf_autotest's inner loop;
//   - cam.go: CAMVsMap and CAMBurstVsMap, a cam.Table against map[K]uint32
//     on the same pre-generated keys in the same order, and the workloads
//     and loops cam's own benchmarks run (cam/cam_bench_test.go);
//   - rxcost.go: RxCost, the rt.Endpoint receive path per packet on a port
//     that hands it prepared frames, and the header-reading floor under it;
//   - sim.go: SimPacketsPerSecond, transport packets one simulation runs per
//     second of wall time.
//
// These were exported from the product packages once; they moved
// here so that no product package carries a harness, and kept their loops
// line for line so the figures in bench/RESULTS.md stay comparable.
//
// # Ownership
//
// Every function makes the pools, rings, tables and endpoints it measures
// and releases them before it returns (RingTwoCoreBulk's pinned threads are
// discarded by the runtime when their goroutines exit);
// PoolCachedGetPutBulk borrows the caller's pool and returns every frame it
// took. None is for a packet path: they allocate while setting up and are
// meant for a quiet machine.
package perf
