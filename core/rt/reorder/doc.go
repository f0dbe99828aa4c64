// Package reorder is the transport's reorder engine (docs/transport.md, "Reorder
// engine"): it holds every outstanding transaction of an lcore, keyed by
// (connection, sequence space, sequence number), and releases them to the
// ULP strictly in sequence order, however their arrivals (grants, pull
// data, completions, incoming requests) are ordered on the wire.
//
// # Head-of-line release
//
// Each connection keeps, per sequence space (RSN, SSN, up to four), a base:
// the sequence number of the next transaction to release. The base lives in
// the caller's connection context, not here; the engine only reads it and,
// in PopReady, increments it. The life of a transaction is:
//
//	idx, err := e.Register(cid, reorder.SpaceRSN, rsn) // at send time: pending
//	ctx[idx] = txContext{...}                           // caller's array
//	...
//	idx, ok := e.MarkReady(conn.baseRSN, cid, reorder.SpaceRSN, rsn) // arrival
//	for {                                               // release in order
//		idx, ok := e.PopReady(cid, reorder.SpaceRSN, &conn.baseRSN)
//		if !ok {
//			break
//		}
//		deliver(ctx[idx]) // then drop every reference to idx
//	}
//
// An arrival for a transaction that is not at the head only marks it ready
// (counted as a Wait): it stays in the CAM. When the head arrives, the
// PopReady loop releases it, increments the base, looks the new base up, and
// so releases every follower that had already arrived, stopping at the first
// gap (a key not registered, or registered but still pending). Each
// transaction is released exactly once: PopReady deletes it.
//
// Sequence numbers are compared only for equality and the base is
// incremented modulo 2^32, so a base near 2^32-1 wraps to 0 with no special
// case. Spaces and connections are independent: they are part of the key.
//
// Arrivals that match nothing registered are counted (Stats.Unmatched) and
// refused; the caller decides whether to drop or abort. A second arrival for
// a transaction already ready is counted (Stats.Duplicates) and refused, so
// a retransmitted completion cannot be delivered twice. Take removes a
// transaction regardless of order, for unordered connections and aborts.
//
// # Who owns the indexes
//
// The engine owns the keys, the per-entry ready flags and the free list of
// entry indexes; the caller owns the per-transaction contexts (headers,
// buffers, ULP cookies) in arrays of its own of length Cap(), indexed by the
// entry index. An index belongs to one transaction from the Register that
// returns it until the PopReady or Take that returns it. From then on the
// index is free and the next Register may hand it out again at once (last
// freed, first reused), so the caller must finish with ctx[idx] and drop
// every copy of idx (in the retransmission engine's contexts, timers, ...)
// before calling Register again. Lookup, MarkReady and Ready never change
// ownership.
//
// # Costs
//
// New allocates everything: a cam.Table of Capacity keys and one byte of
// state per entry. No other method allocates, locks or blocks; each is one
// or two CAM operations (see package cam for their worst cases) plus an
// array access. An Engine belongs to one goroutine (one lcore).
package reorder
