// Package mem is the in-memory port driver: a pair of ports joined back to
// back by lock-free SPSC rings of mbuf handles, with no copy. Simulations and
// tests wire pipelines and appliances together with mem pairs.
//
// Spec: mem:PAIR/END[?queues=N&size=N&mtu=N&steer=queue|hash], END being 0
// or 1. The first
// open of either end creates pair PAIR in the Env; the other end then
// connects to it. Each end may be open once at a time; once both ends are
// closed the name is free again.
//
// # Buffer ownership
//
// TxBurst on one end enqueues handles into queue q's ring towards the other
// end and owns the ones it accepted: they now belong to the ring, and the
// sender must not touch them again. The peer's RxBurst on queue q dequeues
// them and the caller owns them from then on. Handles TxBurst refuses (ring
// full, peer closed) stay the caller's; they are counted as TxDropped.
//
// Close returns every handle still in the closing end's receive rings to the
// pool. Handles a peer enqueued after that (it raced with Close) are freed
// when the second end closes, so once both ends are closed the pair holds no
// handle. Close must not run concurrently with bursts on the same port; the
// peer may keep running.
//
// # Waking a sleeping consumer
//
// A receive queue has no descriptor a sleeping poll loop could wait on.
// Instead the loop that consumes it may hand it a ring (SetRxBell,
// port.RxBeller; a Doorbell lcore does, through its stages): the peer's
// TxBurst calls it after it enqueued frames for the queue. While the
// loop is awake the ring is an atomic load, so a burst pays next to
// nothing for it.
//
// # Queues and steering
//
// With steer=queue (the default) a packet sent on queue q arrives on the
// peer's queue q: the sender chooses, as with a software hand-off. With
// steer=hash the pair behaves like a NIC doing RSS: each packet arrives on
// RSSQueue(RSSHash(frame), queues), the Toeplitz hash under the default
// key of the IPv4/IPv6 addresses and, for unfragmented TCP and UDP, ports,
// mapped through a 128-entry round-robin redirection table; other frames
// go to queue 0. That is the hash most NICs and DPDK use by default, so a
// sender can choose a UDP source port that lands a flow on a given queue
// (as eRPC does) and test the choice here. The hash is taken on the
// sending side, per packet, when TxBurst enqueues it; every sending queue
// has its own SPSC ring to every receiving queue (queues² rings per
// direction, hence at most 64 queues), so no ring ever has two producers.
// A full ring stops the burst at that packet.
//
// Each queue's RX and each queue's TX must be driven by one goroutine at a
// time; different queues and the two ends may run concurrently.
package mem
