// Package null is a source and sink port like DPDK's net_null: RxBurst hands
// out freshly allocated frames of a fixed length and TxBurst frees whatever
// it is given. It measures the cost of the port layer and of forwarding
// loops with no device in the way, and is what peregrine compares with
// dpdk-testpmd's io forwarding over two net_null vdevs.
//
// Spec: null:[NAME][?queues=N&size=N&fill=1]. size is the data length of
// received frames (default 64); fill=1 also writes a fixed Ethernet frame
// into them (by default their bytes are whatever the frame held before, as
// with net_null's default no-copy mode).
//
// # Buffer ownership
//
// RxBurst allocates bufs[:n] from a per-queue mbuf.Cache; the caller owns
// them. TxBurst takes every handle it is given and frees it at once through
// another per-queue cache, so it always returns len(bufs). Close flushes the
// caches back to the pool. Options.Cache replaces all of them with one cache
// the caller owns, shared like a DPDK lcore's mempool cache (faster when one
// goroutine forwards between null ports: freed frames are reused hot).
//
// Close must not run concurrently with bursts; the RX side and the TX side
// of each queue must each be driven by one goroutine at a time.
package null
