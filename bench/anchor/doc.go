// Package anchor measures DPDK's own figures on this machine — the
// "anchors" that `peregrine bench foundation` divides peregrine's figures
// by — by running Debian's DPDK 22.11 tools and parsing what they print:
//
//   - RingPerf: rte_ring enqueue+dequeue cost between two lcores
//     (dpdk-test ring_perf_autotest), in TSC cycles per element;
//   - MempoolPerf: cached rte_mempool get+put cost on one lcore
//     (bench/dpdk/mempool_bench, built on first use), in ns per object;
//   - TestpmdNullIOFwd: dpdk-testpmd io forwarding between two net_null
//     ports on one forwarding lcore, in Mpps;
//   - Testpmd: the general driver behind it — any --vdev ports (net_af_xdp,
//     net_af_packet, net_null), any forwarding mode, optionally inside a
//     network namespace — returning the accumulated RX/TX packet counts and
//     the forwarding time (`peregrine bench vs-testpmd` runs it on veth).
//
// Each runs its tool as a child process in its own process group; when the
// context ends the whole group is killed. DPDK runs with --no-huge,
// --no-pci and --no-shconf, so no hugepages, devices or shared files are
// needed and two runs cannot collide on /var/run/dpdk. ErrNotInstalled
// (errors.Is) means a tool is missing: run hack/install-deps.sh.
//
// Figures are only comparable within one run on one machine; bench/ANCHORS.md
// records the commands and the figures measured when they were set up.
//
// The package owns no buffers or handles; every function returns plain
// values and the tool's raw output for the record.
package anchor
