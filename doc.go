// Package peregrine is the front door to peregrine's reliable transport for
// Go programs: open an endpoint on a port, dial or listen, and move whole
// messages (Send, Recv) or registered memory (Push, Pull) — without driving
// poll loops, completion queues or packet pools by hand.
//
//	h, _ := peregrine.NewHost(peregrine.HostOptions{})
//	ep, _ := h.Open("afxdp:eth1?queue=0", peregrine.Options{IP: ip})
//	c, _ := ep.Dial(ctx, peer, peregrine.ConnOptions{})
//	err := c.Send(ctx, msg)
//	n, err := c.Recv(ctx, buf)
//
// The surface is peregrine.go; the transport underneath is core/rt (packets,
// windows, retransmission) and core/rt/txn (pushes, pulls, two-sided
// Sends), whose docs say what each guarantee rests on.
//
// # Hosts, endpoints and their loops
//
// A Host is a process's packet pool (off the Go heap) and driver
// environment. Host.Open opens a port by its spec (pmd: "mem:PAIR/END" for
// in-memory pairs, the two ends from the same Host; "afxdp:IFACE?…";
// "afpacket:IFACE?…") and starts the endpoint's poll loop: one goroutine
// (core/lcore) that runs the transport and nothing else. With Options.Pin
// it is locked to its OS thread, pinned to Options.CPU, and never yields
// its processor while it works (a yield on a locked thread would wake
// threads through futexes); unpinned, it is an ordinary goroutine that
// yields to the callers after waking one. Every call of this package may
// be made from any goroutine; none touches the transport: it hands an op
// to the loop (ringing the loop awake if it sleeps after a quiet spell:
// lcore.Loop.Ring) and waits for the loop to hand it back — looking at
// the op, yielding, for up to 200 µs, then parked on it (the loop wakes
// only a parked waiter).
//
// With Options.Poll set to PollCaller the waiting runs the engine instead:
// a blocking call, Op.Wait and CompletionQueue.Wait take the endpoint's
// poll token (one atomic compare-and-swap; one holder at a time) and poll
// the transport on their own goroutine until their op completes, with no
// goroutine hand-off on the way. A caller that finds the token taken looks
// at its op, yielding, and then parks until the op completes or the token
// is free. A waiter's first look takes the submissions without polling the
// transport, so a Recv of a message already queued costs no transport
// poll; a blocking Recv that finds the token free takes such a message
// itself, copying it out of its receive slot with no op and no hand-off
// through the submission ring. The loop still runs, never pinned, idling with the sleep policy,
// and polls only while no caller has polled for a millisecond: timers,
// accepts and closes go on between calls. Below, "the loop" means the token's holder in this mode:
// what the loop owns (the transport, the backlog, the connections' receive
// slots, a Send's registration) is owned by whichever goroutine holds the
// token, one at a time, and Close ends with the loop holding it for good.
//
// # Shards
//
// With Options.Shards = N > 1 an endpoint is N engines, each as above
// with a loop of its own (pinned to Options.CPU+i with Pin), and a port
// opened with N queues that core/shard splits among them: shard i drives
// queue i, allocates the CIDs whose top bits say i (core/rt ShardBits),
// and has its own transport, connection table, submission ring, spare
// ops and, under PollCaller, poll token. Nothing is shared between
// shards per packet. A frame arriving on the queue of a shard its CID
// does not name is moved to the owner over an SPSC ring, in software,
// and counted (Endpoint.ShardStats); with mem's steer=queue, and on a
// veth, shard i's frames land on the peer's queue i and none is.
//
// Control spans the shards: Dial deals connections round robin (the
// peer's shard of the same index accepts, and the connection lives on
// those two); a Listener is up on every shard and Accept takes
// their connections through one channel in the order they were set up;
// a Conn is its shard's, and each of its calls goes to that shard's
// engine. Register puts the region in every shard's table under one key,
// shard by shard: each table holds placeholders in a user share of 256
// slots from its start, and a registration replaces slot j's placeholder
// on every shard in turn, so the key is the same everywhere (and checked
// to be). A Region's memory is read and written by whichever shard's
// loop runs an operation on it. Close stops every shard's loop, frees
// what the hand-off rings hold, then closes the port.
//
// # The hand-off, and who owns what
//
// A call fills an Op and publishes it into the endpoint's submission ring,
// a lock-free multi-producer ring (rings.MPSC): no lock on the way in. The
// loop takes a burst of ops per poll, posts them to the transaction layer
// (a refused one waits in the loop's backlog, in order), polls the
// transport, and turns the transaction layer's completions into the ops'
// results. It then publishes each op back with one atomic store of its
// state, and wakes its waiter: a one-slot channel per Op (allocated once
// and reused by every start of that Op), or, for an Op started with a
// CompletionQueue, that queue's ring (rings.MPSC again, one reaper).
// Blocking calls use ops the endpoint preallocated, so a Send, Recv, Push
// or Pull with the caller's buffers allocates nothing in steady state.
//
//   - Send: msg is the transport's from the call until it returns (or the
//     Op completes). The loop registers it as a local-only region for the
//     op's life and the transport reads it as each packet goes out, resends
//     too: no copy into a staging buffer.
//   - Recv: the transport keeps ConnOptions.RecvSlots receive buffers of
//     ConnOptions.MaxMessage bytes posted per connection (receive WQEs,
//     core/rt/txn PostRecv), and the peer's Sends carry a 16-bit delivery
//     index (core/dix) naming their slot, so every packet is placed in its
//     slot on arrival, in any order. A whole message waits there until a
//     Recv takes it: a blocking Recv on a loop-polled endpoint is lent the
//     slot and copies the message into its buffer on its own goroutine,
//     then gives the slot back to be posted again; an asynchronous one,
//     and any Recv under PollCaller, has the poll that matches it copy it
//     and post the slot again there (the one copy on the receive path,
//     either way). buf is the
//     endpoint's from the call until it returns (or the Op completes).
//     Both ends' Sends carry the index: an accepted connection gets it
//     before its first Send (core/rt/txn Conn.SetIndex).
//   - Push and Pull name a registered Region (Endpoint.Register) and an
//     offset; the region's memory is read (push) or written (pull) on the
//     loop while the op is in flight. The peer's memory is named by a
//     RemoteAddr the peer handed over (Region.Remote).
//   - Every op completes exactly once, and its buffer is the caller's again
//     when it has: after a blocking call returns, after Op.Wait returns,
//     after Op.Done delivers, or once a CompletionQueue hands the Op back.
//
// # Cancellation
//
// A blocking call whose context ends, or an Op.Wait whose context ends,
// asks the loop to stop the op and waits for it: an op in the transport is
// cancelled there (core/rt/txn Conn.Cancel: its packets in flight are
// given up, nothing more is written into a pull's buffer, the peer is told
// to drop it), a Recv waiting is unlinked, a Dial is aborted. The call then
// returns an error matching ErrCancelled and ctx.Err(), and the buffer is
// already the caller's again. An op that finished before the cancel took
// effect returns its own result.
//
// # Completions: Wait, Done, or a CompletionQueue
//
// An *Async call starts an Op the caller owns (as an rdma-core work
// request names its wr_id, or an io_uring SQE its user_data: here the Op is
// both request and completion). Wait for one with Op.Wait(ctx), select on
// Op.Done with other channels, or set Op.CQ before the start and reap many
// ops, of any connections and endpoints, in batches with
// CompletionQueue.Poll (non-blocking, as ibv_poll_cq) or Wait (as
// io_uring_wait_cqe). An Op may be started again once it completed.
//
// # Errors
//
// Every failed call returns an *Error naming the operation, its Status and
// the cause below; errors.Is matches one sentinel (ErrClosed, ErrTimeout,
// ErrCancelled, ErrRefused, ErrBusy, ErrTooLarge, ErrPeerGone,
// ErrAbandoned, ErrRemoteAccess, ErrInvalid, ErrNotSupported) and the
// cause's chain (context.Canceled; core/rt reasons such as
// rt.ErrRetryExhausted). Status is the transport's completion status
// (core/rt/txn, each with its nearest ibv_wc_status) plus the endings above
// it; Status.Err maps one to the other:
//
//	transport / rt                          Status              error
//	StatusOK                                StatusOK            nil
//	StatusRemoteAccess (region refused)     StatusRemoteAccess  ErrRemoteAccess
//	StatusAbandoned, StatusRemoteAbandoned  (same)              ErrAbandoned
//	StatusTimeout (ConnOptions.Timeout)     StatusTimeout       ErrTimeout
//	StatusCancelled (context, Op.Cancel)    StatusCancelled     ErrCancelled
//	StatusFlushed (connection aborted)      StatusFlushed       ErrClosed
//	StatusRNRRetryExceeded (no free slot)   (same)              ErrBusy
//	StatusRemoteInvalid, StatusLocalLength  (same)              ErrTooLarge
//	StatusConnFailed: rt.ErrRetryExhausted,
//	  ErrPeerReset, ErrPeerFatal,
//	  ErrIdleTimeout                        StatusPeerGone      ErrPeerGone
//	StatusConnFailed: closed (either side),
//	  rt.ErrAborted, rt.ErrStopped          StatusClosed        ErrClosed
//	rt.ErrRefused (no listener)             StatusRefused       ErrRefused
//	rt.ErrOpenTimeout (Dial unanswered)     StatusTimeout       ErrTimeout
//	rt/txn ErrBusy, ErrTableFull            StatusBusy          ErrBusy
//	bad argument or option                  StatusInvalid       ErrInvalid
//	option not offered here                 StatusNotSupported  ErrNotSupported
//
// A send queue's operations end with the statuses above too: a failure of
// the peer's SQ (sched/mcsq CQE StatusSQFailed, or StatusBlacklisted for the
// operations behind it) maps by its cause — retries exhausted, unreachable,
// reset or silent: StatusPeerGone; the peer refused the connection:
// StatusRefused; a region: StatusRemoteAccess; a timeout: StatusTimeout —
// a local region refused is StatusInvalid, and an endpoint closing under
// it StatusClosed. The cause's chain holds sched/mcsq's error.
//
// # What changes the wire
//
// Options.IOI (IOI forwarding of large pushes and pulls) and
// Options.GlobalQPNs (24-bit QP numbers in every packet) change what goes
// on the wire, so they are off unless asked for and both ends must agree.
// Options.MCSQ does not change the wire; it is an option because it
// changes the endpoint's poll (below), which without it runs the transport
// alone, as before.
//
// # Send queues
//
// With Options.MCSQ the poll runs sched/mcsq's engine in place of the
// transport's poll (the engine polls the transport): the work of the
// endpoint's send queues is distributed over their SQs, and the
// transport's completions that are not the queues' go on to the
// endpoint's own operations (mcsq Options.Foreign), its connection events
// too, but for the SQs' connections (mcsq Engine.Holds). A SendQueue is an
// mcsq pool (DC or RC) and a queue with a table of Depth slots; the mcsq
// queue completes every WR with a CQE of its own (no coalescing: each ends
// one Op), in posting order when Ordered.
//
//   - A post (Push, PushAsync, …) takes a free slot, readies its Op, names
//     it in the slot and posts the WR — the slot's index its cookie — on
//     the mcsq queue's lock-free post ring, from the caller's goroutine: no
//     hand-off through the endpoint's submission ring. Nothing allocates.
//     A full table is ErrBusy for an *Async post; a blocking one waits for
//     a slot while its context allows.
//   - The poll reaps the mcsq queue's CQEs: the slot's Op completes with
//     the status the CQE maps to, and the slot is free again. The region's
//     span is the transport's from the post until then.
//   - Cancellation (a context, Op.Cancel) completes the Op at once with
//     ErrCancelled, but a WR cannot be recalled from the send queue: it
//     runs to its end unobserved, its region span still in use, and only
//     then frees its slot. SendQueue.Close waits for those too.
//   - A peer is a DC target (mcsq Engine.AddTarget) with a flow ID of its
//     own, or an RC QPN whose SQ AddRC connects on the first post to it;
//     either is made once per peer.
//
// # Two doors
//
// An Endpoint runs its transport in this process (Host.Open: its own poll
// loop on a port) or in a running appliance (Attach: peregrine serve's
// endpoint, reached over a Unix socket and a shared-memory channel).
// Both return the same *Endpoint, and Conn, Listener, Region, Op and
// CompletionQueue behave the same behind either, so switching is the line
// that makes the endpoint:
//
//	ep, err := h.Open("afxdp:eth1?queue=0", peregrine.Options{IP: ip})     // in-process
//	ep, err := peregrine.Attach("/run/peregrine.sock", peregrine.AttachOptions{}) // sidecar
//
// Each type holds the state of the door it was made by (a nil pointer for
// the other), and each call goes to its door.
//
// Through the sidecar, control calls (Dial, Listen, Accept, Close,
// Register) are requests on the socket and data operations are descriptors
// on the channel's rings (internal/sidecar, host/shm, host/ctl); every data
// call is an Op there too, finished by whoever reads the completion ring:
// the caller waiting for it (a blocking call, Op.Wait, a CompletionQueue's
// Wait reap the ring themselves, on their own goroutines, so a completion
// wakes no other thread), or a goroutine of the client's for the ops
// nobody is waiting on. Where the sidecar copies:
//
//   - Send copies msg into a run of the channel's buffers as it starts
//     (the caller's heap is not shared with the appliance); the appliance
//     sends from the run without a copy. A message takes as many
//     consecutive buffers as it needs (up to the pool, AttachOptions),
//     which both sides map as one span, so 8 MiB is one descriptor.
//   - Recv: the appliance's transport places the message in its receive
//     slot and copies it into the run; whoever reaps its completion
//     copies it out into buf. After a blocking Recv with a message, the
//     connection's next Recv is posted ahead, as long as that buffer:
//     the next message waits in its run for the call that takes it, and
//     a request-response loop crosses the appliance once a round trip,
//     not twice (one such Recv a connection, in at most an eighth of the
//     pool; the calls see what they would without it).
//   - Push and Pull copy nothing: a sidecar Region is a memfd both sides
//     map, made with mem's bytes by Register; the region's memory is
//     Region.Bytes from then on.
//
// The differences that remain: the sidecar's pool bounds a message and the
// bytes in flight (ErrBusy for an *Async start that finds no room, a wait
// for a blocking one); Options (the port, its CPU, the wire mechanisms)
// are the appliance's; one application listens on an appliance's endpoint
// at a time; and an appliance that goes away ends every call with
// ErrClosed.
package peregrine
