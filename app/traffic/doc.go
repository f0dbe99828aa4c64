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
// # Buffer ownership
//
// The Generator allocates frames from its own mbuf cache and hands them to
// its port with TxBurst; frames the port refuses stay with the generator and
// are sent first on the next poll, so nothing is lost to backpressure. The
// Sink owns what RxBurst gives it and frees every frame through its cache.
// Both stages give their cached frames back to the pool in Stop.
package traffic
