// Package mcsq is the multi-channel send queue (docs/mcsq.md): the host
// interface through which any number of client goroutines post work
// requests (WRs) for thousands of targets on one queue, while the poll
// loop — the adapter — spreads them over small pools of send queues (SQs)
// and reports their completions on the queue's completion queue (CQ),
// without the host managing a connection.
//
//	eng, _ := mcsq.New(mcsq.Options{Endpoint: ep})            // ep: a txn.Endpoint
//	dc, _ := eng.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 64})
//	q, _ := eng.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
//	t, _ := eng.AddTarget(peer)
//	// the poll loop runs eng as a stage (lcore), in place of ep
//	q.Post(&mcsq.WR{ID: mcsq.Flow(7), Target: t, Op: mcsq.OpPush, Local: r, Len: n, Remote: ref, Cookie: c})
//	n := q.Completions(cqes)                                    // any goroutine
//
// # The path of a WR
//
//  1. Post (any goroutine) takes a free slot of the queue's preallocated
//     WR table from a lock-free MPMC ring, copies the WR into it, and
//     enqueues the slot's index on the queue's lock-free MPSC post ring.
//     Nothing allocates; a full table is ErrBusy (PostWait waits for room
//     under a context). A malformed WR, an identifier kind the queue has
//     no pool for (a QPN without an RC pool, a flow ID without a DC pool),
//     a DC target never added, or a post after Close is refused there and
//     then, with an error saying which.
//  2. The distributor (Engine.Poll, the poll loop) takes a burst of
//     indexes off the post ring — their order there is the posting order,
//     and each gets the queue's next sequence number — and places each in
//     turn. A local operation runs (below). A blacklisted identifier
//     completes with an error CQE, not executed. An identifier bound to an
//     SQ goes to that SQ, so the WRs of one identifier keep their order.
//     An unbound DC identifier takes a free DC SQ, or the longest-idle
//     one, and binds it. An RC QPN is bound once, by Pool.AddRC. The SQ
//     records a reference (the slot's index), never a copy of the WR.
//  3. Each SQ with references hands them, oldest first, to its txn
//     connection as pushes and pulls whose Tag names the slot; a DC SQ
//     connects first (0-RTT, below) or, when its next WR goes to a target
//     on another peer than its connection's, waits for its WRs in flight
//     and reconnects. (A connection joins two endpoints; the WR names the
//     region, so targets on the same peer share it.)
//  4. Completions of the endpoint are matched to their slots by Tag and
//     become CQEs (below); a DC SQ with nothing left is released.
//
// # Head-of-line behaviour
//
// The WR at the head of the queue waits when it cannot be placed: no DC
// SQ is free or idle (HOLNoSQ), its identifier's SQ already references
// SQDepth WRs (HOLSQFull), or it is a local operation waiting for the WRs
// before it to complete (HOLFence). It waits until a later Poll frees
// what it waits for (the plain wait); HOLWaitNs sums those
// waits. The cost falls on traffic that spans more live identifiers than
// the pool has SQs: with 64 DC SQs and 1,000 targets, nearly every new
// identifier finds every SQ busy.
//
// With StrictHOL everything behind a waiting head waits with it. By
// default the distributor looks ahead while the head waits for an SQ
// (not at a fence): it scans up to QueueOptions.Lookahead WRs behind
// the head in posting order and places each whose identifier no earlier
// waiting WR has — one whose identifier is bound to an SQ with room, a
// blacklisted one (error CQE), an unbound one if a free SQ or an idle SQ
// already connected to its target's peer is there. Each WR it leaves
// holds its identifier, so no WR ever overtakes an earlier WR of its own
// identifier, and the scan stops at a local operation, so nothing
// overtakes a fence. The head itself first tries for an SQ that needs no
// new connection; an idle SQ connected elsewhere (it must close and
// reconnect) goes to a WR behind the head bound for that SQ's peer if
// the scan finds one, and to the head only if one is left. At most
// Lookahead WRs overtake one waiting head (Stats.Overtook counts them),
// so a head waits no longer than the SQs take to finish those; after
// that it takes any SQ, as under StrictHOL. The ordered CQ is unaffected:
// the reorder buffer holds the posting order, whatever order WRs are
// placed in. A scan runs only when an SQ may have changed (a completion,
// a failure, an unblacklist), the head moved, or the window grew
// (Stats.LookScans).
//
// `peregrine bench mcsq` prints the HOL counters and measures the
// lookahead against StrictHOL on the virtual clock, the queue kept full:
// in bursts of 8 WRs per target the same WRs take 2.3 to 2.5 times less
// virtual time, with well under half the DC connects (an idle SQ goes to
// a WR for its own peer rather than reconnecting for the head); with a
// target per WR, ten times less.
//
// # Pools
//
// An RC pool's SQs are connected once (Pool.AddRC: QPN → peer) and kept
// connected; their identifier is their QPN. On an endpoint with global QP
// numbers (rt.Options.QPN, docs/qp-translation.md) the transport hands the numbers
// out: the host opens a connection (Pool.OpenRC, or on the endpoint) and
// posts the QPN it was given; the distributor translates an unbound QPN
// through the transport's CAM (txn.Endpoint.ConnByQPN) and binds an SQ to
// the connection it names. A QPN the CAM does not know (never opened, or
// retired with its connection) completes with StatusUnknownID and
// CauseUnknownQPN and goes on the RC blacklist; AddRC is refused there. A DC pool's SQs connect on
// demand when bound, to the WR's Target (Engine.AddTarget), and
// disconnect after the last WR in flight is acknowledged — at once
// (IdleTimeout 0) or after IdleTimeout with nothing new for the same
// identifier — and are then reused for another identifier and target; a
// new identifier takes, in this order, an idle SQ already connected to
// its target's peer (no connect at all), a free SQ, the longest idle. A
// connection being closed finishes its close handshake in the transport
// while the SQ already serves its next target on a new one: give the
// endpoint's transport MaxConns for the SQs plus the connections still
// closing (rt Options.CloseLinger). Several queues may share a pool (an
// identifier is bound pool-wide), or own theirs; RC and DC queues may be
// separate, each with its own CQ, or one queue may have both pools.
//
// # 0-RTT connect
//
// A DC connection is opened with txn.Endpoint.OpenEarly (core/rt
// dcconnect.go): the initiator picks its initial PSNs and announces them
// in its ConnOpen, and sends its first data right behind it without
// waiting for ConnAccept; the target adopts the PSNs and is established
// on the ConnOpen, so the data that follows is delivered at once. A lost
// ConnOpen is resent on its setup timer and the data that arrived before
// it is dropped and resent by its own timers; a refused one fails the
// connection (CauseRefused), which fails the SQ (below).
//
// # Completions
//
// One CQ per queue, read by any goroutine (Completions). Unordered mode:
// a CQE per WR, in completion order. Ordered mode: a reorder buffer (the
// posting order, one entry per slot) releases CQEs in posting order at
// the end of each Poll, and folds each run of consecutive successful
// pushes and pulls into one CQE (up to MaxCoalesce): CQE.Count WRs, with
// sequence numbers Seq-Count+1..Seq, the CQE naming the last. An error,
// and a local operation (whose CQE may carry a result), always has a CQE
// of its own. Every WR is covered by exactly one CQE. The CQ ring holds
// as many entries as the WR table, so a CQE always has room; a slot
// returns to the free ring when the host polls the CQE that covers it
// (the slots of a coalesced run's earlier WRs, when the run is folded).
//
// # Failure
//
// When a WR completes with an error from the transport — retries
// exhausted, the target refused a region (remote error), the connection
// refused, unreachable, reset, an operation timeout — its SQ fails and
// only it: its identifier goes on its pool's blacklist (RC and DC pools
// keep separate lists) with the cause; the WRs the SQ held that the
// transport never saw complete with StatusBlacklisted (not executed);
// its connection is aborted, and the WRs that were in it complete with
// StatusSQFailed (executed in part or whole, or not at all: the remote
// span is undefined); later WRs for the identifier complete with
// StatusBlacklisted without executing, so the queue keeps flowing. A DC
// SQ returns to its pool once its flushed WRs are in; an RC SQ stays
// bound to its QPN and reconnects on its first WR after the host takes
// the QPN off the blacklist (Pool.Unblacklist, any goroutine). The pool's
// Stats count failures by cause. A WR naming a local region that is not
// registered (or was deregistered) completes with StatusLocalError and
// fails nothing.
//
// # Local operations
//
// OpRegister, OpDeregister and OpCopy run on the poll loop in stream
// order: the distributor holds one at the head until every WR posted
// before it has completed (a fence), runs it, and only then distributes
// the WRs after it. A deregistered region is therefore gone for every WR
// posted after the OpDeregister.
//
// # Who owns what
//
//   - A WR's buffers (Local, Mem, Dst) are the host's memory, referenced
//     from the slot and by the transport, never copied by this package;
//     they must not change (a push's source) or be read (a pull's
//     destination) until the WR's CQE, or one covering it, is polled.
//   - Slots, SQ reference rings, bindings, blacklist entries and CQ
//     entries are preallocated by New, NewPool and NewQueue; posting,
//     distributing and completing a WR allocates nothing. Opening a DC
//     connection allocates its transport handles (once per connect, not
//     per WR).
//
// # Goroutines
//
// The engine, its pools and its queues belong to the poll loop that polls
// the engine, except Queue.Post, PostWait, Completions, Close and Stats,
// Pool.Unblacklist and Stats, and Engine.AddTarget, which any goroutine
// may call.
package mcsq
