package peregrine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/pmd"
)

// A sharded endpoint (Options.Shards > 1): one port opened with a queue
// per shard and split among the shards by core/shard, and one engine per
// shard, each on its own poll loop, driving queue i with shard i in the
// top bits of every CID it allocates. The engines share nothing per
// packet: each has its own transport, connection table, submission ring,
// spare ops and poll token; a frame that arrives on another shard's queue
// moves over that pair's SPSC ring (counted, ShardStats.SteeredOut).
//
// What spans the shards is control: Dial deals connections round robin,
// one Listener takes the connections every shard accepts, Register puts
// a region in every shard's table under one key, and Close stops them all.

// group is a sharded endpoint's shared state; none of it is on the
// per-packet path.
type group struct {
	host    *Host
	dev     port.Port
	set     *shard.Set
	engines []*engine
	pub     *Endpoint
	next    atomic.Uint64 // the next Dial's shard, modulo the count
	// nextQueue is the next NewSendQueue's shard, modulo the count.
	nextQueue atomic.Uint64

	// Registrations go to every shard one after the other, under mu, so
	// that every shard's table sees the same sequence on each user slot.
	mu   sync.Mutex
	free []int // user region slots not in use
	// keys[i][j] is shard i's placeholder key of user slot j while the
	// slot is free; written by shard i's loop only.
	keys [][]uint32

	closeOnce sync.Once
	closeErr  error
}

// placeholder is the memory of a free user region slot: one byte peers
// may neither read nor write.
var placeholder = []byte{0}

// shardSpec returns spec with the queues every shard needs (and, for an
// AF_XDP port whose XDP program steers by UDP port, the CID bits it
// steers by), or an error naming the parameter that contradicts Shards.
func shardSpec(spec string, n int) (string, error) {
	s, err := pmd.ParseSpec(spec)
	if err != nil {
		return "", err
	}
	switch s.Driver {
	case "mem", "afxdp", "afpacket":
	default:
		return "", fmt.Errorf("%w: Options.Shards %d needs a port with a queue per shard, and driver %q has one (use mem, afxdp or afpacket)", ErrNotSupported, n, s.Driver)
	}
	var add []string
	if s.Params.Has("queues") {
		if q, err := strconv.Atoi(s.Params.Get("queues")); err != nil || q != n {
			return "", invalidf("spec %q has queues=%s and Options.Shards is %d: a shard drives one queue (give queues=%[3]d, or leave it out)", spec, s.Params.Get("queues"), n)
		}
	} else {
		add = append(add, "queues="+strconv.Itoa(n))
	}
	if s.Driver == "afxdp" && s.Params.Has("udp_port") {
		want := shard.Bits(n)
		if s.Params.Has("shard_bits") {
			if b, err := strconv.Atoi(s.Params.Get("shard_bits")); err != nil || b != int(want) {
				return "", invalidf("spec %q has shard_bits=%s and Options.Shards is %d, whose CIDs carry %d shard bits (give shard_bits=%[4]d, or leave it out)", spec, s.Params.Get("shard_bits"), n, want)
			}
		} else {
			add = append(add, "shard_bits="+strconv.Itoa(int(want)))
		}
	}
	for _, p := range add {
		switch {
		case !strings.Contains(spec, "?"):
			spec += "?"
		case !strings.HasSuffix(spec, "?") && !strings.HasSuffix(spec, "&"):
			spec += "&"
		}
		spec += p
	}
	return spec, nil
}

// buildShards opens spec with opts.Shards queues and starts an engine per
// shard.
func (h *Host) buildShards(spec string, opts Options) (*Endpoint, error) {
	n := opts.Shards
	spec, err := shardSpec(spec, n)
	if err != nil {
		return nil, err
	}
	dev, err := pmd.Open(h.h.env, spec)
	if err != nil {
		return nil, err
	}
	set, err := shard.New(dev, h.h.pool, n, 0)
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	g := &group{host: h, dev: dev, set: set, keys: make([][]uint32, n), free: make([]int, 0, userRegions)}
	for j := userRegions - 1; j >= 0; j-- {
		g.free = append(g.free, j)
	}
	undo := func(err error) (*Endpoint, error) {
		for _, e := range g.engines {
			if e.loop != nil {
				err = errors.Join(err, e.close())
			} else {
				err = errors.Join(err, e.tx.Close())
			}
		}
		return nil, errors.Join(err, set.Close(), dev.Close())
	}
	for i := range n {
		so := opts
		if opts.Seed != 0 { // the shards draw different CIDs and PSNs
			so.Seed = opts.Seed + uint64(i)<<32
		}
		e, err := h.newEngine(fmt.Sprintf("%s#%d", spec, i), so, set.Port(i), shardOf{queue: i, shard: i, bits: set.Bits(), grp: g})
		if err != nil {
			return undo(err)
		}
		g.engines = append(g.engines, e)
	}
	for _, e := range g.engines {
		if err := e.start(); err != nil {
			e.loop = nil
			return undo(err)
		}
	}
	g.pub = &Endpoint{e: g.engines[0], g: g}
	for _, e := range g.engines {
		e.pub = g.pub
	}
	return g.pub, nil
}

// reserveUserRegions fills the user share of the engine's region table
// with placeholders, before anything else registers: a fresh table hands
// out its slots in order, so user slot j is the same table slot with the
// same key on every shard, and Register keeps it so (registerShard).
func (e *engine) reserveUserRegions() error {
	keys := make([]uint32, userRegions)
	for j := range keys {
		r, err := e.tx.Register(placeholder, 0)
		if err != nil {
			return err
		}
		keys[j] = r.Key
	}
	e.grp.keys[e.shard] = keys
	return nil
}

// registerShard runs a group's Register of user slot op.o.off on this
// shard's loop: the slot's placeholder goes, and the region takes the
// table slot it frees at once (the table reuses the slot freed last), so
// the key is the placeholder's slot with the next generation, as on every
// other shard. The key is the op's result.
func (e *engine) registerShard(op *Op) {
	o := &op.o
	keys := e.grp.keys[e.shard]
	j := o.off
	old := keys[j]
	if err := e.tx.Deregister(txn.Region{Key: old}); err != nil {
		e.finish(op, 0, statusOf(err), err)
		return
	}
	r, err := e.tx.Register(o.buf, txn.Access(o.access))
	if err == nil && r.Key&0xffff != old&0xffff {
		_ = e.tx.Deregister(r)
		err = fmt.Errorf("shard %d's region table gave slot %d, not %d", e.shard, r.Key&0xffff, old&0xffff)
	}
	if err != nil {
		if p, perr := e.tx.Register(placeholder, 0); perr == nil {
			keys[j] = p.Key
		}
		e.finish(op, 0, statusOf(err), err)
		return
	}
	e.finish(op, int(r.Key), StatusOK, nil)
}

// deregisterShard undoes registerShard: the region goes and a placeholder
// takes its table slot again.
func (e *engine) deregisterShard(op *Op) {
	o := &op.o
	if err := e.tx.Deregister(txn.Region{Key: o.region.r.key}); err != nil {
		e.finish(op, 0, statusOf(err), err)
		return
	}
	p, err := e.tx.Register(placeholder, 0)
	if err != nil {
		e.finish(op, 0, statusOf(err), err)
		return
	}
	e.grp.keys[e.shard][o.off] = p.Key
	e.finish(op, 0, StatusOK, nil)
}

// onShard runs a region op on shard e and waits for it.
func (g *group) onShard(e *engine, kind opKind, r *Region, mem []byte, access Access, slot int) (int, error) {
	op := e.takeOp()
	op.o.kind, op.o.buf, op.o.access, op.o.region, op.o.off = kind, mem, access, r, slot
	n, err := e.control(context.Background(), op)
	op.o.buf, op.o.region = nil, nil
	e.putOp(op)
	return n, err
}

// register makes mem a region of every shard under one key.
func (g *group) register(mem []byte, access Access) (*Region, error) {
	if len(mem) == 0 || access&^(RemoteWrite|RemoteRead) != 0 {
		return nil, &Error{Op: "register", Status: StatusInvalid, Cause: invalidf("give a non-empty buffer and RemoteWrite, RemoteRead or 0 (%d bytes, access %#x)", len(mem), uint8(access))}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.free) == 0 {
		return nil, &Error{Op: "register", Status: StatusBusy, Cause: fmt.Errorf("a sharded endpoint holds %d regions at once: deregister one", userRegions)}
	}
	slot := g.free[len(g.free)-1]
	r := &Region{}
	for i, e := range g.engines {
		n, err := g.onShard(e, opRegister, r, mem, access, slot)
		if want := r.r.key; err == nil && i > 0 && uint32(n) != want {
			r.r.key = uint32(n)
			_, _ = g.onShard(e, opDeregister, r, nil, 0, slot)
			r.r.key = want
			err = &Error{Op: "register", Status: StatusBusy, Cause: fmt.Errorf("shard %d gave key %#x where shard 0 gave %#x", i, n, want)}
		}
		if err != nil {
			for _, d := range g.engines[:i] {
				_, _ = g.onShard(d, opDeregister, r, nil, 0, slot)
			}
			return nil, err
		}
		r.r.key = uint32(n)
	}
	g.free = g.free[:len(g.free)-1]
	r.r = region{key: r.r.key, mem: mem, e: g.engines[0], ep: g.pub, g: g, slot: slot}
	return r, nil
}

func (g *group) deregister(r *Region) error {
	if r == nil || r.r.g != g {
		return &Error{Op: "deregister", Status: StatusInvalid, Cause: invalidf("the region is not this endpoint's")}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var err error
	for _, e := range g.engines {
		_, ee := g.onShard(e, opDeregister, r, nil, 0, r.r.slot)
		err = errors.Join(err, ee)
	}
	if err == nil {
		g.free = append(g.free, r.r.slot)
	}
	return err
}

// owns reports whether r may be named by this engine's operations: a
// region of this engine, or of its sharded endpoint. It reads the region
// and this engine only: another shard's engine is written by its own
// callers, and its cache lines stay theirs.
func (e *engine) owns(r *Region) bool {
	return r.r.e == e || e.grp != nil && r.r.g == e.grp
}

// dial deals connections round robin: connection k to shard k mod N. The
// peer's shard of the same index accepts it (a ConnOpen belongs to the
// shard its opener's CID names, core/shard), and the connection lives on
// those two shards.
func (g *group) dial(ctx context.Context, peer Addr, opts ConnOptions) (*Conn, error) {
	i := (g.next.Add(1) - 1) % uint64(len(g.engines))
	return g.engines[i].dial(ctx, peer, opts)
}

// newSendQueue deals send queues round robin, as dial does connections:
// queue k runs on shard k mod N's loop, and the connections its SQs open
// live on that shard and the peer's shard of the same index.
func (g *group) newSendQueue(o SendQueueOptions) (*SendQueue, error) {
	i := (g.nextQueue.Add(1) - 1) % uint64(len(g.engines))
	return g.engines[i].newSendQueue(o)
}

// listen makes every shard accept, into one channel: Accept takes the
// connections of every shard in the order they were set up.
func (g *group) listen(opts ConnOptions) (*Listener, error) {
	if err := checkListen(&opts); err != nil {
		return nil, err
	}
	e0 := g.engines[0]
	l := &Listener{l: listener{e: e0, opts: opts, ch: make(chan *Conn, len(g.engines)*e0.opts.MaxConns), closed: make(chan struct{}), shards: g.engines}}
	for i, e := range g.engines {
		if err := e.listenWith(&l.l); err != nil {
			l.l.shards = g.engines[:i]
			_ = l.l.close()
			return nil, err
		}
	}
	return l, nil
}

// close stops every shard, then frees what the hand-off rings hold and
// closes the device.
func (g *group) close() error {
	g.closeOnce.Do(func() {
		var wg sync.WaitGroup
		errs := make([]error, len(g.engines))
		for i, e := range g.engines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = e.close()
			}()
		}
		wg.Wait()
		g.closeErr = errors.Join(errors.Join(errs...), g.set.Close(), g.dev.Close())
		h := &g.host.h
		h.mu.Lock()
		h.open--
		h.mu.Unlock()
	})
	return g.closeErr
}

// shardStats reads every shard's counters.
func (g *group) shardStats() []ShardStats {
	out := make([]ShardStats, len(g.engines))
	for i, e := range g.engines {
		st := e.tx.Transport().Stats()
		sh := g.set.Stats(i)
		out[i] = ShardStats{Dialled: st.ConnOpened, Accepted: st.ConnAccepted, RxFrames: st.RxFrames,
			Received: sh.Received, SteeredOut: sh.SteeredOut, SteeredIn: sh.SteeredIn, HandoffDropped: sh.HandoffDropped}
	}
	return out
}
