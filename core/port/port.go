package port

import (
	"net"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// Port moves bursts of mbuf handles in and out of one device. A queue index
// selects one of Info().Queues independent queue pairs; a given queue must be
// driven by one goroutine at a time (as in DPDK), different queues may be
// driven concurrently.
type Port interface {
	// RxBurst receives up to len(bufs) packets from queue into bufs and
	// returns how many it stored. The caller owns bufs[:n].
	RxBurst(queue int, bufs []mbuf.Handle) int
	// TxBurst transmits up to len(bufs) packets on queue and returns how many
	// it accepted; it owns bufs[:n], the caller keeps bufs[n:]. A port may
	// hold accepted packets of full bursts until FlushTx (see TxFlusher).
	TxBurst(queue int, bufs []mbuf.Handle) int
	// Info describes the port; it does not change after open.
	Info() Info
	// Stats returns a snapshot of the port's counters. It may be called from
	// any goroutine while the port is running.
	Stats() Stats
	// Close stops the port and releases its resources, returning any packets
	// it still holds to their pool. Close is idempotent.
	Close() error
}

// TxFlusher is implemented by ports that may hold frames TxBurst accepted
// for a short while, to send several bursts with one system call (AF_XDP in
// copy mode, while its caller hands it full bursts). TxFlush sends what
// queue holds now. Such a port sends them anyway on the next TxBurst that
// is not a full burst (fewer than FullBurst frames), so a sender below saturation
// never waits; a sender that stops after full bursts calls FlushTx, which
// does nothing for other ports. Every stage that transmits does so when it
// finds nothing to send and when it stops.
type TxFlusher interface {
	TxFlush(queue int)
}

// FullBurst is the burst size (DPDK's default) from which a TxBurst counts
// as full: its sender may have more at once, and a TxFlusher may hold it.
const FullBurst = 32

// FlushTx calls p.TxFlush(queue) when p is a TxFlusher.
func FlushTx(p Port, queue int) {
	if f, ok := p.(TxFlusher); ok {
		f.TxFlush(queue)
	}
}

// RxWaiter is implemented by ports whose receive queues are kernel
// sockets (AF_XDP, AF_PACKET): a poll loop with nothing to do may sleep in
// poll(2) on RxWaitFD and wake when a frame arrives, instead of when its
// sleep ends. The descriptor stays the port's: valid until Close.
type RxWaiter interface {
	// RxWaitFD returns a descriptor poll(2) reports readable (POLLIN)
	// while queue has frames to receive, or -1 if it has none.
	RxWaitFD(queue int) int
}

// RxWaitFD returns p.RxWaitFD(queue) when p is an RxWaiter, else -1.
func RxWaitFD(p Port, queue int) int {
	if w, ok := p.(RxWaiter); ok {
		return w.RxWaitFD(queue)
	}
	return -1
}

// RxBeller is implemented by ports whose receive queues software fills
// (mem: the peer's transmit enqueues on them): no descriptor tells a
// sleeping poll loop of a frame, so the loop hands each queue it consumes
// its ring, which the producer calls after it enqueued frames for the
// queue. ring must be cheap while the loop is awake (an atomic load) and
// callable from any goroutine.
type RxBeller interface {
	SetRxBell(queue int, ring func())
}

// SetRxBell gives queue of p the ring when p is an RxBeller, and reports
// whether it was.
func SetRxBell(p Port, queue int, ring func()) bool {
	if b, ok := p.(RxBeller); ok {
		b.SetRxBell(queue, ring)
		return true
	}
	return false
}

// Capability is a bit set of optional port features.
type Capability uint32

const (
	// CapZeroCopy: received frames are placed in pool memory by the device,
	// with no copy in our code.
	CapZeroCopy Capability = 1 << iota
	// CapRxTimestamp: RxBurst stamps Meta.RxTime.
	CapRxTimestamp
	// CapPaced: the port releases packets at a recorded or configured time
	// rather than as fast as possible.
	CapPaced
)

// Info describes a port.
type Info struct {
	Name   string // the spec the port was opened with
	Driver string // the driver's registered name
	Queues int    // number of RX/TX queue pairs
	MTU    int    // largest L3 payload the port carries
	MAC    net.HardwareAddr
	Caps   Capability
}

// Stats are a port's counters, summed over its queues. All counters only grow.
type Stats struct {
	RxPackets uint64
	RxBytes   uint64
	TxPackets uint64
	TxBytes   uint64
	// RxDropped counts packets the device saw but could not deliver (ring
	// full, no buffer in the pool, malformed frame).
	RxDropped uint64
	// TxDropped counts packets refused by TxBurst because the device queue
	// was full (they were returned to the caller, not freed).
	TxDropped uint64
	// RxNoBuf counts receive attempts that found the pool empty.
	RxNoBuf uint64
	// Errors counts other failures (I/O errors of a file port, for example).
	Errors uint64
	// Queues holds per-queue counters, indexed by queue.
	Queues []QueueStats
}

// QueueStats are the counters of one queue.
type QueueStats struct {
	RxPackets, RxBytes, TxPackets, TxBytes, RxDropped, TxDropped uint64
}
