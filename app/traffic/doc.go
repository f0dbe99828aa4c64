// Package traffic holds the packet generator and the receiving sink used by
// `peregrine demo`, `peregrine gen` and the benchmarks.
//
// The generator builds Ethernet/IPv4/UDP frames (addresses in 198.18.0.0/15)
// and stamps each payload with a magic number, a per-flow sequence number and
// the transmit time; the sink reads the stamp back to report rate, loss,
// reordering and one-way latency. Stamp layout, after the 42-byte
// Ethernet+IPv4+UDP headers (all big-endian):
//
//	offset 42  uint16  magic 0x5047 ("PG")
//	offset 44  uint64  sequence number within the flow (flow = UDP source port)
//	offset 52  int64   transmit time, nanoseconds on the sender's clock
//
// so the smallest stamped frame is 60 bytes (64 on the wire with the FCS).
//
// # Receive-side statistics
//
// The sink counts every stamped frame and, per flow, the sequence number
// it expects next (InOrder, Gaps, Late). With SinkOptions.PerFlow it also
// keeps a FlowStats per flow, allocated once: distinct frames,
// duplicates (checked within SeqWindow = 64 numbers of the highest seen,
// one bit each), RFC 4737 reordered frames and their reordering extent
// (from the last four sequence jumps the flow made), loss below the
// highest number seen, and one-way latency min/mean/max. What an in-order
// frame updates (sequence, window, count, latency min/max/sum) is one
// 64-byte line per flow in a dense slice of its own, 640 KB at 10,000
// flows, so the flows' hot state stays in a core's L2; the rest of each
// FlowStats, touched only by reordering, duplicates and jumps, is in
// another. A burst's in-order frames are accounted in one loop that
// touches nothing else per frame; the rest go through the general path.
// `peregrine bench rxflows` measures what this costs per frame against
// the plain sink at 10,000 flows (gen_rx_per_flow_cost_vs_plain, goal at
// most 1.2).
//
// SinkOptions.FlowHistograms adds a FlowLatency histogram per flow (~1
// KiB: 8 log-linear buckets per octave, percentiles within 12.5 %, copied
// out at Stop only), which a frame does not touch: the sink keeps, per
// flow, the bucket of its last latency and how many in a row fell in it
// (4 bytes), and adds that run to the histogram when the flow's latency
// changes bucket and at Stop — a flow whose latency changes bucket on
// every frame costs what recording each frame did. It costs a bucket
// computation and a store per frame at steady latency, more with jitter:
// bench rxflows prints its ratio to plain as
// gen_rx_per_flow_histograms_cost_vs_plain.
//
// All frames' latencies go to one shared hist.HDR (within 1 %), a burst's
// at once (HDR.RecordAll), that the sink closes every SinkOptions.Interval
// on the loop's clock, for export as CSV or JSON lines (IntervalRecord). Latency is the
// receive time minus the transmit stamp: the receive time is read once per
// burst, right after RxBurst, from CLOCK_MONOTONIC (nanosecond
// resolution), so every frame of a burst gets the same receive time and no
// frame goes untimed at any rate. None of it allocates per frame.
//
// # Buffer ownership
//
// The Generator allocates frames from its own mbuf cache and hands them to
// its port with TxBurst; frames the port refuses stay with the generator and
// are sent first on the next poll, so nothing is lost to backpressure. The
// Sink owns what RxBurst gives it and frees every frame through its cache.
// Its per-flow counters and histograms are the loop's; readers get copies
// made under a mutex at each interval's close and at Stop.
// Both stages give their cached frames back to the pool in Stop.
package traffic
