// Package ioi is the decision logic of IOI forwarding (docs/ioi.md: "in
// order, out of order, in order"): which packets of a large message are
// sent in order on the ordered path and which are sprayed, the counters
// that decide it, and the receiver's in-sequence check. It is pure logic:
// no packets, no I/O, no allocation; the transaction layer (core/rt/txn)
// asks it before each data packet and tells it of each acknowledgement.
//
// # The sender
//
// A message is cut into packets. Its packets go
//
//  1. in order (the head: Phase Head, the IOIInOrder flag set, an in-order
//     sequence number, the connection's own UDP source port so the flow
//     hash keeps them on one path, and the in-order DSCP when configured)
//     until the first response: the first acknowledgement of a head
//     packet. That response measures the RTT (from the message's first
//     send) and the effective bandwidth (the bytes of the in-order packets
//     outstanding when it came, over that RTT), and sets the connection's
//     threshold to 2 × RTT × effective bandwidth — the bytes that take two
//     round trips to send. If the bytes left exceed it, the sender
//  2. switches to out of order (the middle: Phase Middle, flag clear, a
//     per-packet UDP source port as entropy so that a fabric or an ECMP
//     switch sprays them over every path); otherwise the message stays in
//     order to its end. As each middle packet is sent, when the packets
//     left are fewer than the outstanding ones (OPC + UPC), it
//  3. switches back to in order (the tail: Phase Tail, flag set); and
//  4. the last packet is held until every middle packet is acknowledged
//     (UPC == 0), then sent in order.
//
// OPC counts the in-order packets sent and not yet resolved (head and
// tail), UPC the middle ones; the three subsets never overlap and follow
// each other in the message's packet order. Every message starts in order
// and is measured: one whose remaining bytes at its first
// response are within the threshold stays in order to its end (Phase Head
// throughout). A message no larger than a threshold override, or of fewer
// than three packets, goes wholly in order from the start (Phase None,
// flag set), as does an operation the ULP marks
// non-idempotent (IOI is for idempotent operations only: a
// sprayed packet may be placed after a later one, so a replayed
// operation must do no harm).
//
// A retransmission is a copy of the packet as first built: a sprayed
// packet is resent unflagged, with its phase and its entropy, so it is
// sprayed again (round robin or adaptively, a different path; by entropy,
// the same hash) and still counts in UPC until it resolves; an in-order
// packet is resent flagged with its sequence number, on the ordered path.
//
// # The receiver
//
// Flagged packets are processed in sequence: each message's flagged
// packets carry an in-order sequence number (0, 1, … across its head and
// tail), and Receiver.Admit hands one over only in its turn. A flagged
// packet that arrives out of sequence (an earlier one was lost: the ordered
// path broke its promise) is counted and buffered — its bytes placed, its
// handover deferred until the gap fills (Release) — when it is less than
// the receiver's window ahead, and refused for retransmission beyond; it
// is never handed over ahead of its turn. The caller gives each message's
// Receiver a window that covers the transport's receive window, so a
// packet the transport accepted is never too far ahead (see Receiver).
// Unflagged packets are placed as they arrive. CheckCombo rejects phase
// and flag combinations no sender makes.
//
// Modes other than IOI serve as baselines on the same wire: ModeInOrder
// sends every data packet in order (the classic ordered delivery, one
// path), ModeSprayed sprays every one, ModeOff marks nothing (the
// transport before IOI).
package ioi
