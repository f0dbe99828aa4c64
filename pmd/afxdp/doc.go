// Package afxdp is the AF_XDP port driver: kernel bypass over any Linux
// interface, one AF_XDP socket per queue, registered with pmd as
//
//	afxdp:IFACE?queue=N&queues=M&netns=NAME&mode=auto|native|generic&zerocopy=auto|on|off&udp_port=P&shard_bits=B&ring=2048&fill=RING/2&busy_poll=US&busy_budget=64&prefer_busy=1
//
// # Waking the kernel, busy polling
//
// The sockets are bound with need-wakeup: the kernel processes the fill
// and TX rings on its own while it can, and sets a flag when it needs a
// system call to go on. An empty RxBurst enters the kernel (recvfrom)
// only when the fill ring's flag asks; a TxBurst's frames are sent with
// sendto when the TX ring's does (always, in copy mode, where sendto is
// the copy). So a loop whose port is idle makes no system calls.
//
// busy_poll=US turns on busy polling (SO_BUSY_POLL, SO_BUSY_POLL_BUDGET
// from busy_budget, SO_PREFER_BUSY_POLL unless prefer_busy=0; busy_budget
// alone turns it on with 20 µs, as in DPDK): every empty RxBurst then
// enters the kernel to poll the device's queue itself, once the kernel has
// named the NAPI context that delivers to the socket. Idle, that is one
// system call per poll of the loop; it pays off on NICs whose interrupts
// it replaces (with napi_defer_hard_irqs and gro_flush_timeout set on the
// device). Off by default: a veth names no NAPI context to a copy-mode
// socket, so there the options are applied but poll nothing. A setting
// the kernel refuses fails Open with the option, its value and the errno
// (EPERM: prefer_busy and values above net.core.busy_read need
// CAP_NET_ADMIN).
//
// # The pool is the UMEM
//
// The mbuf pool's arena (one mmap, frame i at byte i*FrameSize) is
// registered as the UMEM with chunk size FrameSize, so the kernel writes
// received frames straight into pool frames and reads sent frames straight
// from them: no copy in peregrine. The UMEM headroom is chosen so that a
// received frame starts at the pool's headroom (the kernel adds its own
// 256-byte XDP_PACKET_HEADROOM on top). Each port registers the whole arena,
// so any frame of the pool, received on any port, can be sent on any port.
// The first socket of a port registers the UMEM; the sockets of its other
// queues share it (XDP_SHARED_UMEM) with fill and completion rings of their
// own.
//
// # XDP program
//
// At open the driver builds an XDP program with cilium/ebpf's asm package
// (no C compiler) that redirects frames into an XSKMAP by rx_queue_index,
// with XDP_PASS as the fallback, so frames of queues without a socket, and
// with udp_port=P every frame that is not UDP to port P (ARP, for one), go
// to the kernel stack. It is attached through a BPF link, which the kernel
// removes if the process dies; native mode is tried first unless mode says
// otherwise. The driver never detaches a program it did not attach: if one
// is there, Open fails with ErrForeignProgram. Ports opened with the same
// Attachments (the pmd registry uses one per Env) share one program per
// interface, each adding its queues' sockets to the map.
//
// # Steering by CID cannot happen in the XDP program
//
// A program may name any socket of the XSKMAP, but the kernel delivers a
// redirected frame only to a socket bound to the device and the queue the
// frame arrived on: net/xdp/xsk.c's receive check (xsk_rcv_check, formerly
// inline in xsk_rcv and xsk_generic_rcv) compares xs->dev with
// xdp->rxq->dev and xs->queue_id with xdp->rxq->queue_index and returns
// -EINVAL on a mismatch, before the frame is copied or queued. The redirect
// then fails and the kernel drops the frame: veth's native XDP counts it
// in the receive queue's drops (ethtool -S: rx_queue_N_drops, not
// rx_queue_N_xdp_redirect), the xdp:xdp_redirect_err tracepoint sees it,
// and the socket's XDP_STATISTICS do not (rx_dropped is raised only on a
// full ring or an oversized frame, after that check).
// TestRedirectToOtherQueueDrops shows it on a two-queue veth. So redirecting a frame to the socket of the queue
// whose shard owns its destination CID would lose the frame, not move it.
// The program therefore redirects every frame to its own queue's socket;
// a frame whose CID names another shard reaches the wrong shard and is
// handed over in software (core/shard, counted as steered_in_software).
// Keeping frames on the right queue is the sender's job (the UDP source
// port chosen so that RSS picks the owner's queue) or the NIC's (a flow
// rule per destination port). With shard_bits=B (and udp_port) the
// program reads each datagram's destination CID and counts, per queue, the
// ones whose shard (the CID's top B bits) is not the queue they arrived on;
// a ConnOpen, which has CID 0, counts by the shard its opener's source CID
// names, the shard core/shard hands it to. Port.Missteered reads the
// counts (after Close, the counts read at Close), and a sharded transport
// reports them beside steered_in_software. A datagram too short for the
// CID, of another version, or to CID 0 without a source CID is delivered
// uncounted.
//
// # Buffer ownership
//
//   - Fill ring: at open and after every RxBurst the port takes free frames
//     from the receive half's mbuf.Cache and puts their offsets on the fill
//     ring, so that the kernel holds Options.FillLevel frames (on the fill
//     ring, being received, or on the RX ring); from then on the kernel
//     owns them.
//   - RxBurst: each RX descriptor names the frame the kernel filled; the
//     port sets its Meta (DataOff = address - frame start, DataLen) and hands
//     the handle to the caller, who owns it from then on.
//   - TxBurst: takes ownership of bufs[:n]; their offset+DataOff and
//     DataLen go on the TX ring and the kernel owns the frames until their
//     addresses come back on the completion ring, when TxBurst frees
//     them to the transmit half's cache (the same call, after its kick, in
//     copy mode; a later one otherwise). The caller keeps bufs[n:].
//     A frame too short or too long for the link is taken and freed, not
//     sent, and counted in Errors.
//   - Close: once the sockets are closed the kernel holds nothing, and the
//     port frees every frame it had lent (a bitmap per queue half records
//     them, including frames the kernel took off the fill ring but never
//     returned).
//
// Each half's cache is the port's own unless UseCaches hands it the cache
// of the goroutine driving the half, which keeps frames cycling through
// one LIFO cache and hot in the CPU cache, as DPDK's per-lcore mempool
// cache does.
//
// Jumbo frames: with a pool whose FrameSize is above a page (8192 or
// 16384), the UMEM is registered in page-sized chunks, the socket is bound
// with XDP_USE_SG and the program loaded with BPF_F_XDP_HAS_FRAGS, so a
// frame larger than a chunk crosses the rings as several descriptors
// (multi-buffer). TxBurst writes one descriptor per chunk a frame touches;
// the completion of its first chunk frees it. Only each pool frame's first
// chunk is lent for receiving: RxBurst copies a frame's later pieces behind
// its first one, in the first piece's pool frame, and frees their frames,
// so the caller still gets one contiguous frame (multibuf.go). One queue
// per port in this mode.
//
// The receive and transmit halves of a queue keep separate rings, caches
// and records, so one goroutine may receive on a queue while another sends
// on it; each half must be driven by one goroutine at a time, and all must
// have stopped before Close.
//
// # Privileges and namespaces
//
// Opening a port needs CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK
// (or root). With Options.Namespace the socket creation, bind and attach run
// inside that network namespace; the sockets stay there and may be used
// from any thread.
package afxdp
