// Package foundation is the `peregrine bench foundation` scenario: it
// measures DPDK's anchors (rte_ring, the cached rte_mempool, testpmd
// io-forwarding over net_null) and peregrine's equivalents in one run on
// this machine, and prints each comparison as a ratio with its goal.
//
// Every figure is measured the same way on both sides:
//   - rings: producer and consumer pinned on two cores moving bulks of 32;
//     each side times its own loop and the two per-element costs are added
//     (what ring_perf_autotest prints), converted to TSC cycles;
//   - pool: one core gets 32 objects in bulks of 32 through its cache and
//     puts them back, per object (mempool_perf_autotest's inner loop);
//   - io-forwarding: one forwarding core, 64-byte frames, two null ports
//     (rx allocates, tx frees) exactly as testpmd with two net_null vdevs;
//     and the same forwarding stage between two in-memory port pairs with
//     frames circulating (no allocation, no copy).
//
// Peregrine's ring and pool loops are bench/perf's RingTwoCoreBulk and
// PoolCachedGetPutBulk; the forwarding runs are in this package.
package foundation
