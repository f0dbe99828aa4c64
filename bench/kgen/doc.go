// Package kgen is an in-kernel traffic generator and sink for veth
// benchmarks, so that the device under test — a peregrine port or
// dpdk-testpmd — is the only thing measured.
//
// The generator (Start) is an XDP program that redirects every frame to one
// interface, run with BPF_PROG_TEST_RUN in live-frame mode: the kernel builds
// each frame from a template and transmits it through the interface's
// ndo_xdp_xmit, so no socket, copy or ring of ours is involved and the
// generator outpaces any AF_XDP or AF_PACKET sender. Its loop makes one raw
// bpf(2) call per batch and allocates nothing, so it does not disturb heap
// allocation counts taken while it runs. While it runs, the program is also
// attached (generic mode) to the generator namespace's loopback interface,
// where it sees no frame: that keeps it installed in the kernel's XDP
// dispatcher, so a call does not install and remove it, each time waiting
// for an RCU grace period with the generator's CPU idle — a wait whose
// length, and so the offered load, depended on the device under test.
//
// The sinks (AttachDrop, AttachSink) are native XDP programs that drop every
// frame at the receiving interface; AttachSink also counts them in a per-CPU
// map, which is how a benchmark learns what arrived without trusting the
// sender's own counters.
//
// # Ownership
//
// Start copies the frame template; the caller keeps its slice. The kernel
// owns each generated frame from the moment it is built to the moment the
// receiving side frees it. Programs and maps are owned by the Gen or Sink
// and released by Stop, the detach function or Detach; links are BPF links,
// so the kernel removes a sink if the process dies.
//
// Everything needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN to enter
// namespaces). Frames built by UDPFrame use only addresses in
// 198.18.0.0/15.
package kgen
