// Package afpacket is a port driver over Linux AF_PACKET sockets with
// memory-mapped rings, the analogue of DPDK's net_af_packet. It reaches any
// interface the kernel has, veth included, at the cost of one copy per
// packet in each direction; use pmd/afxdp where zero copy matters.
//
// Each queue is one socket bound to the interface by index (SOCK_RAW,
// ETH_P_ALL) with a receive ring and a transmit ring of fixed-size slots,
// both mmap'd. With more than one queue the sockets join
// one PACKET_FANOUT group, so the kernel spreads received flows over them
// (by flow hash unless Options.Fanout says otherwise). The sockets are
// created inside Options.Netns when it is set and stay in that namespace.
//
// RX comes in two layouts (Options.Ring, spec ring=v2|v3):
//
//   - TPACKET_V2 (the default): one frame per slot. The kernel hands each
//     slot over as soon as it has written the frame, and RxBurst returns
//     the slot the moment it has copied it out, so a lone frame waits for
//     nothing: a request/response transport sees the link's latency.
//   - TPACKET_V3: the kernel packs frames into blocks and hands a whole
//     block over when it is full or Options.BlockTimeout (1 ms) after its
//     first frame; RxBurst returns the block after its last frame. Fewer
//     handovers per frame suit capture at high rates, but at low rates
//     every frame waits up to the timeout, at every hop that reads with
//     it: over a fabric in the middle, a round trip waited for four.
//
// Either way RxBurst copies each frame into an mbuf from the queue's
// receive Cache. A frame that does not fit an mbuf, or arrived truncated
// (larger than a V2 slot), is dropped and counted in RxDropped; the
// kernel's own drops (ring full) are folded into RxDropped by Stats. Slots
// left to their default size hold a frame of the interface's MTU, jumbo
// frames included.
//
// A veth delivers frames to AF_PACKET sockets only while GRO is on at the
// receiving end (`ethtool -K IFACE gro on`; netns.VethOptions.GRO does it).
//
// Callers that would rather sleep than spin on an idle port use Wait or
// WaitRx, which block in poll(2) until a frame (V2) or block (V3) is
// handed over.
//
// TX: TxBurst copies each mbuf into the next free slot of the transmit ring
// (Options.TxSlots slots, few enough to stay in the CPU cache), marks it
// for sending and frees the mbuf, then makes one non-blocking sendto per
// burst (or per Options.TxBatch frames of full bursts) to have the kernel
// send the marked slots. A full ring ends the burst early. Each slot starts
// with a virtio-net header (the socket has PACKET_VNET_HDR) whose hdr_len
// is the whole frame: the kernel then copies the frame into the socket
// buffer's linear area. Without it the kernel copies only the Ethernet
// header and points at the rest of the slot as zero-copy page fragments,
// which every veth crossing into another namespace copies again into
// freshly allocated pages (skb_copy_ubufs): measured forwarding over veth,
// the linear frames made 27 % more frames per second at 64 and 1518 bytes.
// Received frames get a virtio-net header too, in front of the frame,
// where it is not read.
//
// # Ownership
//
// RxBurst hands the caller mbufs it now owns; nothing in the receive ring is
// ever lent out. TxBurst owns the mbufs it accepted (it frees them at once,
// after copying) and leaves the rest with the caller. RxBurst allocates from,
// and TxBurst frees to, the queue's caches: the port's own, or with
// UseCaches the cache of the goroutine driving the queue, so that a
// forwarder's frames cycle through one LIFO stack on its CPU. A port holds
// no mbufs between calls, so Close has none to return; it flushes its own
// caches, unmaps the rings and closes the sockets. Close must not run while another
// goroutine is inside RxBurst or TxBurst of the same port.
package afpacket
