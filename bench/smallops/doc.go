// Package smallops is the `peregrine bench smallops` scenario: how many
// 64 B operations a transport endpoint's poll loop completes per second,
// with as many in flight as the window allows.
//
// Each row runs an initiator and a target, each a transaction endpoint
// on a pinned, busy-polling loop of its own (two cores), for a measured
// window after a warm-up, and counts the operations completed in it:
//
//	mem_push64        64 B pushes over an in-memory port pair
//	mem_send64        64 B two-sided Sends (delivery index) over the same
//	afxdp_push64      64 B pushes over an AF_XDP veth pair between two
//	                  namespaces (root; skipped otherwise)
//	afxdp_send64      64 B Sends over the same
//	fabric1_push64    64 B pushes in memory through the fabric emulator at
//	                  1 % loss each way (the fabric polled on the target's loop)
//	fabric1_send64    64 B Sends through the same
//
// The in-memory push row runs once more with both endpoints on one loop
// pinned to one CPU (smallops_mem_push64_one_loop_ops_per_s and
// _ops_per_cpu_s): with no exchange between two cores in it, its rate is
// the CPU a push costs both ends together, apart from the cross-core
// figures of the two-core rows.
//
// Every row prints its rate, the operations per CPU-second of the busier
// endpoint loop's thread (what the loop got of its core), the
// retransmissions of both endpoints, the frames the fabric dropped, the
// retransmit timeouts the transport found spurious (the packets were
// waiting, not lost), the timeouts that asked the peer for an ACK before
// resending (a timeout that knows of no hole) and, beside them, how often each loop was off its
// CPU for longer than the transport's RTO floor (a stage on each loop
// measures the gaps between its iterations): a stall of the target's
// loop is a time no ACK comes, so a row with timeouts and no loss shows
// the stalls that caused them.
// The same run measures the mem-port io forwarding rate (two pinned
// forwarders moving handles, no copy): a push is a data packet and its
// acknowledgement, so smallops_push64_vs_mem_forwarding divides the push
// rate by the forwarding rate of two packets. It also measures the round
// trip of one cache line between the two loops' CPUs
// (smallops_crosscore_pingpong_ns: two pinned threads handing an atomic
// counter back and forth), the machine's floor under every exchange of
// the two-core rows.
//
// Buffers: each row's pipelines own their pool, ports and endpoints; the
// initiator's frames go to the port (mem: the ring then the peer's
// endpoint; afxdp: the UMEM and the kernel; fabric: its delay line) and
// are freed by whoever holds them last. Every row stops its pipelines
// (pool checked for leaks) before the next one opens its own.
package smallops
