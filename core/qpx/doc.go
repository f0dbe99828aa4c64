// Package qpx is global-to-local queue pair translation (docs/qp-translation.md): a
// CAM from 24-bit global QP numbers, the names hosts and the wire use, to
// a few local QP contexts (Options.Slots, default 64), the records the
// packet builder reads to generate a header and the packet disassembler
// reads to check one.
//
//	t, _ := qpx.New(qpx.Options{Slots: 64})
//	qpn, local, err := t.Open(qpx.Context{DestQPN: peer, NextPSN: 0, PKey: 0xffff, Access: qpx.AccessRemoteWrite})
//	…
//	if l, ok := t.Translate(bth.DestQP); ok { ctx := t.Context(l); … } // RX: dropped and counted if not
//	…
//	t.Close(qpn) // the slot is free at once; qpn is retired
//
// # Retire, don't wait
//
// InfiniBand holds a closed QP in Time-Wait so that packets still in
// flight for it cannot reach a new QP that reuses its number, which keeps
// a scarce context idle for a network-dependent time. Here a closed QP's
// local slot is free at once, and its global number is retired instead:
// Open hands out numbers from a counter that runs through the whole
// 24-bit space (FirstQPN to LastQPN: QP 0 and 1 are IBA's SMI and GSI, and
// 0xFFFFFF is the multicast QPN) before it comes back to any number, and
// skips a number still live. A stale packet carries a retired number, which
// matches no CAM entry: Translate drops it and counts it as retired (a
// number the counter has passed) or unknown (one never handed out, or a
// reserved one). A number is therefore reused only after 2^24 - 3 other
// opens: at a million opens a second, 16 seconds, far beyond any packet
// lifetime the transport allows (its retransmissions give up long
// before).
//
// When all slots are live, Open fails with ErrFull: the caller backs off
// or closes a QP. A live QP is never evicted.
//
// Bind opens a QP under a number the caller chooses (a peer that learned
// it out of band, a capture being replayed); it refuses a live number and
// does not move the counter, so it is for configuration, not for churn.
//
// # Contexts
//
// A Context holds what TX header generation needs (the peer's QPN, the
// next PSN, addresses, the P_Key) and what RX checking needs (the
// expected PSN, the access the QP grants); the slot's validity is the CAM
// entry itself. Payload never lives here: Ref is the owner's reference to
// the QP's memory (an mbuf handle, a region key), never dereferenced by
// this package. Context returns a pointer into the table's array, valid
// until the QP closes.
//
// # The CAM and its hint
//
// The CAM is a cam.Table keyed by the 24-bit number; its entry index is
// the local context number, so the CAM is the translation. In front of it
// sits a direct-mapped hint of 4×Slots words (a one-way CAM, as a TLB
// fronts a page table): the entry of a number's low bits remembers the
// last QP opened there. A translation that finds its own number there
// costs one load and no hash; any other asks the CAM, which alone decides
// (a collision only costs the CAM's lookup; a retired number is never in
// the hint, since Close clears its entry).
//
// # Cost and ownership
//
// New allocates everything; Open, Bind, Close, Translate and the PSN
// checks allocate nothing (only a refusal builds its error message). A Table belongs to one goroutine (one lcore);
// its counters are plain integers that Stats reads on that goroutine —
// a stage that wants them read elsewhere copies them (its own publish per
// burst). The package moves no packets and owns no buffers.
package qpx
