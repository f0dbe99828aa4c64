// Package rpc is `peregrine bench rpc`: request-response round trips of
// 64 B and 1 KiB messages, 1 and 32 in flight on one connection, through
// each door an application could pick, in memory and over an AF_XDP veth
// pair, in one run:
//
//   - raw: core/rt/txn Sends on two endpoints that the measuring goroutine
//     polls itself (no loop, no hand-off): the floor.
//   - raw-loops: the same, each endpoint polled by its own goroutine locked
//     to its thread and pinned to its CPU — the public API's layout, whose
//     packets and ring indexes cross between the CPUs: the baseline of
//     api_vs_raw_cost_1k (the floor is printed beside it). Both use the
//     public package's transport settings (swift.SoftwareParams,
//     rt.SoftwareMinRTO).
//   - api: the public package in-process (peregrine.Host, Endpoint, Conn
//     Send and Recv), each endpoint on its own poll loop.
//   - api-caller: the same with Options.Poll PollCaller: the callers
//     waiting for their ops poll the endpoints themselves. The ratio
//     api_vs_raw_cost_1k takes the faster of the two API rows, over
//     raw-loops.
//   - sidecar: the same calls on an Endpoint from peregrine.Attach, through
//     a host.Server (what `peregrine serve` runs) on the client's endpoint
//     and its shared-memory channel, polled on that endpoint's pinned loop
//     as the appliance polls it; the echo server is in-process on the
//     other endpoint in the api-caller rows' mode (its callers poll it), so
//     the sidecar and api-caller rows differ only in the client's door.
//   - tcp: Go's net, 4-byte length-prefixed messages, one connection; over
//     loopback for the in-memory rows, over the same veth pair (between the
//     kernel's addresses of its two ends) for the veth rows.
//
// Every request carries the time it was sent in its first 8 bytes and the
// echo server sends it back unchanged, so a response's round trip is read
// from the response itself, whichever receive it lands in. With one in
// flight a caller makes blocking Send and Recv calls; with 32, one
// goroutine keeps them outstanding with SendAsync and RecvAsync and reaps
// their completions from a CompletionQueue in batches, and the echo server
// does the same (the way ibverbs and io_uring programs keep a pipeline
// full from one thread, and the way the tcp door's one writer and one
// reader keep theirs). Each row measures Options.Count round trips after a
// tenth of that of warm-up, or Options.RowTime (5 s) after a tenth of that
// when that comes first — a door that is slow on this machine (the
// public API's loop door, whose hand-offs each wake a locked loop thread:
// a few thousand round trips a second) reports its rate over a bounded
// time —:
// ops/s over the wall time of the measured round trips, and their p50,
// p99 and p99.9.
//
// Before the rows, two FIGURE lines give the floor under every door that
// hands work between goroutines: a channel round trip between two
// goroutines, and with the answering one locked to its OS thread as an
// endpoint's loop is (each hand-off then wakes that thread). Before and
// after each round a cache line goes back and forth between the two CPUs
// (benchtopo.PingPong); FIGURE rpc_crosscore_pingpong_ns is the median of
// those round trips, and a ratio taken in several rounds lists each
// round's two beside its value: on two virtual CPUs it moves between
// about 90 and 400 ns from one minute to the next, and the in-memory rows
// move with it, the sidecar's most.
//
// Before the veth rows, FIGURE rpc_veth_afxdp_frame_ceiling_gbps gives
// the ceiling of the path the file transfer takes, measured in the same
// run: the endpoints' two ports opened in an app.Pipeline (the library
// under `peregrine gen` and `gen --rx`), a generator on one sending frames
// of the transport's full size (the pair's MTU plus the Ethernet header)
// from its AF_XDP socket as fast as the socket takes them, a sink on the
// other counting the generated frames that arrive at its AF_XDP socket,
// each loop on its endpoint's CPU with the endpoints' idle policy, for
// CeilingTime (1.5 s; in proportion to a smaller Options.Count, at least
// 100 ms, at most Options.RowTime) after a tenth of that of warm-up. It
// counts, per frame that arrived, the transport payload such a frame
// carries (the segment the transport itself computes for that port and
// pool), so it compares with goodput: the file ratio's detail gives the
// sidecar's share of it. Kernel TCP over the same pair moves 64 KiB GSO
// segments where AF_XDP moves one MTU frame a descriptor: the ceiling
// holds the AF_XDP transport, not kernel TCP. The in-memory rows have no
// such ceiling (no kernel between mem: ports) and print none. The
// ceiling's frames come from its pipeline's own pool (the generator and
// the sink own them as package app/traffic says), and its pool, loops and
// sockets are gone before the first veth row opens the ports.
//
// Who owns a buffer: each caller goroutine owns its request and response
// buffers, an async op's from its start to its completion's reaping (the
// pipelined echo server's, like the raw door's slots, goes from a Recv to
// the Send of the response and back to a Recv); the raw door's region slots are the measuring goroutine's, a
// send slot lent to the transport from its Send to its completion and a
// receive slot from PostRecv to its receive completion; the echo server
// of the raw door sends the response from the receive slot the request
// landed in and posts that slot again once the response's Send completes.
//
// The endpoints' loops are pinned to the first two CPUs the process may
// use (Options.NoPin leaves them free); the callers, the echo servers and
// kernel TCP's goroutines run wherever Go puts them on the same CPUs. A
// pinned loop holds a processor while it works and never yields it (a
// yield on a locked thread wakes threads), so the api door, with two
// pinned loops, runs with GOMAXPROCS of at least 6; every other door with
// one processor per CPU, Go's default, so that its goroutines switch as
// goroutines rather than the OS time-slicing their threads. On fewer
// than four CPUs the api door leaves its loops unpinned, the API's
// default, with Go's default GOMAXPROCS: two pinned busy loops on two
// CPUs leave the callers only what the OS slices off them (330 µs a 1 KiB
// round trip in memory, against 9.4 µs unpinned).
//
// Machnet (a DPDK sidecar with the same two doors' shape) is not run
// beside the rows as a live anchor: it does not build here. Its build
// (docs/INTERNAL.md of microsoft/machnet, April 2026) wants DPDK 23.11 and
// rdma-core's stable-v40 built from their sources (Debian 12 packages
// DPDK 22.11) and six git submodules from GitHub (glog, gflags,
// googletest, google benchmark, HdrHistogram_c, xxHash); this machine
// reaches only Debian's archive and the Go module proxy. Run elsewhere, it
// finds its NIC by the PCIe address of an interface's MAC in sysfs (or
// one in its config), which a veth pair does not have. Its published
// figures (1 KiB RPCs at 753 K-1.0 M a second, p50 18 µs, on bare-metal
// NICs) are quoted in bench/RESULTS.md as a far anchor, not a ratio.
//
// The veth rows create two network namespaces joined by a veth pair
// (198.18.0.0/15) and delete them at the end; they need root and are
// skipped, with a message, without it.
package rpc
