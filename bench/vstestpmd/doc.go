// Package vstestpmd compares peregrine's AF_XDP and AF_PACKET ports with
// dpdk-testpmd's (Debian DPDK 22.11, net_af_xdp and net_af_packet) on the
// same veth topology in one run, and prints one ratio per comparison in the
// bench/report format:
//
//	RATIO <name> <peregrine ÷ testpmd> goal >= 1 <PASS|FAIL>
//	...
//	BENCH-SUMMARY pass=<n> fail=<m>
//
// # Topology and roles
//
// Run builds gen ↔ fwd ↔ sink (netns.ThreeNS: three namespaces, two veth
// pairs, GRO on, MTU 1504 so that 1518-byte frames fit every path,
// addresses in 198.18.0.0/15) and deletes it on return, also on error or
// when ctx ends. The device under test — a peregrine poll loop or testpmd —
// always runs in the fwd namespace on CPU 1 (testpmd: -l 0,1, main lcore 0,
// one forwarding lcore 1; peregrine: one lcore.Loop pinned to CPU 1,
// busy-polling). Traffic comes from bench/kgen's in-kernel generator on the
// gen end, pinned to CPU 0; the sink end runs kgen's counting XDP drop
// program for the whole run. For each comparison:
//
//   - rxonly: the generator floods gen → fwd; the rate is what the port
//     under test delivered to its application (peregrine: the forwarder's
//     received count; testpmd: accumulated RX-packets).
//   - txonly: the tool sends on fwd → sink; the rate is what the sink
//     counted, so neither tool's own accounting is trusted.
//   - io: the generator floods gen → fwd, the tool forwards fwd → sink
//     (both ways, as testpmd's io mode polls both streams); the rate is
//     what the sink counted.
//
// Both sides run as configured by default, except that peregrine's ports
// get the two settings DPDK's PMDs apply by default (afxdp busy_budget=64 as
// net_af_xdp's busy_budget, afpacket qdisc_bypass=1 as net_af_packet's),
// and the pool is sized to what the ports hold (8192 frames for one port,
// 16384 for two). The ports use the loop's mbuf cache (UseCaches): an afxdp
// port stocks its fill ring from it and frees completed frames to it, an
// afpacket port allocates received mbufs from it and frees transmitted ones
// to it, so frames cycle through one LIFO stack on the forwarding CPU.
//
// Once built, the topology's fwd-side interfaces get GRO turned off and on
// again: netns turns it on before the links are up, which on this kernel
// leaves the gen end unable to redirect into fwd's until an XDP program has
// been attached there once, so the AF_PACKET comparisons received nothing
// unless an AF_XDP comparison ran before them.
//
// Each rate is packets over the time from starting forwarding to stopping
// it (testpmd: from sending "start" to sending "stop"). Comparisons run as
// alternating rounds (peregrine, testpmd, peregrine, testpmd, …) and the
// ratio is of the medians, because the machine is shared and noisy.
//
// Each measurement also records how long the generator's and the device
// under test's pinned threads (peregrine's loop and kgen's thread, or
// testpmd's rte-worker-1 and kgen's) waited for their CPUs while runnable
// (/proc/PID/task/TID/schedstat): time other processes took from them.
// It is printed with each round ("CPU taken by others"), and a round in
// which it exceeded 5 % on either side is measured again, both sides, up
// to twice (unless Options.KeepDisturbed), so that a compile job landing
// on CPU 1 for a few seconds does not decide a ratio.
//
// # Profiling and tuning
//
// With PEREGRINE_VS_PROFILE=DIR (ProfileEnv) every measurement window is
// recorded: `perf record -g` of the device-under-test CPU and `perf stat`
// counts of the socket syscalls made on it, for both sides, and a Go CPU
// profile of peregrine's. TestPeregrineAB (ab_perf_test.go, run with
// PEREGRINE_VS_AB=ROW:SIZE:ROUNDS:DURATION:VARIANT|...) measures one
// comparison under several driver settings in alternating rounds, testpmd
// optionally among them; it is how the drivers' defaults were chosen.
//
// Heap allocations are counted process-wide (runtime.MemStats.Mallocs)
// while peregrine's loop forwards, and divided by the packets it moved; the
// kernel generator allocates nothing per batch, so the figure is the
// forwarding loop's.
//
// # Ownership
//
// Each peregrine measurement opens its own mbuf pool and ports through the
// pmd registry and closes them before the next; frames belong to the ports
// (fill and TX rings), the loop's stages and one per-loop cache, and the
// pool is checked for leaks at the end. Handles never leave a measurement.
package vstestpmd
