// Package port defines the Port interface every driver implements, and nothing
// else: protocol and pipeline code depend on this package, never on a driver.
//
// # Buffer ownership
//
// Packets travel as mbuf.Handle values (indexes into one mbuf.Pool).
//
//   - RxBurst fills bufs[:n] with handles the caller now owns; the caller must
//     eventually free them or pass them on (for example to TxBurst).
//   - TxBurst takes ownership of bufs[:n], the first n handles it returns; the
//     caller still owns bufs[n:] and must free them or retry them later.
//
// Neither call blocks, allocates on the Go heap, or returns an error per
// packet: refusals are visible as a short count and as counters in Stats.
package port
