package peregrine

import (
	"context"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
)

// This file is the package's surface: every exported type and call, each a
// few lines over the engine (endpoint.go, conn.go, op.go), but for the
// send queue's, which are in mcsq.go.

// HostOptions configure NewHost. Zero fields take their defaults.
type HostOptions struct {
	// Frames is the packet pool's size in frames (default 16384), shared by
	// every endpoint of the host.
	Frames int
	// FrameSize is each frame's size in bytes (default: the pool's, 2 KiB
	// class; raise it for jumbo MTUs).
	FrameSize int
	// Clock is the time every endpoint of the host runs on (nil: the
	// machine's monotonic clock). Tests give a clock.Virtual and move it.
	Clock clock.Clock
}

// Host is this process's share of peregrine: one off-heap packet pool and
// the driver environment that endpoints open their ports in. Endpoints on
// the two ends of a "mem:" pair must come from the same Host.
type Host struct{ h host }

// NewHost makes a host.
func NewHost(opts HostOptions) (*Host, error) { return newHost(opts) }

// Close releases the pool. Every endpoint must be closed first: a pool with
// frames still in use is an error (ErrBusy) and stays open.
func (h *Host) Close() error { return h.close() }

// Idle says what an endpoint's poll loop does when it finds nothing to do.
type Idle uint8

const (
	// IdleAdaptive spins for a while after work (longer than a round
	// trip), then yields, then sleeps: busy-poll latency while traffic
	// flows, little CPU when it stops. The default.
	IdleAdaptive Idle = iota
	// IdleBusy spins always: the lowest latency, a whole CPU.
	IdleBusy
	// IdleSleep sleeps with back-off after a few idle polls: the least
	// CPU, up to a millisecond more latency after a quiet spell.
	IdleSleep
)

func (i Idle) String() string {
	switch i {
	case IdleAdaptive:
		return "adaptive"
	case IdleBusy:
		return "busy"
	case IdleSleep:
		return "sleep"
	}
	return "idle?"
}

// Poll says which goroutine runs an endpoint's engine.
type Poll uint8

const (
	// PollLoop runs the engine on the endpoint's own poll loop goroutine
	// (pinned when Options.Pin is set): callers hand it their ops and park
	// until it hands them back. The default; it suits many callers, and a
	// loop with a CPU of its own.
	PollLoop Poll = iota
	// PollCaller runs to completion on the caller's goroutine: a blocking
	// call, Op.Wait and CompletionQueue.Wait poll the engine themselves
	// until their op completes, one caller at a time (the others wait for
	// their ops, or for the turn to poll). Between calls the endpoint's
	// loop keeps timers, accepts and closes going, idling with IdleSleep
	// (Options.Idle does not apply). No hand-off between goroutines on the
	// way: the lowest cost per operation when the CPUs are few. An
	// asynchronous op nobody waits on progresses at the loop's pace.
	PollCaller
)

func (p Poll) String() string {
	switch p {
	case PollLoop:
		return "loop"
	case PollCaller:
		return "caller"
	}
	return "poll?"
}

// Options configure an endpoint (Host.Open). IP is required; the zero value
// of the rest selects the defaults, with every mechanism that changes the
// wire (IOI, global QP numbers) off.
type Options struct {
	// IP is the endpoint's address (198.18.0.0/15 in tests).
	IP netip.Addr
	// CPU pins the poll loop's thread to this CPU when Pin is set: the
	// loop's goroutine is then locked to that thread and never yields its
	// processor while it has work, so the process needs more processors
	// (GOMAXPROCS) than pinned loops for its callers. Unpinned, the loop is
	// an ordinary goroutine that shares the processors with the callers.
	// Under PollCaller the loop is never pinned: the callers poll.
	CPU int
	Pin bool
	// Idle is the poll loop's idle policy (default IdleAdaptive).
	Idle Idle
	// Poll says who polls the engine: its loop (PollLoop, the default) or
	// the callers waiting for their ops (PollCaller).
	Poll Poll
	// MaxConns bounds the connections (default 64).
	MaxConns int
	// MaxOps bounds the operations in flight at once, both directions
	// (default 1024); more wait in the endpoint's backlog.
	MaxOps int
	// IOI turns on IOI forwarding (a large message's middle sprayed over
	// the paths, its head and tail in order) for the data of every
	// connection's pushes and pulls. It changes the wire: both ends need it.
	IOI bool
	// GlobalQPNs turns on 24-bit global QP numbers in every packet. It
	// changes the wire: a peer without them cannot talk to this endpoint.
	GlobalQPNs bool
	// MCSQ runs the multi-channel send queue (sched/mcsq) in the
	// endpoint's poll, for Endpoint.NewSendQueue: queues that push and
	// pull to any peers over a small pool of connections. It does not
	// change the wire (its peers need nothing of it); an endpoint without
	// it polls the transport alone, at no cost.
	MCSQ bool
	// RetryLimit is how many timeouts a packet survives before the
	// transport gives up on it (default 7; 1..255).
	RetryLimit int
	// IdleTimeout fails a connection whose peer stays silent this long
	// (default 10 s), keepalives included: how long a dead peer takes to
	// be found when nothing of ours is outstanding.
	IdleTimeout time.Duration
	// Shards runs the endpoint as that many shards (default 1; at most
	// 256), each its own engine on its own poll loop (pinned to CPU+i with
	// Pin) driving queue i of the port, which Open opens with a queue per
	// shard: "mem:" pairs with queues=N (both ends need the same Shards),
	// "afxdp:" and "afpacket:" with queues=N, and an "afxdp:" spec with
	// udp_port gets shard_bits too, so that its XDP program steers each
	// frame to the queue of the shard its CID names. A spec that asks for
	// other queues or shard bits is refused. The shards share nothing per
	// packet: Dial deals connections round robin, a Listener takes every
	// shard's, a Conn's calls go to its shard, and a Region is registered
	// with every shard under one key (at most 256 at once). MaxConns and
	// MaxOps bound each shard; Poll applies to each (under PollCaller
	// every shard has its own poll token). A frame that arrives on another
	// shard's queue is handed over in software and counted
	// (Endpoint.ShardStats).
	Shards int
	// Seed makes the transport's random choices replay (0: random, except
	// under a virtual clock). Tests only.
	Seed uint64
}

// Addr is where an endpoint is: its IP and its port's MAC address (the
// transport runs over Ethernet and does not resolve addresses).
type Addr struct {
	IP  netip.Addr
	MAC [6]byte
}

// Endpoint is one port under the reliable transport: driven by its own poll
// loop goroutine in this process (Host.Open), or by a running appliance's
// (Attach). The two doors give the same type with the same calls. Its calls
// may be made from any goroutine.
type Endpoint struct {
	e  *engine    // in-process (a sharded endpoint's shard 0)
	g  *group     // in-process with Options.Shards > 1
	sc *sidecarEP // through the sidecar
}

// Open opens the port spec ("mem:PAIR/END", "afxdp:IFACE?…",
// "afpacket:IFACE?…"; see pmd) and starts the endpoint's poll loop.
func (h *Host) Open(spec string, opts Options) (*Endpoint, error) { return h.open(spec, opts) }

// AttachOptions configure Attach: the geometry of the shared-memory
// channel to ask the appliance for. Zero fields take the appliance's
// defaults (peregrine serve's --buffers, --buffer-size, --ring).
type AttachOptions struct {
	// Buffers and BufSize size the channel's buffer pool. A message
	// through the sidecar occupies a run of consecutive buffers while it
	// is in flight, so the pool bounds the longest message (Buffers ×
	// BufSize; 8 MiB takes 128 buffers of 64 KiB) and the bytes in
	// flight.
	Buffers int
	BufSize int
	// RingSize bounds the operations in flight at once (a power of two).
	RingSize int
}

// Attach attaches to the appliance (peregrine serve) listening on the Unix
// socket and returns an Endpoint that runs its connections through the
// appliance's endpoint: the other door, with the same calls as Host.Open's.
// Its address is the appliance's.
func Attach(socket string, opts AttachOptions) (*Endpoint, error) { return attach(socket, opts) }

// Addr returns the endpoint's address, for its peers' Dial.
func (ep *Endpoint) Addr() Addr {
	if ep.sc != nil {
		return ep.sc.addr
	}
	return ep.e.addr
}

// Close stops the endpoint: every connection ends, every operation
// completes (ErrClosed), the poll loop exits, the port closes and every
// packet frame returns to the host's pool. Idempotent. Through the
// sidecar it detaches: the appliance closes the connections and ends the
// operations; the channel and the regions' mappings are unmapped.
func (ep *Endpoint) Close() error {
	if ep.sc != nil {
		return ep.sc.close()
	}
	if ep.g != nil {
		return ep.g.close()
	}
	return ep.e.close()
}

// ConnOptions configure a connection (Dial, Listen for the ones accepted).
type ConnOptions struct {
	// Ordered connections deliver this side's operations to the peer and
	// complete them here in posting order; unordered ones (the default)
	// each as soon as it is done. An accepted connection is ordered if the
	// peer dialled it so.
	Ordered bool
	// RecvSlots is how many messages the peer may have in flight towards
	// this side before it waits for a Recv (default 8): the transport
	// keeps that many receive buffers posted, and places every message's
	// packets into its buffer by delivery index as they arrive.
	RecvSlots int
	// MaxMessage is the longest message this side receives (default
	// 64 KiB, at most 1 GiB): each slot is this large. A peer's longer Send
	// fails with ErrTooLarge there.
	MaxMessage int
	// Timeout ends every Send, Push and Pull of the connection that has
	// not completed this long after posting with ErrTimeout (0: none; the
	// transaction layer's per-operation timeout, on the endpoint's clock),
	// and every Recv no message has matched this long after posting (the
	// connection lives on: a later message goes to a later Recv). A
	// context's deadline also ends any call. Through the sidecar the
	// appliance's endpoint applies it.
	Timeout time.Duration
}

// ShardStats are one shard's figures (Endpoint.ShardStats): the
// connections its transport dialled and accepted, the frames it took in,
// and what crossed between shards in software: Received frames came from
// its device queue, SteeredOut of them named another shard and were handed
// over (HandoffDropped found that shard's ring full and were dropped), and
// SteeredIn came from other shards.
type ShardStats struct {
	Dialled, Accepted                               uint64
	RxFrames                                        uint64
	Received, SteeredOut, SteeredIn, HandoffDropped uint64
}

// ShardStats returns each shard's figures, shard i at index i (one entry
// for an endpoint with one shard; nil through the sidecar). Safe while
// the loops run.
func (ep *Endpoint) ShardStats() []ShardStats {
	switch {
	case ep.sc != nil:
		return nil
	case ep.g != nil:
		return ep.g.shardStats()
	}
	st := ep.e.tx.Transport().Stats()
	return []ShardStats{{Dialled: st.ConnOpened, Accepted: st.ConnAccepted, RxFrames: st.RxFrames}}
}

// Dial opens a connection to peer and waits until it is established.
func (ep *Endpoint) Dial(ctx context.Context, peer Addr, opts ConnOptions) (*Conn, error) {
	if ep.sc != nil {
		return ep.sc.dial(ctx, peer, opts)
	}
	if ep.g != nil {
		return ep.g.dial(ctx, peer, opts)
	}
	return ep.e.dial(ctx, peer, opts)
}

// Listener accepts the connections peers dial to an endpoint.
type Listener struct{ l listener }

// Listen makes the endpoint accept connections; without a listener a peer's
// Dial is refused (ErrRefused). An endpoint has at most one listener.
func (ep *Endpoint) Listen(opts ConnOptions) (*Listener, error) {
	if ep.sc != nil {
		return ep.sc.listen(opts)
	}
	if ep.g != nil {
		return ep.g.listen(opts)
	}
	return ep.e.listen(opts)
}

// Accept waits for the next connection a peer dialled.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) { return l.l.accept(ctx) }

// Close stops accepting; connections accepted already stay open.
func (l *Listener) Close() error { return l.l.close() }

// Conn is a reliable connection. Its calls may be made from any goroutine;
// the operations of one connection are posted in the order their calls
// entered the endpoint.
type Conn struct{ c conn }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() Addr { return c.c.peer }

// Ordered reports whether the connection is ordered.
func (c *Conn) Ordered() bool { return c.c.ordered }

// Send sends msg as one message, which the peer's next Recv returns whole.
// msg is the transport's until Send returns: it is read as packets go out
// and resent from, never copied into a staging buffer.
func (c *Conn) Send(ctx context.Context, msg []byte) error {
	_, err := c.c.blocking(ctx, opSend, msg, nil, 0, RemoteAddr{})
	return err
}

// Recv waits for the next message and copies it into buf, returning its
// length. A message longer than buf is an error wrapping ErrTooLarge and
// stays queued for a Recv with a larger buffer. It waits at most the
// connection's Timeout (ErrTimeout) when that is set.
func (c *Conn) Recv(ctx context.Context, buf []byte) (int, error) {
	return c.c.blocking(ctx, opRecv, buf, nil, 0, RemoteAddr{})
}

// Push writes n bytes of local, from offset off, into the peer's region at
// remote (an RDMA write). It returns once the peer has placed them.
func (c *Conn) Push(ctx context.Context, local *Region, off, n int, remote RemoteAddr) error {
	_, err := c.c.blocking(ctx, opPush, nil, local, off, remote.span(n))
	return err
}

// Pull reads n bytes of the peer's region at remote into local, from
// offset off (an RDMA read).
func (c *Conn) Pull(ctx context.Context, local *Region, off, n int, remote RemoteAddr) error {
	_, err := c.c.blocking(ctx, opPull, nil, local, off, remote.span(n))
	return err
}

// SendAsync starts Send with op: msg belongs to the transport until op
// completes. op must not be in flight.
func (c *Conn) SendAsync(op *Op, msg []byte) error {
	return c.c.start(op, opSend, msg, nil, 0, RemoteAddr{})
}

// RecvAsync starts Recv into buf with op: buf belongs to the transport
// until op completes (op.Result's n is the message length).
func (c *Conn) RecvAsync(op *Op, buf []byte) error {
	return c.c.start(op, opRecv, buf, nil, 0, RemoteAddr{})
}

// PushAsync starts Push with op.
func (c *Conn) PushAsync(op *Op, local *Region, off, n int, remote RemoteAddr) error {
	return c.c.start(op, opPush, nil, local, off, remote.span(n))
}

// PullAsync starts Pull with op.
func (c *Conn) PullAsync(op *Op, local *Region, off, n int, remote RemoteAddr) error {
	return c.c.start(op, opPull, nil, local, off, remote.span(n))
}

// Close closes the connection: operations already posted complete first,
// Recvs waiting end with ErrClosed, new calls fail with ErrClosed. It
// returns once the endpoint has taken the close; the peer learns of it
// through the transport's close handshake.
func (c *Conn) Close() error { return c.c.close() }

// Access says what peers may do with a registered region.
type Access uint8

const (
	// RemoteWrite lets peers Push into the region.
	RemoteWrite Access = 1 << iota
	// RemoteRead lets peers Pull from it.
	RemoteRead
)

// Region is memory registered with an endpoint: the source and destination
// of this side's pushes and pulls, and, with Access, memory the peers push
// into and pull from. The endpoint reads and writes it on its poll loop
// while operations naming it are in flight.
type Region struct{ r region }

// Register registers mem. The endpoint keeps mem until Deregister; the
// caller must not resize it.
//
// Through the sidecar the region is memory the appliance maps too (a memfd
// of its own), made with mem's bytes: from then on the region's memory is
// Bytes, not mem — write what to push and read what was pulled or pushed
// there, and the same code runs through both doors.
func (ep *Endpoint) Register(mem []byte, access Access) (*Region, error) {
	if ep.sc != nil {
		return ep.sc.register(mem, access)
	}
	if ep.g != nil {
		return ep.g.register(mem, access)
	}
	return ep.e.register(mem, access)
}

// Deregister forgets the region; operations in flight on it keep their
// slice of it until they complete. Through the sidecar, Bytes is unmapped
// here when it returns (the appliance keeps its mapping until its
// operations on the region have completed).
func (ep *Endpoint) Deregister(r *Region) error {
	if ep.sc != nil {
		return ep.sc.deregister(r)
	}
	if ep.g != nil {
		return ep.g.deregister(r)
	}
	return ep.e.deregister(r)
}

// Remote returns the address of offset off of the region, for a peer's
// Push and Pull (hand it to the peer in a message).
func (r *Region) Remote(off uint64) RemoteAddr { return RemoteAddr{Key: r.r.key, Addr: off} }

// Len returns the region's length.
func (r *Region) Len() int { return len(r.r.mem) }

// Bytes returns the registered memory. The endpoint writes it on its poll
// loop (this side's pulls, the peers' pushes): read it once a completion
// of this endpoint says the writing is over — a Pull's, or a Recv of the
// message with which the peer says its Push completed — which orders the
// read after the loop's writes.
func (r *Region) Bytes() []byte { return r.r.mem }

// RemoteAddr names memory in a peer's registered region: its key and an
// offset in it.
type RemoteAddr struct {
	Key  uint32
	Addr uint64
	n    int // the span's length, set by Push and Pull
}

func (a RemoteAddr) span(n int) RemoteAddr { a.n = n; return a }

// Op is one asynchronous operation, as a work request and its completion
// in one (an ibv_send_wr whose wr_id is the Op itself, or an io_uring SQE
// and CQE): start it with a *Async call, then Wait for it, select on Done,
// or reap it in batches from a CompletionQueue. The caller owns the Op and
// may start it again once it completed; its buffer is the caller's again
// then, and not before.
type Op struct {
	// Tag is the caller's own word, untouched.
	Tag uint64
	// CQ, when set before the start, receives the Op when it completes.
	CQ *CompletionQueue

	o opState
}

// Wait waits for the op to complete and returns its result. If ctx ends
// first the op is cancelled and Wait returns once the endpoint has
// stopped it (the buffer is the caller's again then): the error matches
// ErrCancelled and ctx.Err(). One goroutine waits for an op.
func (op *Op) Wait(ctx context.Context) (int, error) { return op.wait(ctx) }

// Done delivers one value when the op completes (nil before the op's
// first start): select on it beside other channels, then take the result
// with Result.
func (op *Op) Done() <-chan struct{} {
	// Whoever holds the channel may wait on it: its loop wakes it. An op
	// that completed before anyone watched got no token: it gets it here.
	o := &op.o
	o.watched.Store(true)
	if o.state.Load() == stateDone && len(o.done) == 0 {
		select {
		case o.done <- struct{}{}:
		default:
		}
	}
	return o.done
}

// Result returns the op's result once it completed (Completed reports
// whether it has): the bytes moved and the error, if any.
func (op *Op) Result() (int, error) { return op.result() }

// Completed reports whether the op has completed.
func (op *Op) Completed() bool { return op.o.state.Load() == stateDone }

// Status returns how the op ended (valid once it completed).
func (op *Op) Status() Status { return op.o.status }

// Cancel asks the endpoint to stop the op; it completes with ErrCancelled
// unless it finished first. It returns at once.
func (op *Op) Cancel() { op.cancel() }

// CompletionQueue collects the ops started with it (Op.CQ) as they
// complete, for one goroutine to reap in batches, as ibv_poll_cq and
// io_uring's completion ring are reaped. The ops may belong to several
// connections and endpoints.
type CompletionQueue struct{ q cqueue }

// NewCompletionQueue makes a queue for up to size ops in flight at once
// (a power of two; starting more with it fails with ErrBusy).
func NewCompletionQueue(size int) (*CompletionQueue, error) { return newCQ(size) }

// Poll moves up to len(out) completed ops into out and returns how many,
// without waiting.
func (q *CompletionQueue) Poll(out []*Op) int { return q.q.poll(out) }

// Wait waits until at least one op completed (or ctx ends) and moves up to
// len(out) into out.
func (q *CompletionQueue) Wait(ctx context.Context, out []*Op) (int, error) {
	return q.q.wait(ctx, out)
}
