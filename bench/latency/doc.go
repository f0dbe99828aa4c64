// Package latency is the `peregrine bench latency` scenario: how long a
// push takes there and back on real ports, one in flight, against the
// kernel's own UDP and TCP over the same veth pair in the same run.
//
// Two namespaces joined by one veth pair (GRO on, MTU 1500, addresses in
// 198.18.0.0/15) hold an initiator and a target, each a pipeline of one
// pinned poll loop (the initiator on the first allowed CPU, the target on
// the second) with a transaction endpoint on an afxdp or afpacket port.
// The initiator keeps one push of 64 B or 4 KiB outstanding on one
// connection and records each one's time from post to completion. Rows:
//
//	afxdp           AF_XDP, the default idle policy (adaptive)
//	afxdp_busy      AF_XDP, busy-polling loops
//	afxdp_busypoll  AF_XDP, busy loops and socket busy polling (busy_poll=20)
//	afpacket        AF_PACKET (TPACKET_V2 ring), the default idle policy
//	afpacket_busy   AF_PACKET, busy loops
//	afpacket_v3     AF_PACKET with the TPACKET_V3 ring (ring=v3): the block wait
//	kernel_udp      sockperf ping-pong against sockperf server (full round trip)
//	kernel_tcp      a Go net ping-pong over TCP of the same size
//
// The kernel rows use the veth ends' own addresses; the transport
// endpoints' addresses are others, which the kernel drops rather than
// answers. Every row's p50, p99 and p99.9 are printed as FIGURE lines, the
// idle CPU share of a target's loop under each idle policy too, and the
// RATIO lines compare AF_XDP with kernel UDP and AF_PACKET with AF_XDP at
// 64 B under the default idle policy.
//
// Buffers: each side's pipeline owns its pool, ports and endpoint, and
// closes them (pool checked for leaks) before the next row opens its own.
package latency
