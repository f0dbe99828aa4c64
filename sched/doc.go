// Package sched is the transport's TX scheduler: it decides which
// connection sends next and which of its queued transactions goes first.
//
// The transaction layer above it turns ULP requests, received grants and
// received pull requests into per-transaction contexts in its own context
// array, and hands the scheduler only the contexts' indexes. The scheduler
// queues those indexes per connection ("flow"), arbitrates fairly between
// flows, and respects the per-connection gates the transaction layer sets
// (window full, congestion window full, pacing). It never looks inside a
// context and never touches a packet.
//
// # Classes
//
// Each flow has two FIFO queues:
//
//   - ClassData: grants, pull data and solicited data, which travel in the
//     connection's data window.
//   - ClassRequest: new requests and unsolicited data, which travel in the
//     request window.
//
// Within a flow, ClassData always goes before ClassRequest when both are
// sendable: data and grants answer something the peer is already waiting
// for and free resources on both sides, whereas a new request only adds
// work. Each class is gated on its own (SetBlocked), because the two travel
// in different windows: a full request window must not hold back grants.
// Within a class the order is strictly FIFO.
//
// # Arbitration
//
// Flows that have at least one sendable item and are not paced sit on an
// active list; idle, blocked and paced flows are never visited, so the cost
// of a pick does not grow with the number of flows: it is O(1) amortised
// while Quantum × weight is at least the typical item size, and in general
// O(1 + item bytes / (Quantum × weight)) for the turns a flow needs to earn
// a large item. Re-admitting a paced flow costs O(log paced flows). Between active flows the scheduler runs
// deficit round-robin in bytes: on each turn a flow earns Quantum × weight
// bytes of credit and sends head items while their size fits its credit;
// leftover credit carries to its next turn while it stays backlogged, and is
// forfeited when it leaves the active list (its queues empty, every class
// with items is blocked, or it is paced), so a blocked or idle flow cannot
// save up a burst. Over any run of turns in which flows stay backlogged,
// the bytes they send are proportional to their weights to within about one
// quantum plus one item each, whatever their item sizes. With
// Options.RoundRobin every item costs 1 instead of its size, so a turn is
// weight items (plain round-robin at weight 1).
//
// # Gating and pacing
//
// SetBlocked(flow, class, true) takes one class of one flow out of
// arbitration, typically because its window or congestion window is full;
// its items keep their order and the class resumes where it was when it is
// unblocked. PaceUntil(flow, t) takes the whole flow out until time t, for a
// congestion window below one packet; Next(now) re-admits every flow whose
// time has come, at the tail of the round, and NextDeadline tells the poll
// loop how long it may sleep.
//
// # Who owns what
//
//   - Items are uint32 values that mean something to the caller only,
//     normally indexes into the transaction layer's context array. The
//     context stays the caller's at every step; the scheduler stores the
//     number and the size given with it, nothing else, and holds no pointer
//     the garbage collector must scan. The same number may be queued more
//     than once; the scheduler does not deduplicate.
//   - From Enqueue (or Requeue) until Next returns it, or Drop or Reset
//     hands it to the callback, an item is queued: the caller must not free
//     or reuse its context for another transaction meanwhile (the scheduler
//     would later hand out the stale index). When Next returns an item it is
//     no longer queued; the caller sends it, or gives it back with Requeue.
//   - Queue slots come from one store of Options.Items slots allocated by
//     New and shared by all flows and classes. When it is exhausted Enqueue
//     and Requeue return ErrFull and change nothing; the caller keeps the
//     item and retries later (backpressure, never blocking).
//   - A Scheduler belongs to one goroutine (one lcore). It has no locks;
//     using it from two goroutines is a data race. No method allocates after
//     New, except to build an error for an invalid argument.
package sched
