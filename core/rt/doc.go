// Package rt is peregrine's reliable transport (docs/transport.md):
// connections, sliding windows, acknowledgements and the CAM-indexed
// retransmission engine, over one port queue per lcore.
//
// # Endpoint
//
// An Endpoint is the transport of one lcore: single goroutine, share
// nothing. It owns a fixed table of MaxConns connections, a retransmission
// CAM of CAMCapacity entries with a context array beside it, a timer wheel,
// and an mbuf cache; NewEndpoint allocates all of it and the packet path
// allocates nothing. It is an lcore.Stage: each Poll receives one burst,
// fires due timers, and transmits one burst (control packets, ACKs,
// retransmissions, new packets, in that order). The ULP calls Open, Send and
// Close on the same goroutine (from its ULP methods, or between Polls);
// only Stats may be read from elsewhere.
//
// # Connections
//
// A connection is a pair of CIDs, one allocated by each side. A local CID
// is 24 bits: the table slot in the low bits and a generation in the high
// bits that changes each time the slot is reused, so a packet for a closed
// connection finds the slot but not the generation and is dropped as stale.
// A sharded endpoint (Options.ShardBits) gives the top bits to its shard.
// Every received frame is steered by its first word (wire.PeekCID) to a
// slot index, then checked, before anything else is decoded; a frame for a
// CID that names no connection is answered by a bad-CID NACK (see Failure
// semantics). Every packet for a live connection must come from its peer's
// IP address and UDP port, or it is dropped and counted (RxBadSource): an
// old incarnation's packet, or another host's, never touches the
// connection. (An IOI sprayed data packet, not flagged in order, may come
// from any port in IOIEntropyPorts: its source port is ECMP entropy.) The frame that
// carries nearly all traffic — IPv4, a reliable packet or an ACK with no
// extension but a delivery index, a region and the seal, addressed to us,
// for a live connection, from its peer's port — takes wire.DecodeFastIPv4 (fixed
// offsets, the same checks and the same header as the general decoder)
// instead; anything else, or anything wrong, falls back on the general
// path, which decodes the frame again and counts what is wrong, so the
// counters and the behaviour are those of the general path alone.
//
// Setup is a three-way exchange. Open sends ConnOpen (destination CID 0,
// the initiator's CID in the source-CID extension, its receive BSNs in
// ReqEBSN/DataEBSN) and resends it on a timer (RTO, doubling) until
// ConnAccept arrives or RetryLimit runs out (EventFailed, ErrOpenTimeout).
// The target, if Options.Accept agrees and a slot is free, allocates its
// CID and answers ConnAccept (its CID and receive BSNs); a repeated
// ConnOpen gets the same answer (the target remembers initiators in a
// small CAM keyed by their CID and address). Each side starts its transmit
// windows at the BSNs the other announced, so the initial PSNs are the
// receiver's choice (random: see Determinism). The initiator is
// established on ConnAccept and ACKs it at once; the target is established
// by the initiator's first packet to its CID and resends ConnAccept on its
// own timer until then. A refused ConnOpen gets a NACK (ulp-fatal for the
// policy: ErrRefused; resource-exhausted for a full table: retried).
//
// Close sends ConnClose in the request window, behind every earlier
// request; the peer answers with its own ConnClose once it has all
// requests up to ours. When both ConnCloses are acknowledged and received
// the connection is StateClosed (EventClosed) and keeps its slot for
// CloseLinger to acknowledge late retransmissions, then frees it.
//
// # Sliding windows
//
// Per connection and direction there are two windows, request and data
// (wire.Type.Window), each with NSN (next PSN to assign), BSN (oldest
// unacknowledged) and a sequence-number bitmap of WindowSize bits (bit n =
// PSN BSN+n), all mod 2^32. Transmit bit set = acknowledged; receive bit
// set = received. The receiver rules: PSN < BSN is dropped and answered
// with an ACK of the current BSN; a PSN inside the window sets its bit, or
// is a duplicate (dropped, ACKed) if the bit was set, else it is delivered
// exactly once and counts toward the next ACK; PSN == BSN moves BSN past
// every received bit; a PSN beyond the window is dropped and flagged in the
// next ACK (OOW). The sender rules: an acknowledgement whose BSN precedes
// ours is stale and ignored; one that is inconsistent with itself or with
// what was sent — it acknowledges a PSN never sent, its bitmap's bit 0
// says received the PSN its BSN says is awaited, its BSN stops at a PSN
// already reported received — is forged, and so is the whole frame: both
// windows are checked before either changes, and a forged frame changes
// nothing (no window, RTT sample, congestion signal or early
// retransmission; AckForged counts it). Otherwise BSN moves to the
// receiver's and the receiver's bitmap is ORed in, and each newly
// acknowledged packet is retired. A NACK is checked the same way: forged
// piggybacked BSNs, or a PSN never sent (or assigned but not yet sent),
// make it forged; a PSN already acknowledged, or before the NACK's own
// eBSN, makes it stale (NackStale); either way its code is ignored. An RTT
// echo older than the connection, or from the future, gives no sample.
//
// # ACKs
//
// Every reliable packet carries our receive BSNs (ReqEBSN, DataEBSN). A
// dedicated ACK, or an extended ACK with both 128-bit receive bitmaps when
// a window has holes, goes out after AckEvery reliable packets or AckDelay
// after the first, whichever comes first, and at once when a packet asks
// for it (AckRequested), is a duplicate, stale or beyond the window. A data
// packet that carries everything an ACK would say cancels the pending ACK.
// ACKs have no PSN and are never retransmitted. An ACK echoes the TxTime of
// the latest packet that was not a retransmission (Karn's rule, applied by
// the receiver) and when it got it (RxTime), so the sender samples the
// fabric RTT without the receiver's turnaround; TxEcho 0 means no sample.
// A packet ULP.Deliver refuses (NotReady, NoResources) is not
// marked received; the peer gets a NACK and holds off that packet and the
// ones after it for the NACK's RNR time. A packet refused for good
// (ULPError: it names memory that is not registered, say) is not marked
// received either; the peer gets a ULP-error NACK (with the ULP's code,
// ULPErrorCode, in NackBody.ULPCode), reports it to its ULP
// (EventNack) and sends a resync in its place, so the window moves on and
// the packet is never acknowledged as delivered. When that resync is
// acknowledged, EventResynced says its place in the window is free: a ULP
// that stopped on ErrWindowFull may send again, as after an ACK.
//
// The ULP tags each packet it sends with a Cookie (SendHeader.Cookie, never
// sent) and hears it back exactly once when the packet resolves — only
// then, when the transport no longer references it: through ULP.Acked
// when acknowledged, in EventNack for a ULP error,
// in EventAbandoned when its retries ran out or the ULP gave it up
// (Conn.Abandon: the transport stops referencing its payload at once, and
// hands the cookie back when the resync standing in for it is
// acknowledged). Any other NACK (unexpected,
// say) is news, not a resolution: its EventNack carries no cookie. When
// the connection ends (EventFailed, EventClosed, or Stop) the cookies of
// its outstanding packets are not handed back: the connection's end
// resolves them all. That is how the transaction layer above completes
// operations without a table of PSNs.
//
// # Retransmission engine
//
// Every outstanding packet is registered at Send in a cam.Table keyed by
// (local CID, window, PSN); the entry index selects a context: the
// retained frame, the latest send time, the send and timeout counts and
// the retransmit timer. ACK processing retires entries through the CAM. A
// per-packet timer on the wheel (the connection's RTO, doubled per timeout
// of that packet, capped at MaxRTO) resends the packet with the same PSN,
// the Retransmission flag and an incremented Retry (both saturate: a
// resend is never flagged as a first transmission). The timeout runs from
// the later of the packet's last transmission and the last ACK that
// acknowledged a packet of its window (RFC 6298 restarts its timer on
// every ACK of new data): a packet queued behind others that are still
// being acknowledged is not resent because the queue outgrew the RTO.
//
// Loss is found before the timeout by time, RACK-style (RFC 8985;
// retx.go, detectLoss): a hole is lost once a packet sent after it was
// acknowledged, a PSN EarlyRetransmitDistance past it was acknowledged
// (a second condition; after an acknowledged resend the time rule alone
// decides), and the hole was sent at least RTT + reoWnd ago, where RTT is
// that of the most recently sent acknowledged packet and reoWnd the
// connection's reordering window. reoWnd follows the reordering the
// connection sees: every packet acknowledged after a later-sent one
// gives how late it came (its RTT minus the overtaking packet's; a
// resend's ACK may be its first copy's, so where duplicate reports tell
// which copy arrived, a resend overtakes nothing — after a stall or a
// lost tail ACK it would give the whole wait), in a slowly
// decaying maximum (it starts at the first RTT, falls by 1/64 of the gap
// per overtaken sample below it and by 1/1024 of itself per packet that
// nothing overtook, so the in-order majority of a sprayed connection does
// not wear it away between one burst of reordering and the next); an
// early resend found spurious widens it at once; it never falls below a
// quarter of the least RTT. An ACK sooner after an early resend than half
// the least RTT (half: a lone resend on a path its window left idle goes
// round faster than the first copies, which queue and are acknowledged
// together) shows the original came late. A timer's resend so
// acknowledged is left to the duplicate report, below: its first copy's
// wait includes the timer whenever that copy's ACK was lost. Duplicate
// reports tell the sender what timing alone cannot: a receiver that gets
// a packet it had already (a duplicate, or a PSN before its window) says
// so in its next ACK
// (wire.AckBody.Dup, the PSN in the ACK's PSN field; TxDupReport,
// RxDupReport), as a DSACK does, and a report of a packet whose latest
// transmission was an early resend (SpuriousDupReport) proves the
// original late, not lost: the window gets a floor of how late it came,
// plus a quarter, which wears down by 1/4096 per packet nothing
// overtook, so bursts of reordering (a queue on one path, frames held
// back now and then) are covered from one to the next, as RFC 8985 keeps
// a DSACK-widened window for 16 recoveries; it halves after 32 early
// resends in a row that drew no report (they were needed: where a dead
// path takes a quarter of the frames, a floor that stayed held every
// loss back). A report of a packet still outstanding (its first copy's
// ACK lost, or unable to name it) shows the resend spurious but not how
// late the original was, and does not widen it. Options.NoDupReports runs
// without (the behaviour before them, for comparisons). Packets sprayed over paths of different
// delays, or queued on one ordered path (IOI's head and tail), are thus
// given the time they take: a hole is not lost either while packets sent
// with or before it are still being acknowledged (the queue on its path
// draining). A hole overtaken but not yet due has its own timer moved to
// when it will be, so the last holes are found then; the tail (nothing
// after it acknowledged) waits for the timeout. Each early resend needs
// new evidence: a packet sent after it acknowledged. None is made while
// the receiver's hold-off runs (an RNR or out-of-window NACK: the hole is
// one it refused, not one the network lost).
//
// Every resend — timer, hold-off, early — counts toward RetryLimit: a
// packet is sent at most RetryLimit+1 times. It is given up only when
// its timer expired RetryLimit+1 times, though: a packet whose
// transmissions early resends spent waits out the timer's schedule
// without sending, so early retransmission never abandons a packet
// sooner than the timer alone would (a packet delivered on a slow path
// is acknowledged first). Then a resync with the same PSN takes the
// packet's place
// (so the receiver's window can move on); if the peer acknowledges it the
// packet is reported abandoned (EventAbandoned: it may or may not have been
// delivered), and if the resync runs out too the connection fails
// (EventFailed, ErrRetryExhausted). The RTO follows Jacobson/Karels over
// the echoed samples, plus AckDelay, within [MinRTO, MaxRTO]. A timer
// resend the peer reports as a duplicate (or an ACK too soon for it)
// fired for a packet that was only waiting — the peer's poll loop
// descheduled, its ring backed up — and the RTO is kept above how long
// those packets took, plus a quarter, halving each second without
// another (SpuriousTimeout): with one sample per packet RTTVAR forgets a
// stall within a few dozen packets, and every stall of a loop on a
// shared machine cost a window of resends with nothing lost.
//
// A timeout is tested before the window is resent (F-RTO, RFC 5682):
// the first expiry in a window of an established connection resends only
// its oldest outstanding packet, the probe, and the window's other
// expiries are held to the probe's next timeout while nothing is
// acknowledged (one packet per timeout to a silent peer, its timer
// doubling). The first ACK decides: a packet sent before the timeout and
// never resent acknowledged makes it spurious (SpuriousRTO) — nothing
// more is resent, a congestion controller that implements TimeoutUndoer
// takes its response back (RFC 4015) and the RTO covers the ACK's RTT
// sample, which spans the stall — while the probe's resend acknowledged
// alone is a loss and the held packets are resent as before. Setup,
// closing, resyncs and packets the peer asked to hold off keep the plain
// rule. When nothing past the oldest packet was acknowledged (no hole is
// known: a lost tail, or a peer whose loop is off its CPU) and the
// oldest never timed out before, the first expiry asks instead of
// resending (TimeoutAsks): an ACK with FlagAckRequested, which the peer
// answers echoing it. An answer acknowledging first copies makes the
// timeout spurious with nothing resent; one that echoes the ask and still
// lacks the packets is the loss, and they are resent on it; no answer by
// the probe's next timeout resends the probe as above. A tail loss costs
// one round trip more, a peer off its CPU for less than three timeouts
// no resend. The ask counts as one of the probe's RetryLimit+1
// transmissions, so a dead peer is given up on the same schedule.
//
// A Send that finds the window (WindowSize PSNs), the congestion window,
// the CAM or the pool full is refused with an error matching ErrBusy and
// changes nothing; the caller retries after a Poll.
//
// # Congestion
//
// By default a fixed window caps unacknowledged packets per window
// (FixedWindow, Options.MaxOutstanding) and the RTO does the rest. The
// CongestionControl interface (OnAck with the poll's time and the fabric
// RTT, OnRetransmit, Window) is where the delay-based controller of
// core/rt/swift plugs in (Options.Congestion); Conn.Congestion exposes it
// to a scheduler that paces. A controller that is also a HopSetter learns
// the forward path's length: the receiver infers each data packet's hops
// from its IP TTL (wire.HopsFromTTL), its ACK echoes them (HopEcho), and
// the sender passes them on with every RTT sample (ConnStats.PathHops).
//
// # Who owns each mbuf
//
//   - Receive: RxBurst hands the endpoint each frame; the endpoint owns it
//     while it decodes and processes it (it first reads the headers of the
//     whole burst, so their cache misses overlap). The header and payload
//     given to ULP.Deliver alias it (the header is the endpoint's
//     own decoded copy) and are valid during the call only. The endpoint
//     frees the burst to its cache when the burst is done.
//   - Send: the payload is copied into a fresh mbuf (the retained frame),
//     fully encoded; with SendHeader.PayloadStable only the headers are
//     (their checksum over the headers alone) and the engine keeps a
//     reference to the caller's payload instead, copied and summed into
//     each transmission in one pass (wire.CopyChecksum). The
//     retransmission engine owns the frame until the packet is
//     acknowledged, abandoned, or its connection fails or is dropped by
//     Stop, and then frees it; when the packet is given up (its retries
//     ran out, the peer's ULP refused it, Conn.Abandon) a resync frame
//     takes its place and the payload reference is dropped.
//   - Transmit: each transmission (first or resend) allocates another mbuf,
//     copies the retained frame (and a stable payload) into it and refreshes
//     flags, retry, eBSNs and timestamps with wire.FrameTemplate.Refresh
//     (an incremental UDP checksum update). TxBurst takes
//     that copy; frames the port refuses stay the endpoint's and go first
//     on the next Poll. ACKs, NACKs and control packets are built in fresh
//     mbufs and handed over the same way. Every frame to the peer is built
//     on the connection's wire.FrameTemplate (Ethernet, IP and UDP prebuilt
//     once, checksums finished per frame). (The copy per transmission is
//     the simple, correct choice; reference-counted mbufs would save it.)
//   - Stop frees every retained and pending frame and flushes the cache;
//     Close also releases the cache. The port stays the caller's.
//
// # The ULP boundary
//
// The ULP (core/rt/txn: transactions, the reorder engine, solicitation)
// sits on Open, Conn.Send and Close going down, and on one interface, ULP,
// coming up (Endpoint.SetULP): Deliver for each reliable packet, Acked for
// each of its packets the peer acknowledged, Event for everything else
// that happens to a connection. One rule, in ULP's doc, says what any of
// the three may call back into (everything but running the endpoint:
// Poll, Tick, Stop, Close), and the endpoint re-checks that the slot
// still holds the same connection after each call. Each method's doc says
// who owns what it is given: Deliver's header and payload are borrowed
// for the call; Acked's packet is released before the call; an Event is a
// value. The ULP hangs its per-connection state on the Conn
// (SetULPContext) and gets it back from the Conn each method receives,
// so it never looks a connection up itself. RSN, SSN, ReqLen, Offset and
// the extensions travel untouched in SendHeader and the delivered header;
// PSNs stay the transport's.
//
// # Reading order
//
// The files are cut by concern, so a received data packet reads top to
// bottom in a few of them rather than back and forth:
//
//   - endpoint.go: the Endpoint, NewEndpoint, Poll (receive a burst, fire
//     timers, transmit), NextDeadline, Stop, Close, the endpoint's mbufs.
//   - ulp.go: what the ULP sees: Verdict, the ULP interface and its
//     re-entrancy rule, SendHeader, Conn.Send and CanSend.
//   - lifecycle.go: the connection table and a connection's life: Open,
//     ConnOpen and ConnAccept handling, establish, Conn.Close and Abort,
//     the close handshake, failure and freeing.
//   - rx.go: the data receive path: the burst's fast path, decode,
//     dispatch by state and type, the receiver rules and delivery.
//   - ack.go: ACKs both ways: the piggybacked BSNs, ACK, extended ACK and
//     NACK processing and retiring what they acknowledge; then the ACKs we
//     owe (coalescing, timers, building them).
//   - tx.go: the transmit path: Send's retained frame (enqueue), the
//     per-Poll transmit in priority order, each transmission's copy
//     refreshed with wire.FrameTemplate.Refresh, control and orphan NACKs.
//   - retx.go: retransmission: the per-packet context, the timer wheel's
//     callback, retransmit and setup timers, resync, RNR hold-off and
//     early retransmit (the RACK rule; its state is in rtt.go).
//   - conn.go (states, events, the Conn handle), window.go and bitmap.go
//     (the sliding windows), rtt.go and cc.go (RTO and congestion),
//     options.go, stats.go, errors.go, invariants.go: the parts these use.
//   - qpn.go: global QP numbers (docs/qp-translation.md, Options.QPN, off by default):
//     a core/qpx CAM over the connection slots, the numbers exchanged in
//     the setup, carried in every reliable packet and checked on receive.
//
// A data packet: Poll (endpoint.go) → receiveBurst → onEstablishedData →
// onData (rx.go) → piggyback → retire (ack.go) → onReliable → ULP.Deliver
// (rx.go) → afterPacket; the ACK it earns leaves in transmit (tx.go) →
// sendAck (ack.go).
//
// # Failure semantics
//
// What ends a packet (an outstanding reliable packet, at its sender):
//
//   - Acknowledgement: ULP.Acked gets its cookie; the context and the
//     retained frame are freed first (the ULP may send again).
//   - ULP error (the peer's ULP.Deliver answered ULPError): EventNack
//     with the cookie and the peer's code; a resync takes the packet's
//     place (the retained frame is freed then), and EventResynced tells
//     when that resync is acknowledged and its window place is free.
//   - Refusal for now (NotReady, NoResources, OutOfWindow): not an end.
//     The sender holds off the packet and the ones after it for the NACK's
//     RNR time (an RTO for out of window), at most MaxRTO (early
//     retransmission too), then resends; each resend counts toward
//     RetryLimit, except that an out-of-window refusal gives the refused
//     transmission back (Refunds, at most RetryLimit per packet): the
//     packet arrived too far ahead of a gap, it was not lost.
//   - Abandonment: after RetryLimit+1 transmissions and RetryLimit+1
//     expiries of its timer a resync takes its place; when the peer acknowledges the resync, EventAbandoned gives
//     the cookie (the packet may or may not have been delivered). The
//     receiver moves its window past the PSN (RxResync) and its deliver
//     function never sees the packet.
//   - Given up by the ULP (Conn.Abandon with the packet's cookie: the
//     transaction layer's operation timed out or was cancelled): the same
//     at once, without waiting for the retries. A resync (ResyncTimeout,
//     ResyncAborted) is built in the retained frame's place and sent on
//     the next Poll — as a resend, flagged as one, if the packet was sent
//     — with a retry budget of its own; the payload is never read again,
//     so the ULP has its buffer back when Abandon returns, while the PSN
//     stays outstanding until the resync is acknowledged and then
//     resolves as an abandonment (EventAbandoned with the cookie, once).
//     The peer sees exactly what an abandonment shows it: a copy of the
//     packet still in the network is delivered if it arrives before the
//     resync, and is a duplicate after it. Each PSN is sent at most
//     2×(RetryLimit+1) times, packet and resync. GivenUp counts the
//     packets given up.
//   - The end of its connection: every outstanding packet is dropped with
//     it, its frame freed, its cookie not handed back (the connection's
//     EventFailed or EventClosed resolves them all).
//
// What ends a connection, at each end, and who is told:
//
//   - Close: the close handshake (see Connections); EventClosed at both
//     ends once both ConnCloses are acknowledged, then the slot lingers
//     CloseLinger and is freed. A connection still being set up is freed
//     at once (EventClosed).
//   - Setup failure: ErrOpenTimeout (no ConnAccept within RetryLimit) or
//     ErrRefused (the peer's Accept said no): EventFailed at the
//     initiator; a target's unconfirmed connection is freed silently (the
//     ULP never heard of it).
//   - Retry exhaustion: a resync that runs out of retries too fails the
//     connection (ErrRetryExhausted): the peer is unreachable.
//   - Silence while awaiting: a side with nothing unacknowledged has no
//     retransmission timer, yet its ULP may wait for the peer (a pull's
//     data, a grant). While the ULP says so (Conn.SetAwaiting: the
//     transaction layer sets it while the connection holds a transaction
//     and nothing of its own is queued or unacknowledged there — its own
//     backlog is not the peer's silence) a peer silent for an RTO is probed (an ACK that asks
//     for an ACK; AwaitProbes), the interval doubling per probe of the
//     wait, answered or not, up to MaxRTO (a live peer whose own backlog
//     holds our next move is not probed every RTO); RetryLimit+1 unanswered probes fail the
//     connection (ErrRetryExhausted), a peer that dropped its half
//     answers the first with a bad-CID NACK (ErrPeerReset). Nothing is
//     sent while the peer talks, nor on a connection without work in
//     progress; Options.IdleTimeout, if it runs out first, fails it
//     sooner (ErrIdleTimeout). A closing connection whose own ConnClose
//     was acknowledged and whose peer's has not come waits the same way
//     (no timer of its own runs then): a peer that gave up its half
//     answers the first probe with a bad-CID NACK (ErrPeerReset), a
//     silent one fails it after RetryLimit+1 probes.
//   - Peer failure: a frame to a CID the peer does not know (it restarted,
//     or aborted or timed out its half) earns a bad-CID NACK, rate-limited
//     by a token bucket (Options.BadCIDNackRate, BadCIDNackBurst;
//     TxBadCIDNack, BadCIDNackSuppressed). It names the CID it answered;
//     the sender finds its connection by that peer CID and the NACK's
//     source address and fails it (ErrPeerReset) within a round trip. A
//     ConnOpen from a peer's address reusing a peer CID we know with other
//     initial BSNs means that peer restarted: the old connection fails the
//     same way and the new one is accepted. ErrPeerFatal: the peer's ULP
//     sent a ulp-fatal NACK.
//   - Idle timeout (Options.IdleTimeout, default 10 s): nothing from the
//     peer for that long fails the connection (ErrIdleTimeout,
//     IdleTimeouts). Options.KeepAlive (default 1 s) probes a silent peer
//     (an ACK that asks for an ACK; KeepAliveSent) so that a live one is
//     not taken for dead; a restarted one answers the probe with a
//     bad-CID NACK. Both are on by default, so no half of a connection
//     outlives its peer by more than the idle timeout; the cost is a
//     probe and its answer per second each way on an idle connection
//     (none on a busy one). Negative values turn them off.
//   - A full table: a ConnOpen that finds no free slot (refused with a
//     resource-exhausted NACK; the initiator's setup timer resends it)
//     has every connection silent for an RTO probed at once and then
//     until it answers (ReclaimProbes; one pass per InitialRTO at most),
//     so that the halves of peers that restarted (bad-CID NACK) or
//     vanished (RetryLimit+1 unanswered probes, ErrRetryExhausted) free
//     their slots within a few round trips: an initiator that crashes and
//     restarts again and again cannot hold the table.
//   - Giving up: a side that fails a connection on its own timers
//     (ErrRetryExhausted, ErrIdleTimeout, ErrOpenTimeout) tells the peer
//     with the bad-CID NACK the peer's next frame would earn, sent at
//     once (GiveUpNotices; rate-limited with the others), so that a peer
//     with nothing outstanding ends its half within a round trip if the
//     path to it works (ErrPeerReset there).
//   - Abort: the local ULP ends it (ErrAborted); the peer is not told and
//     learns from the bad-CID NACK its next frame earns.
//   - Stop: the endpoint drops every connection (ErrStopped) and tells
//     nobody: no event, no NACK; peers learn as after an abort.
//
// Every failure (ErrOpenTimeout, ErrRefused, ErrRetryExhausted,
// ErrPeerReset, ErrPeerFatal, ErrIdleTimeout, ErrAborted) goes the same
// way, in this order: every outstanding packet's CAM entry, timer and
// retained frame are released, the connection's timers are cancelled and
// its queued ACKs, NACKs and control packets dropped, its slot is freed
// (its CID goes stale: later frames to it earn bad-CID NACKs) and its
// handle reads StateFailed and Conn.Err; then, if the ULP knew of the
// connection, ULP.Event gets EventFailed with that error, exactly
// once, on the polling goroutine (for Abort, before Abort returns). The
// ULP may Open again at once. ConnFailed counts every failure.
//
// The counters that tell these apart: ResyncSent and Abandoned (packets
// given up on after their retries; Abandoned also counts the resyncs of
// packets the ULP gave up, GivenUp), TxRetransmit and TxEarlyRetransmit
// (with SpuriousEarlyRetransmit),
// AckForged, NackForged (a NACK whose echo names no transmission of its
// PSN) and NackStale (acknowledgements ignored), RxBadSource
// (packets from a stranger), RxUnknownCID and RxStaleCID (frames for no
// connection) with TxBadCIDNack and BadCIDNackSuppressed, AwaitProbes
// (SetAwaiting's and a closing connection's probes), KeepAliveSent and
// IdleTimeouts, ReclaimProbes, GiveUpNotices, EarlyReplays and
// ReplayCacheFull (dcconnect.go), ConnFailed and
// ConnClosed.
//
// # Determinism
//
// The endpoint reads no clock of its own: time is Poll's now (the wheel's
// start is read from Options.Clock once). Its random choices (initial
// PSNs, CID generations, CAM hash keys) come from Options.Seed; Seed 0 (the
// default) draws a seed from crypto/rand, so that a restarted endpoint
// does not reuse its CIDs and initial PSNs and no one can predict them,
// except under a clock.Virtual, where 0 is a seed like any other. With a
// seed, the same input frames at the same times give the same output,
// which is what the simulator (package sim) relies on.
package rt
