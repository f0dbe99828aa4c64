// Package host is the appliance's side of the sidecar: a Server listens on
// a Unix socket, gives each application that attaches a shared-memory
// channel of its own (host/shm) and carries the application's operations
// between that channel and one peregrine Endpoint. The application's side
// is peregrine.Attach (internal/sidecar underneath).
//
// # The two doors
//
// An application uses the transport in-process (peregrine.NewHost, then
// Host.Open on a port) or through a running appliance (peregrine.Attach
// on its socket). Both return a *peregrine.Endpoint with the same calls, so
// an application switches doors in the line that makes its endpoint:
//
//	ep, err := h.Open("afxdp:eth1", peregrine.Options{IP: ip})                    // in-process
//	ep, err := peregrine.Attach("/run/peregrine.sock", peregrine.AttachOptions{}) // sidecar
//
// # Control and data
//
// Control (attach, listen, accept, dial, close, register, deregister) is a
// request and a reply on the socket (host/ctl: SOCK_SEQPACKET, versioned,
// every message length-checked). The attach reply carries the channel's
// memfd with SCM_RIGHTS, a register reply the region's. Data never crosses
// the socket: the application writes a message into a run of consecutive
// buffers of its channel's pool (one span of the mapping, so a message of
// several buffers is still one slice for the transport) and a descriptor
// (op, connection, first buffer, offset, length, cookie) into the
// channel's submit ring; a push or a pull names a region instead, with the
// peer's key and offset; the appliance's Poll takes it, checks it and starts the operation
// on the Endpoint; when it completes, Poll writes a completion (cookie,
// status, length) into the completion ring.
//
// # Who owns a buffer, and where bytes are copied
//
// A buffer is the application's until it names it in a descriptor and
// again once the completion with that cookie is in the completion ring. In
// between the Endpoint holds a slice of the channel's mapping: a Send's
// message goes from that slice to the wire with no copy in the appliance
// (the transport reads it as each packet is built, resends too); a Recv's
// message is copied once, from the receive slot the transport placed it in
// by delivery index into the application's buffer, as the in-process
// asynchronous Recv copies it into the caller's. The client copies a
// caller's []byte into a buffer on Send and out of one on Recv (the
// blocking calls take caller buffers, as in-process); a Recv it posts ahead
// of the call that will take it (shm.FlagAhead) is an ordinary Recv here,
// counted unused rather than failed when it ends without a message. A region is a memfd
// of its own that both sides map: the transport pushes from it, pulls into
// it and takes the peers' pushes in place, no copy on either side; the
// appliance unmaps it once it is deregistered and no operation names it.
//
// # Poll
//
// Poll never blocks and does a bounded batch per channel: it reaps the
// channel's finished operations into the completion ring, then takes at
// most as many descriptors as the completion ring can still answer (so a
// completion is never dropped for want of room) and at most Options.Batch.
// Run has the endpoint's own poll loop call Poll after each of the
// transport's polls, so that a descriptor, the operation it starts and its
// completion meet on one goroutine and no hand-off between threads costs a
// wake-up; there Poll never waits for a lock either (an application whose
// control request holds its state is skipped for a round). Control
// requests run on each application's own goroutine and share an
// application's state with Poll under that application's mutex, taken once
// per Poll, never per descriptor.
//
// An endpoint's loop that sleeps after a quiet spell (PollLoop, the
// adaptive or sleep policy) would leave a descriptor published meanwhile
// waiting for its sleep's end. Each application gets a bell instead (ctl.TBell):
// an eventfd of its own, which the loop sleeps on (lcore.Loop.WakeOn); the
// poll on the loop mirrors the loop's sleep into every channel's header
// before it reads the submit ring, and the client writes its bell after a
// descriptor when it finds the header set (package shm). An application's
// bell is closed at its detach; ringing it needlessly costs the loop a
// wake-up, as a frame would. An endpoint whose callers poll (PollCaller)
// gives no bell: descriptors then wait for its loop's sleep to end.
//
// # Isolation and faults
//
//   - The socket is created with Options.Mode (0660) and, when set, owner
//     Options.UID and group Options.GID.
//   - Every attach gets a new memfd, sealed against shrinking and growing,
//     that no other application is given; nothing of the protocol names a
//     channel, so an application can reach only its own.
//   - Every descriptor is copied out of the ring once and checked: a known
//     op, a connection this application owns, and a span within its pool
//     (a send or a receive: a buffer of the pool, an offset within it, a
//     length that ends by the pool's end) or within a region it holds (a
//     push or a pull). A bad one is counted (by
//     reason, AppStats) and completed with StatusInvalid; Poll never
//     touches memory outside the application's channel.
//   - Quotas per application (Quota): channels per user (peer credentials),
//     buffers and buffer size per channel, connections and regions (count
//     and bytes) per channel; a
//     request over quota is refused with peregrine.ErrBusy naming the quota.
//   - An application that dies is an end of file on its socket: its
//     operations are cancelled, its connections closed, its listener
//     closed, and once every operation has completed (the Endpoint holds
//     slices of the channel until then) its channel is unmapped and closed.
//     Others are unaffected.
//   - An appliance that dies is an end of file on the client's socket:
//     every call of the client returns peregrine.ErrClosed.
package host
