// Package txn is the transaction layer of peregrine's reliable transport
// (docs/transport.md) and the interface its upper-layer protocol (ULP)
// programs against: RDMA-like pushes and pulls between registered memory
// regions, over the connections, windows and retransmissions of core/rt.
//
// # The ULP's view
//
//	ep, _ := txn.New(txn.Options{Transport: rt.Options{Port: p, Pool: pool, Clock: clk, LocalIP: ip}})
//	local, _ := ep.Register(buf, 0)                          // memory operations read or fill
//	conn, _ := ep.Open(peer, txn.ConnOptions{Ordered: true})
//	conn.Push(txn.Op{Local: local, Len: n, Remote: wire.RegionRef{Key: k, Addr: a}, Tag: 1})
//	for { ep.Poll(clk.Now()); n := ep.Completions(cqes); … }
//
// A target registers the regions peers may push into (RemoteWrite) or pull
// from (RemoteRead) and hands their keys to its peers out of band; its
// Options.OnRequest sees each request (ULP-Req) once it is complete: a
// push's data all placed, a pull about to be served. The transport acts on
// the ULP's behalf: a push's acknowledgement confirms placement (ULP-ACK),
// and a pull is answered from the named region (the pull response). A
// request naming a region that is not registered, lacks the access or is
// too small is refused before anything is written: the initiator's
// operation completes with StatusRemoteAccess, the region in RemoteKey and
// RemoteAddr and which check failed in Refusal (the target's NACK carries
// it as its ULP code).
//
// Every call is on the endpoint's goroutine (one lcore); Stats may be read
// from anywhere. Posting never blocks: when the context table, the reorder
// engine, the scheduler or the completion queue is full, Push and Pull
// return an error matching ErrBusy and change nothing. A completion is
// reserved for every accepted operation, so none is ever dropped.
//
// # Transactions
//
// Each posted operation gets the next request sequence number (RSN) of its
// connection; a solicited push also gets the next solicited sequence
// number (SSN). Both start at Options.InitialSeq (0 by default; both ends
// must agree) and wrap at 2^32. Messages longer than one packet (Segment bytes) travel as
// segments, each carrying the message's RSN, total length (ReqLen) and its
// Offset; the region extension names the target memory. The target places
// each segment at its offset as it arrives, in any order, so reassembly
// costs no buffer.
//
//   - Unsolicited push (up to SolicitThreshold, default 8 KiB, or
//     SolicitNever): the data goes at once, in the request window.
//   - Solicited push (larger, SolicitAlways, or longer than a packet while
//     the congestion window is below one packet): a push request goes in
//     the request window; the target grants it (in the data window) when
//     its turn comes and IncastCap allows; the data follows in the
//     initiator's data window.
//   - Pull: a pull request in the request window; the target answers with
//     pull data in its data window, placed in the initiator's local span.
//
// A push completes when every one of its packets is acknowledged (the
// transport's cookies report each packet's fate once); a pull when all its
// data is placed. A packet the target refuses, or one abandoned after its
// retries, completes its operation with that error once nothing of it is
// left in flight; a timeout or cancel completes it at once, giving up what
// is still in flight (see "Failure semantics").
//
// # Two-sided operations
//
// Conn.Send (an RDMA SEND, IBV_WR_SEND) names no remote memory: its bytes
// go into the peer's next posted receive WQE on that connection
// (Conn.PostRecv, ibv_post_recv), in posting order — the k-th Send of a
// connection into the k-th WQE. Each connection has its own receive queue,
// as an RC queue pair has (a shared one could not be named by a sender).
// The receive completion (Kind OpRecv) names the WQE and the length. A
// Send that finds no WQE posted is refused with a receiver-not-ready
// NACK and resent after the RNR delay (rt Options.RNRTimeout; counted),
// and completes StatusRNRRetryExceeded past the retry limit; one longer
// than its WQE completes in error at both ends (StatusRemoteInvalid,
// StatusLocalLength) and writes nothing. ConnOptions.Index chooses how
// the packets name their WQE (core/dix): a delivery index, absolute,
// relative or free-running, 8 to 32 bits, in every packet or until the
// first is acknowledged, in the header or the Placement extension — then
// every packet is placed on arrival, through an element of the special
// receive queue when its Send came out of order — or none (the baseline:
// the receiver places strictly in order and holds early packets in
// Options.HoldBytes). On an ordered connection packets are still placed
// on arrival, and the receive completions come in request order with the
// connection's pushes and pulls (a failed Send's error completion at
// once, its turn kept by a placeholder). An absolute index carries the
// depth it counts modulo; a target whose receive queue has another
// refuses it (StatusRemoteInvalid, RefusalIndexMismatch). send.go and
// recvq.go say the rest.
//
// # The reorder engine
//
// One core/rt/reorder CAM, keyed by (local CID, space, sequence number),
// orders everything: this side's RSNs (completions, pull data lookup) and
// SSNs (grants), and the peers' RSNs (delivery to the ULP) and SSNs (grant
// order). Every transaction is registered when posted (initiator) or when
// its first packet arrives (target). An arrival marks its entry ready; if
// it is the head of its order (the base in the connection's context) it is
// released, the base moves on and the next entries already ready follow.
// Ordered connections (ConnOptions.Ordered, carried to the target in every
// request's Ordered flag) deliver requests in RSN order and completions in
// posting order; unordered ones release each transaction at once. Grants
// are always issued and used in SSN order. A grant, pull data or solicited
// data that matches no registered transaction is counted (Unmatched) and
// dropped. A refused request still takes its turn, as a failed entry that
// is released without reaching the ULP, so the requests behind it flow.
//
// # Scheduling and congestion
//
// The TX scheduler (package sched) holds, per connection, a data class
// (grants, pull data, solicited data) served before a request class (new
// requests, unsolicited data), and arbitrates between connections by
// deficit round-robin in bytes (ConnOptions.Weight). A connection whose
// window is full is blocked until its next acknowledgement. With
// Options.Congestion set, each connection runs Swift (core/rt/swift):
// delay-based, from the timestamps every packet carries; below one packet
// of window the scheduler paces the connection (one packet per SRTT/cwnd).
//
// # Incast
//
// A target grants solicited pushes oldest first, across all its
// connections, while the bytes it granted and has not yet received stay
// within IncastCap (Stats.GrantedMax records the peak); the data of many
// initiators therefore arrives at the rate the target chose, and each
// initiator progresses as grants come round.
//
// # Reading order
//
// The files are cut by concern; each path below reads top to bottom,
// function by function, without jumping back:
//
//   - endpoint.go: the Endpoint, New, Open (ConnOptions.Early is its 0-RTT
//     mode; OpenEarly only sets it), Poll (timers, grants, the scheduler,
//     then the transport's receive), and the transport's callbacks onEvent
//     and onAcked.
//   - conn.go: ConnOptions, the Conn handle and the per-connection state.
//   - xact.go: the transaction context both roles share: its states
//     (initActive → initStopped → initDone → initCompleted on the initiator,
//     targetAdmitted → targetReleased → targetFailed on the target), the
//     one table of legal moves (setState), the target's free rule
//     (freeable), and the pool and lifecycle: allocX, register, resolve
//     (the transport's verdict on one packet), freeXact, teardown and
//     maybeClose.
//   - initiator.go: posting (post) and completing (checkDone, complete) a
//     push or pull, grants received, pull data placed.
//   - target.go: the receive dispatch (deliver) and the target's side of
//     pushes and pulls: admit, grants (queueGrants, issueGrants), release
//     in request order (requestComplete, release), maybeFreeTarget.
//   - schedule.go: the transmit side of both roles: enqueue, schedule,
//     nextPacket, advance.
//   - send.go and recvq.go: Sends and receive WQEs (core/dix); cq.go:
//     completions and their order; faults.go: timeouts, Cancel, Abort and
//     abort notices; ioi.go: IOI forwarding; await.go: whose move a
//     connection waits for; region.go, options.go, stats.go, qpn.go.
//
// A push, initiator: Conn.Push → post (initiator.go: allocX, register its
// RSN, and its SSN if solicited) → enqueue → Poll → schedule → nextPacket
// (the request, or the data straight from the registered span) → rt.Conn.Send
// → advance (one packet per turn until all are out; a solicited push waits
// for its grant: onGrant → releaseGrants → enqueue) → the ACK: onAcked →
// resolve (xact.go) → checkDone → complete (its Completion, then freeXact).
//
// A push, target: rt delivers the packet → deliver (target.go) →
// onPushData (the first segment admits a context, targetAdmitted; each
// segment is copied into the region at its offset) — or for a solicited
// push onPushRequest → queueGrants → issueGrants → schedule sends the
// grant, then onPushData — → requestComplete (in RSN order when ordered)
// → release (targetReleased: OnRequest) → maybeFreeTarget → freeable →
// freeXact.
//
// A pull, initiator: Conn.Pull → post → enqueue → schedule → nextPacket
// (the pull request) → advance → the data arrives: deliver → onPullData
// (copied into the local span) → checkDone → complete.
//
// A pull, target: deliver → onPullRequest → admit (targetAdmitted) →
// requestComplete → release (targetReleased: OnRequest, then enqueue) →
// schedule → nextPacket (pull data from the region) → advance, until all
// is out → each packet's ACK: onAcked → resolve → maybeFreeTarget.
//
// A Send, initiator: Conn.Send (send.go: allocX, register, enqueue,
// armTimeout) → schedule → nextPacket → sendPacket (the index, core/dix)
// → advance → onAcked → resolve → sendResolved → checkDone → complete.
//
// A Send, target: deliver → onSend (recvq.go) → decodeIndex → bindSend
// (its receive WQE) → placeSend → sendWhole → requestComplete (target.go)
// → release → sendReleased → finishSend (recvDone posts the OpRecv
// completion, freeXact).
//
// A failure: resolve with a status other than StatusOK moves an initiator
// transaction to initStopped (it sends nothing more) and a target one to
// targetFailed (it still takes its turn, then goes without the ULP);
// timeouts and Cancel go through stopOp (faults.go); a connection's end
// through teardown (xact.go).
//
// # Who owns what
//
//   - Registered memory is the caller's; the endpoint reads it (push
//     source, pull service) and writes it (placement) on its goroutine
//     while operations are outstanding.
//   - A push's source must stay unchanged until the push completes (as an
//     RDMA send buffer): core/rt keeps a reference to it, not a copy, and
//     copies it straight into each transmission's frame. Pull data is
//     copied from the region into a frame core/rt keeps until
//     acknowledged, since the region may change meanwhile. Received
//     payload is copied once, from the frame into registered memory.
//   - A receive WQE's buffer (Conn.PostRecv) is the endpoint's from the
//     post until the WQE's receive completion (or its connection's end):
//     a Send's packets are copied into it as they arrive, in any order.
//     The baseline's hold buffer (Options.HoldBytes) is the endpoint's.
//   - Contexts, reorder entries, scheduler items and completion slots are
//     preallocated; an operation holds one context from Push/Pull to its
//     completion (or, if it owes the target an abort notice, until that
//     is acknowledged), a peer's request from its first packet to its
//     release (a pull: until its data is acknowledged). A timeout takes
//     a slot of a timer wheel of MaxOps slots.
//
// # Failure semantics
//
// Every accepted operation completes exactly once, with StatusOK or a
// named error (its completion slot was reserved when it was posted), and
// its buffer is the caller's again when that completion is polled: an
// operation completes only once the transport no longer references it
// (every packet of it acknowledged, refused or abandoned, or given up at
// its timeout or cancel, or the connection's packets dropped), and
// nothing is written into a pull's span after it stopped. What ends an operation, with the nearest
// ibv_wc_status:
//
//   - Success: StatusOK (IBV_WC_SUCCESS). A push: every packet
//     acknowledged, so placed, and handed to the target's OnRequest
//     exactly once (a Send: its WQE completed OK), as "Every promise
//     kept" below says. A pull: all its data placed locally.
//   - Refusal: the target's region check failed; StatusRemoteAccess
//     (IBV_WC_REM_ACCESS_ERR) with the Refusal. Nothing was written; the
//     target's ULP is not told; the request still takes its turn there.
//   - Abandonment here: a packet of the operation ran out of retries
//     (rt Options.RetryLimit) and its resync was acknowledged;
//     StatusAbandoned (IBV_WC_RETRY_EXC_ERR, but the connection lives
//     on). The push may have been placed in part or whole, even handed to
//     the target's OnRequest (when only its ACK was lost): treat the
//     remote span as undefined.
//   - Abandonment at the target: its pull data ran out of retries;
//     StatusRemoteAbandoned (IBV_WC_REM_ABORT_ERR). The local span may
//     hold part of the data.
//   - Timeout: Op.Timeout or ConnOptions.OpTimeout passed, on the
//     endpoint's clock; StatusTimeout (IBV_WC_RESP_TIMEOUT_ERR), at the
//     deadline (in its turn on an ordered connection), whatever the peer
//     does: a dead peer's operations end then, not when the transport
//     gives up on the peer. One whose status was decided already (a
//     packet refused or abandoned) but with packets still in flight ends
//     by its deadline too, with that status.
//   - Cancel: Conn.Cancel; StatusCancelled (verbs cannot cancel one work
//     request; the nearest is IBV_WC_WR_FLUSH_ERR), at once the same way.
//   - Abort: Conn.Abort; StatusFlushed (IBV_WC_WR_FLUSH_ERR).
//   - Peer failure: the transport failed the connection (retries and
//     resync exhausted, the peer reset, setup timed out, the peer's ULP
//     failed) or Stop ran; StatusConnFailed (IBV_WC_RETRY_EXC_ERR for
//     the operation that found the peer gone, IBV_WC_WR_FLUSH_ERR for the
//     rest). A peer that dies, or drops its half, while nothing of this
//     side is unacknowledged (say, right after acknowledging a pull
//     request) is found all the same: while a connection holds a
//     transaction and nothing of its own is pending there (nothing queued
//     in the scheduler or the grant queue, nothing unacknowledged: our
//     own backlog is not the peer's silence, and an unacknowledged packet
//     has its retransmission timer) the transport probes a silent peer
//     (rt.Conn.SetAwaiting, await.go) and fails the connection after
//     RetryLimit+1 unanswered probes (rt.ErrRetryExhausted), or at the
//     bad-CID NACK of a peer that lost it (rt.ErrPeerReset), or when rt
//     Options.IdleTimeout runs out first (rt.ErrIdleTimeout). An
//     operation's timeout ends it sooner if shorter.
//
// At the initiator, in this order: the operation stops (nothing more of
// it is sent; its queued packet leaves the scheduler; pull data arriving
// for it is dropped); its packets in flight resolve — after a refusal or
// abandonment within the transport's retry budget, after a timeout or
// cancel at once: the packets still unacknowledged are given up
// (rt.Conn.Abandon), a resync taking the place of each, so the transport
// references no buffer of the operation any more; the completion is
// queued — on an ordered connection in posting order, so behind the
// operations posted before it, and a timeout cannot overtake them; if the
// target may hold something for it, an abort notice is queued (below),
// but only once the resyncs of the packets given up are acknowledged:
// the target's transport then has every PSN of the operation, so no late
// copy of a packet can reach the target after the notice made it drop
// the request (it would be placed, and on an unordered connection start
// a request that never completes); the completion slot is freed when the
// ULP drains it; the context is freed once those resyncs and the notice
// are acknowledged, or with the connection. A notice the transport
// abandons (its retries ran out, its resync was acknowledged: the link
// works, the peer does not take it) is sent again, within a budget as a
// packet's retries are: abandoned more than RetryLimit times, over at
// least (RetryLimit+1)×MaxRTO (the longest one packet's retries take, so
// that a fault losing the peer's answers for a while is outlived), the
// connection gives up as when a packet's retries and resync run out: it
// fails (rt.ErrRetryExhausted, counted in NoticeGiveUps), everything on
// it ends, and the peer's half, which still holds the request, finds it
// gone by its own probes. A peer that defers the notice (a resource or
// not-ready NACK naming it: it has no room for it yet) restarts the
// budget: it is answering, as it does any request it has no context for.
//
// At the target, for a request its initiator gave up on (the notice
// arrives): the request is marked failed; the incast credit granted to it
// and not yet used is returned at once; pull data not yet sent is not
// sent; in the request's turn (RSN order on an ordered connection, at
// once otherwise) Options.OnAborted is told — never after OnRequest for
// the same request — and the request is released, letting the requests
// behind it through; its context is freed once its own packets in flight
// resolve. Contexts are admitted so that the request every other one
// waits for can always get one: a peer's request that must wait for an
// earlier one of its connection (a later RSN on an ordered connection, a
// later SSN of a solicited push) may not take the last free context
// (NoResources: the peer holds it off and resends), which stays for a
// request at the head of its orders — else requests that arrived early
// could hold every context while the one they wait for, or the abort
// notice standing in for it, was refused for want of one, forever. A
// request of which nothing arrived gets a failed placeholder
// that holds its turn in the RSN order (ordered connections) and the
// grant order (solicited pushes). When the target abandons its pull data
// it sends the notice the other way (with the same budget) and frees the
// context once the notice is acknowledged. A grant the transport abandons is sent again
// while the push's data has not all come and the request stands (the
// initiator drops one it has already had), so an initiator never waits
// for a grant that was lost.
//
// The abort notice is a reliable packet of the transaction's own type —
// push unsolicited data, push request (solicited: it carries the SSN) or
// pull request from the initiator, pull data from the target — with the
// transaction's RSN, no payload and Offset 2^32-1, which no segment can
// have. It is owed for an operation that ended abandoned, timed out or
// cancelled if the connection is ordered, the push is solicited, or any
// of its packets was sent; never for a refusal (the target decided it) or
// a connection failure (both ends drop everything).
//
// When a connection ends — failed in the transport, aborted, stopped or
// closed — every operation on it not yet completed completes
// (StatusFlushed after Abort, else StatusConnFailed, unless an error was
// decided already; a push or Send done here but still waiting for its
// turn is flushed too, since the target drops it unreleased) in posting
// order, the peer's requests are dropped with their contexts, reorder
// entries and incast credit — OnAborted hearing of each one the target
// ULP was not told of yet (HeldAtEnd) —, contexts kept only
// for a notice are freed, and then Options.OnConnEvent hears ConnFailed
// (with the reason: rt.ErrAborted after Abort, rt.ErrStopped after Stop)
// or ConnClosed. The transport's own report of a connection this layer
// already tore down (rt.EventFailed after Abort) finds nothing and
// changes nothing.
//
// # Every promise kept
//
// A reliable packet is acknowledged only if its effect happened (placed,
// held in the hold buffer to be placed, a request recorded, a notice
// applied) or the sender is told a definite refusal instead (a NACK,
// repeated to every copy). Anything else the receiver will not take is
// dropped unacknowledged (rt.Drop, counted in the transport's RxDropped
// and here by reason), so the packet that really holds that PSN still
// comes, and a sender whose packet it was resends it and, past its
// retries, abandons it — never completing OK. Every receive path that
// does not place a reliable packet, and what its sender is told:
//
//	where            what arrives                                  verdict (sender told)      counter
//	rt (rx.go)       PSN before the window, or received already    ACK (it was delivered)     RxStalePSN, RxDuplicate
//	rt (rx.go)       PSN beyond the window                         ACK not covering it        RxOutOfWindow
//	rt (rx.go)       bad checksum, malformed, unknown CID          nothing / bad-CID NACK     RxBadChecksum, RxMalformed, RxUnknownCID
//	rt (seal.go)     sealed connection, tag missing or wrong (any
//	                 covered field rewritten: RSN, index, length,
//	                 offset, type, CID, extensions, any ACK field)  dropped, unacknowledged    RxBadSeal
//	deliver          connection with no slot here                  ULP-error NACK             ConnRefused
//	deliver          type this layer does not know                 dropped, unacknowledged    Malformed
//	push data        outside its message; contradicts its request  ULP-error NACK             Malformed
//	push data        region refused (every segment, every copy)    NACK with the Refusal      Refused*
//	push data        solicited before its grant; of no request;
//	                 ordered, of a request released already        dropped, unacknowledged    Unmatched
//	push/pull req.   region refused (every copy)                   NACK with the Refusal      Refused*
//	push/pull req.   a second request under a registered RSN       dropped, unacknowledged    Unmatched
//	any request      no context free (or the last, reserved)       resource NACK (resent)     -
//	abort notice     applied, applied already, or unknown          ACK (a placeholder keeps
//	                                                                its turn); resource NACK
//	                                                                when there is no room      NoticesReceived
//	pull data (init) of an operation done or stopped               ACK (the initiator decided;
//	                                                                its notice follows)        Unmatched
//	pull data (init) length or span not the pull's; under an RSN
//	                 never posted or of a push or Send             dropped, unacknowledged    Malformed
//	grant (init)     of no waiting push                            ACK (a grant sent again
//	                                                                for a push that had one)   Unmatched
//	IOI (ioi.go)     impossible phase/flag; middle or tail of no
//	                 known message; in-order number seen already   dropped, unacknowledged    IOIStats Forged, Unknown, Stale
//	IOI (ioi.go)     flagged, more than 64 ahead                   RNR NACK (resent)          IOIStats Refused
//	Send             bad descriptor, undecodable index, omitted
//	                 index of no binding                           dropped, unacknowledged    SendStats Forged
//	Send             index naming a WQE bound to another Send, or
//	                 an RSN bound to another WQE                   dropped, unacknowledged    SendStats Forged
//	Send             index naming a WQE consumed already           dropped, unacknowledged    SendStats Stale
//	Send             of a Send refused (longer than its WQE), any
//	                 packet, any copy                              NACK RecvTooSmall again    SendStats RefusedAgain
//	Send             longer than its WQE (first packet)            NACK RecvTooSmall; WQE
//	                                                                ends StatusLocalLength    SendStats TooLong
//	Send             absolute index of another depth (every copy)  NACK IndexMismatch         SendStats IndexMismatch
//	Send             no WQE posted, beyond the queue, elements
//	                 full                                          RNR NACK (resent)          RNRSent, Beyond, ElementsFull
//	Send             hold buffer full; no context                  resource NACK (resent)     HoldFull
//	Send             segment outside its message or its binding    ULP-error NACK             Malformed
//	Send notice      applied; stale; of an unknown binding         ACK                        NoticesApplied, Stale, Forged
//
// A refused Send is remembered by RSN (16 per connection, the newest) so
// that a copy arriving after its WQE was consumed — its NACK lost — is
// refused again; one forgotten falls back to "consumed already": dropped
// unacknowledged, so the sender abandons it, still never OK. A WQE bound
// to one Send is never bound to another; the sender's abort notice,
// whose index is its own count of its Sends, ends WQE k even when a
// misdirected packet took it. The IOI rows need no acknowledgement for liveness: no
// sender builds those packets (a middle goes only after its head's first
// acknowledgement, so its message is known here; an in-order number is
// taken once, and a copy under the same PSN never reaches this layer), so
// the only packet with such a PSN that matters is the real one a forgery
// displaced, which its resend delivers.
//
// A packet whose fields were rewritten under its valid PSN and CID never
// reaches these rows on a sealed connection (the default, core/rt
// seal.go, docs/integrity.md): its tag fails, rt drops it unacknowledged,
// and the real packet's resend takes the PSN. So a push segment, pull
// request, pull data or Send whose request number, index, request length
// or offset was rewritten — consistently with a request that could exist
// or not — is not taken, with messages still interleaved on the wire.
// What the seal does not stop, and these rows then meet: a forger that
// holds the connection's key (an on-path attacker who saw the
// handshake), or any forger on a connection with sealing off
// (rt.Options.NoSeal at either end). For them the rows above still hold,
// and these gaps remain: a forged packet whose index names a WQE no Send
// has bound yet is taken as that Send's; on an unordered connection a
// forged segment of a push released already starts a new request that
// never completes (its context stays until the connection ends); a push
// segment, pull request or Send rewritten consistently with a request
// that could exist is taken (and acknowledged), and so is pull data
// naming another outstanding pull of the same length, or an offset
// rewritten within the span. No receiver protects the payload bytes
// themselves: the seal does not cover them, and the UDP checksum guards
// against corruption only.
//
// Every request the initiator completes OK is handed to the target ULP
// exactly once (OnRequest; a Send: its WQE's receive completion), or the
// initiator does not complete it OK. On an ordered connection the target
// holds a request behind an earlier one the initiator gave up on until
// that one's abort notice arrives: an operation completing OK here behind
// such a one waits (CompletionsHeld) until the notice is acknowledged —
// the target has then released both — and completes StatusConnFailed if
// the connection ends first, or StatusTimeout at its own deadline
// (Op.Timeout), never OK: it then owes its own abort notice, and those
// held before it end with it, so completions keep their posting order
// (an operation that times out behind them ends at its deadline the same
// way, rather than waiting for the notice). A pull's data is only sent once its request
// was handed over, so a pull done here completes OK even then. And when
// a connection ends, the target's OnAborted hears of every request it
// held and never handed over (waiting for its turn or its data, or given
// up by its initiator; HeldAtEnd), each once, never after OnRequest for
// it; a Send's WQE completes StatusConnFailed instead.
//
// # IOI forwarding
//
// With Options.IOI or ConnOptions.IOI (docs/ioi.md, package core/ioi) the
// data packets of pushes and of pull data travel in order, sprayed, or as
// IOI: a message's head goes in order (IOIInOrder flag, its in-order
// sequence number in SSN, the connection's UDP source port and the
// configured DSCP) until its first acknowledgement, which measures the
// connection's threshold (2 × RTT × effective bandwidth); if more than
// that is left the middle goes sprayed (flag clear, a UDP source port per
// packet as entropy), the tail in order again once the packets left are
// fewer than those outstanding, and the last packet only when every
// sprayed one is acknowledged. Op.NonIdempotent keeps an operation wholly
// in order. The receiver places unflagged packets as they arrive and takes
// flagged ones in sequence: ahead of its turn a flagged packet is placed
// but handed to Options.OnInOrder only when the gap fills (64 ahead at
// most; beyond, refused for retransmission). Impossible phase and flag
// combinations, middle or tail packets of no known message and in-order
// numbers taken already are counted and dropped unacknowledged
// (IOIStats). See ioi.go.
//
// # Connection events
//
// Options.OnConnEvent is this layer's asynchronous event channel, beside
// the completion queue as ibv_get_async_event and the rdma_cm event
// channel are in rdma-core: ConnEstablished (on the target, how the ULP
// first learns of a connection), ConnFailed with the reason, ConnClosed.
// They run on the polling goroutine.
package txn
