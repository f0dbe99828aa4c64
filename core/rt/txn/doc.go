// Package txn is the transaction layer of peregrine's reliable transport
// (SEEDS §S0, part 2) and the interface its upper-layer protocol (ULP)
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
// number (SSN). Messages longer than one packet (Segment bytes) travel as
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
// left in flight.
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
//   - Contexts, reorder entries, scheduler items and completion slots are
//     preallocated; an operation holds one context from Push/Pull to its
//     completion, a peer's request from its first packet to its release
//     (a pull: until its data is acknowledged).
//
// # Failure
//
// When a connection fails (peer restart, unreachable peer) or is closed,
// every outstanding operation on it completes with StatusConnFailed (or
// the error it already had), in posting order; the peer's requests are
// dropped; nothing stays allocated. Stop does the same for every
// connection.
package txn
