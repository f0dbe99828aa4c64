package peregrine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/pmd"
	_ "github.com/peregrine-net/peregrine/pmd/all" // every driver a spec may name
	"github.com/peregrine-net/peregrine/rings"
)

// A Host's pool and driver environment, and how an endpoint is built on
// them: the port, the transaction layer over it, the poll loop.

// Defaults of Options and ConnOptions.
const (
	defaultFrames     = 16384
	defaultMaxConns   = 64
	defaultMaxOps     = 1024
	defaultRecvSlots  = 8
	defaultMaxMessage = 64 << 10
	maxRecvSlots      = 64
	userRegions       = 256
)

type host struct {
	pool  *mbuf.Pool
	env   *pmd.Env
	clock clock.Clock

	mu     sync.Mutex
	open   int // endpoints not yet closed
	closed bool
}

func newHost(opts HostOptions) (*Host, error) {
	if opts.Frames == 0 {
		opts.Frames = defaultFrames
	}
	if opts.Frames < 0 || opts.FrameSize < 0 {
		return nil, &Error{Op: "host", Status: StatusInvalid, Cause: invalidf("HostOptions.Frames %d and FrameSize %d must not be negative", opts.Frames, opts.FrameSize)}
	}
	pool, err := mbuf.New(mbuf.Options{Name: "peregrine", Frames: opts.Frames, FrameSize: opts.FrameSize})
	if err != nil {
		return nil, &Error{Op: "host", Status: StatusInvalid, Cause: err}
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.NewReal()
	}
	return &Host{h: host{pool: pool, env: &pmd.Env{Pool: pool, Clock: clk}, clock: clk}}, nil
}

func (h *Host) close() error {
	h.h.mu.Lock()
	defer h.h.mu.Unlock()
	if h.h.closed {
		return nil
	}
	if h.h.open > 0 {
		return &Error{Op: "close host", Status: StatusBusy, Cause: fmt.Errorf("%d endpoints still open (close them first)", h.h.open)}
	}
	if err := h.h.pool.Close(); err != nil {
		return &Error{Op: "close host", Status: StatusBusy, Cause: err}
	}
	h.h.closed = true
	return nil
}

func (h *Host) open(spec string, opts Options) (*Endpoint, error) {
	fail := func(st Status, err error) (*Endpoint, error) {
		return nil, &Error{Op: "open " + spec, Status: st, Cause: err}
	}
	if !opts.IP.IsValid() {
		return fail(StatusInvalid, invalidf("Options.IP is required (the endpoint's address, e.g. 198.18.0.1)"))
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = defaultMaxConns
	}
	if opts.MaxOps == 0 {
		opts.MaxOps = defaultMaxOps
	}
	if opts.MaxConns < 1 || opts.MaxConns > 1<<16 || opts.MaxOps < 1 || opts.MaxOps > 1<<16 {
		return fail(StatusInvalid, invalidf("Options.MaxConns %d and MaxOps %d must be in 1..65536", opts.MaxConns, opts.MaxOps))
	}
	if opts.CPU < 0 || opts.Idle > IdleSleep {
		return fail(StatusInvalid, invalidf("Options.CPU %d must not be negative (leave Pin unset for no pinning), Idle %d must be IdleAdaptive, IdleBusy or IdleSleep", opts.CPU, opts.Idle))
	}
	if opts.Shards == 0 {
		opts.Shards = 1
	}
	if opts.Shards < 1 || opts.Shards > shard.MaxShards {
		return fail(StatusInvalid, invalidf("Options.Shards %d is out of range (use 1..%d)", opts.Shards, shard.MaxShards))
	}
	if opts.Poll > PollCaller {
		return fail(StatusInvalid, invalidf("Options.Poll %d must be PollLoop or PollCaller", opts.Poll))
	}
	h.h.mu.Lock()
	if h.h.closed {
		h.h.mu.Unlock()
		return fail(StatusClosed, errors.New("the host is closed"))
	}
	h.h.open++
	h.h.mu.Unlock()
	var ep *Endpoint
	var err error
	if opts.Shards > 1 {
		ep, err = h.buildShards(spec, opts)
	} else {
		ep, err = h.build(spec, opts)
	}
	if err != nil {
		h.h.mu.Lock()
		h.h.open--
		h.h.mu.Unlock()
		return fail(statusOf(err), err)
	}
	return ep, nil
}

func (h *Host) build(spec string, opts Options) (*Endpoint, error) {
	pt, err := pmd.Open(h.h.env, spec)
	if err != nil {
		return nil, err
	}
	e, err := h.newEngine(spec, opts, pt, shardOf{})
	if err != nil {
		return nil, errors.Join(err, pt.Close())
	}
	if err := e.start(); err != nil {
		return nil, errors.Join(err, e.tx.Close(), pt.Close())
	}
	return e.pub, nil
}

// shardOf places an engine in a sharded endpoint: the device queue it
// drives, and its shard in the CIDs it allocates (zero: unsharded).
type shardOf struct {
	queue, shard int
	bits         uint
	grp          *group
}

// newEngine builds an engine on pt without starting its loop; on an
// error the caller closes pt.
func (h *Host) newEngine(spec string, opts Options, pt port.Port, sh shardOf) (*engine, error) {
	var err error
	e := &engine{host: h, name: spec, opts: opts, port: pt, gone: make(chan struct{}), grp: sh.grp, shard: sh.shard,
		conns:  make(map[*txn.Conn]*conn, opts.MaxConns),
		caller: opts.Poll == PollCaller, tokenFree: make(chan struct{}, 1)}
	e.addr = Addr{IP: opts.IP, MAC: [6]byte(pt.Info().MAC)}
	ring := ceilPow2(4 * opts.MaxOps)
	if e.sub, err = rings.NewMPSC[entry](ring); err == nil {
		e.spare, err = newSpareOps(opts.MaxOps)
	}
	if err != nil {
		return nil, err
	}
	// The appliance's software-endpoint defaults serve here too: Swift's
	// own floor, 0.01 packets, paced a connection to a packet per hundred
	// round trips once the loops' scheduling delays read as congestion (an
	// 8 MiB message took over a minute on a loaded machine), and its 25 µs
	// target and the transport's 100 µs least RTO read a descheduled loop
	// as congestion and loss.
	sp := swift.SoftwareParams()
	txOps := 2 * opts.MaxOps
	to := txn.Options{
		Transport: rt.Options{Name: spec, Port: pt, Pool: h.h.pool, Clock: h.h.clock, LocalIP: opts.IP,
			LocalMAC: e.addr.MAC, MaxConns: opts.MaxConns, Seed: opts.Seed, RetryLimit: opts.RetryLimit, MinRTO: rt.SoftwareMinRTO,
			IdleTimeout: opts.IdleTimeout, QPN: rt.QPNOptions{Enabled: opts.GlobalQPNs}, Accept: e.acceptPeer,
			Queue: sh.queue, ShardBits: sh.bits, Shard: sh.shard},
		MaxOps:      txOps,
		CQSize:      txOps + opts.MaxConns*maxRecvSlots,
		MaxRegions:  min(1<<16, opts.MaxConns+opts.MaxOps+userRegions),
		Congestion:  &sp,
		OnConnEvent: e.onConnEvent,
	}
	if opts.IOI {
		to.IOI = ioi.Config{Mode: ioi.ModeIOI}
	}
	if e.tx, err = txn.New(to); err != nil {
		return nil, err
	}
	if sh.grp != nil {
		if err := e.reserveUserRegions(); err != nil {
			return nil, errors.Join(err, e.tx.Close())
		}
	}
	if opts.MCSQ {
		// Every shard of a sharded endpoint runs a queue engine of its
		// own: NewSendQueue deals the queues over the shards.
		if e.mq, err = newMQEngine(e); err != nil {
			return nil, errors.Join(err, e.tx.Close(), pt.Close())
		}
	}
	e.tags = make([]*Op, txOps)
	e.freeTags = make([]int32, 0, txOps)
	for i := txOps - 1; i >= 0; i-- {
		e.freeTags = append(e.freeTags, int32(i))
	}
	e.backlog = newFifo[entry](ring)
	e.cq = make([]txn.Completion, 64)
	e.burst = make([]entry, 64)
	e.fresh = make([]*conn, 0, opts.MaxConns)
	e.reposts = make([]*conn, 0, opts.MaxConns)
	e.pub = &Endpoint{e: e}
	return e, nil
}

// start makes the engine's poll loop and starts it.
func (e *engine) start() error {
	opts, h := e.opts, e.host
	lo := lcore.Options{Name: "peregrine " + e.name, CPU: -1, Clock: h.h.clock, Stages: []lcore.Stage{e}}
	if opts.Pin && opts.Poll != PollCaller {
		// Under PollCaller the callers poll, on threads the application
		// places; the loop only sleeps between calls, and a pinned one
		// would wake a thread on the CPU of a polling caller at each
		// sleep's end (a quarter of a thread wake-up per round trip).
		lo.CPU = opts.CPU + e.shard // shard i on the i-th CPU from Options.CPU
		e.pinned = true
	}
	switch {
	case opts.Poll == PollCaller:
		// The callers poll while they wait; the loop only covers the
		// spells between calls, and must not hold a CPU a caller needs.
		lo.Idle.Mode = lcore.IdleSleep
	case opts.Idle == IdleBusy:
		lo.Idle.Mode = lcore.IdleBusy
	case opts.Idle == IdleSleep:
		lo.Idle.Mode = lcore.IdleSleep
	default:
		lo.Idle.Mode = lcore.IdleAdaptive
	}
	// The loop's own sleeps end when a caller submits (engine.submit
	// rings) or a sidecar application rings its bell (host): an op after
	// a quiet spell waits for no sleep. Under PollCaller the callers poll
	// themselves.
	lo.Doorbell = opts.Poll != PollCaller
	var err error
	if e.loop, err = lcore.New(lo); err == nil {
		err = e.loop.Start()
	}
	return err
}

func ceilPow2(n int) int {
	p := 2
	for p < n {
		p <<= 1
	}
	return p
}
