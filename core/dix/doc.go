// Package dix is delivery-index placement (docs/sends.md) as pure logic: how a
// sender encodes which receive work queue element (WQE) a two-sided Send
// belongs to, how a receiver decodes it, and the receiver's bookkeeping of
// its receive queue — posted WQEs, the consumer pointer, the special
// receive queue elements of transactions that arrived out of order. It
// knows nothing of packets, buffers or connections: core/rt/txn carries
// the index in its Send packets and places their bytes; this package only
// says where.
//
// # The problem
//
// A Send does not name its destination: the receiver takes the next
// posted receive WQE, in posting order, as verbs' RC queue pairs do. When
// transactions arrive out of order (sprayed paths, loss), a receiver that
// only knows the order must hold the packets of every transaction behind
// a late one until the late one is placed (the baseline, Kind None). A
// delivery index in the packets names the WQE, so every packet is placed
// on arrival into the buffer it belongs in.
//
// # Index kinds
//
// The k-th Send of a connection (k counts from 0) belongs in the k-th WQE
// posted on that connection's receive queue. The sender carries k as:
//
//   - Absolute: the WQE's slot in the receive queue's ring, k mod Depth
//     (a host queue index, as the WQE index of a verbs CQE). Both ends
//     must agree on Depth, a power of two, and nothing else makes them:
//     so every packet carrying the index carries log2(Depth) beside it
//     (DepthTag), and a receiver whose queue has another depth refuses
//     the packet (DepthMismatch) instead of placing it in the WQE the
//     index would name in its ring.
//   - Relative: k minus the sender's base, the oldest Send it has not seen
//     acknowledged (so the number stays small and few bits suffice). The
//     receiver cannot know which acknowledgements reached the sender, so
//     the packet also carries the base's low 8 bits (its tag); the
//     receiver recovers the base as the number at or below its own head
//     with that tag.
//   - FreeRunning: k modulo 2^Width, a per-connection Send counter that
//     wraps at the field width.
//   - None: the baseline; the packet carries k in full only so that the
//     receiver knows the order, and the receiver places strictly in order.
//
// Width is 8, 16, 24 or 32 bits. The receiver decodes every kind against
// its head H (the oldest WQE neither completed nor aborted): the sender
// never has a Send outstanding more than Config.Window() past its base,
// and its base never passes H, so k lies in a window around H that the
// index identifies uniquely (serial-number arithmetic). Wrap is therefore
// harmless at any width: the 1,000,000-transaction wrap test runs an
// 8-bit relative index through it with reordering and lost ACKs.
//
// # Carrying
//
// The index travels in every packet (CarryEvery), or only until the
// transaction's first packet is acknowledged (CarryUntilAcked): by then
// the receiver has bound the transaction to its WQE and finds later
// packets by their request sequence number. It travels in a dedicated
// header field (the Send's SSN field, which a Send does not otherwise
// use; a relative index puts its base tag in the top byte, so Width is
// at most 24 there, and an absolute index its depth tag, so Depth is at
// most 2^24) or in the Placement extension (wire.ExtPlacement; the tag
// then goes in the SSN field's top byte). A descriptor byte (Desc) in
// every Send packet says which: kind, width, where, and whether this
// packet omits the index.
//
// So everything the two ends must agree on travels with the index and is
// checked by the receiver: the kind, width and place in the descriptor
// (the receiver has no setting of its own for them: it decodes whatever
// the descriptor says), the absolute depth in the tag (checked against
// the receiver's queue). The carrying mode needs no agreement (a packet
// that omits the index says so, and is found by its request sequence
// number), nor does Outstanding (the sender's own bound, within the
// kind's window).
//
// # The receiver
//
// Queue keeps the receive queue's numbers: posted (P), head (H) and the
// consumer pointer (C, the next expected transaction). A packet whose
// transaction is the expected one binds directly; any other binds through
// an element of the special receive queue, created on the first arriving
// packet of that transaction (any of its packets), removed when it
// completes; C jumps past the highest index bound, and a transaction that
// arrives late still finds its WQE. The element table is bounded
// (Options.Elements): a full table refuses the packet for now (the caller
// answers RNR), never corrupts. An index that names a WQE already
// consumed is stale (or forged) and is dropped by the caller; one that
// names a WQE not yet posted gets RNR; one beyond the queue is counted.
//
// Nothing here allocates after New; every call is O(1) except Queue's
// head advance, amortised O(1) per WQE.
package dix
