package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// The fault suite: transactions between nodes of a Cluster,
// each scenario a fault scripted on the cluster's timeline, run over many
// seeds. The invariants are the test's own, checked from the outside (the
// completions, what the target's ULP was handed, the frames on the wire),
// never the library's verdict about itself:
//
//   - every posted operation completes exactly once, OK or with a named
//     status, within faultBound of virtual time after the fault ends;
//     where operations have a timeout (the peer dies or restarts), each
//     ends within it (plus faultOpSlack) of its posting;
//   - on ordered connections, completions come in posting order and the
//     target's ULP sees requests in RSN order; no request is delivered
//     twice; a push's bytes are those its current connection sent;
//   - a pull that completes OK holds the target's bytes; a push that
//     completes OK was handed to the target's ULP;
//   - once the network heals, a live target serves new operations (a probe
//     push and pull per initiator complete OK): no grant credit, context
//     or ordering slot was lost to the fault;
//   - after closing, no transaction is outstanding and no connection slot
//     is held at any live node; after Stop every frame is back in the pool;
//   - each reliable packet (connection, window, PSN) goes on the wire at
//     most RetryLimit+1 times, only its first transmission unflagged as a
//     retransmission (Karn).
//
// Replay a failing seed:
//
//	go test ./sim -run 'TestFaults/NAME$' -seed=N [-frames]

// Shape of every run.
const (
	faultSegment = 256              // payload bytes per packet
	faultSlots   = 8                // operations in flight per initiator
	faultMaxLen  = 3 * faultSegment // an operation is 1..3 packets
	faultRetry   = 5                // rt RetryLimit
	faultBound   = 500 * time.Millisecond
	// faultOpSlack: with an operation timeout, every operation ends within
	// it plus this (a poll's lateness), whatever the peer does.
	faultOpSlack   = 10 * time.Microsecond
	faultLinkDelay = 5 * time.Microsecond
)

// faultSeeds is how many seeds each scenario runs: 1,000, or 60 under the
// race detector (about ten times slower) and in -short mode;
// PEREGRINE_SEEDS overrides.
var faultSeeds = testenv.Seeds{Full: 1000, Short: 60, Race: 60}

// faultScenario is one fault, scripted on a run from its random stream.
type faultScenario struct {
	name string
	// skip, when set, is why the scenario is skipped: the issue-12 class
	// it waits for and the failure it gives today.
	skip string
	// initiators is the number of nodes that post operations (0: 1); the
	// target is the node after them.
	initiators int
	ops        int // operations per initiator (0: 12)
	// setup scripts the fault: profiles, the timeline, options. It sets
	// x.faultEnd.
	setup func(x *fx)
}

// opRec is one posted operation.
type opRec struct {
	tag             uint64
	node, gen       int
	kind            txn.OpKind
	rsn             uint32
	seq             int // posting order on its connection
	slot            int
	length          int
	raddr           uint64
	badKey          bool
	done            int
	status          txn.Status
	posted, ended   clock.Time
	orphaned, probe bool
}

// txKey names one reliable packet on the wire: the sender (node and
// incarnation), its peer and the initiator's connection generation between
// them (a restarted peer may hand out the same CIDs and PSNs to a new
// connection), then CID, window and PSN.
type txKey struct {
	node, inc int
	peer, gen int
	cid       uint32
	win       wire.Window
	resync    bool
	all       bool // every transmission at the PSN, resyncs too
	psn       uint32
}

type cidKey struct {
	node int
	cid  uint32
}

type delKey struct {
	node, gen int
	rsn       uint32
}

// initiatorState is one initiator's side of a run.
type initiatorState struct {
	conn      *txn.Conn
	gen       int
	posted    int // operations of the plan posted
	seq       int
	lastDone  int // seq of the latest completion on the current connection
	free      []int
	nextAt    clock.Time
	ordered   bool
	reconnect bool
}

// fx is one run of a scenario.
type fx struct {
	sc   *faultScenario
	seed uint64
	rng  *rand.Rand
	pool *mbuf.Pool

	cfg    ClusterConfig
	c      *Cluster
	k      int // initiators; the target is node k
	target int
	eps    []*txn.Endpoint
	shards int             // the target's shards (0 or 1: not sharded)
	tgts   []*txn.Endpoint // the target's current incarnation, shard by shard
	keys   []uint32
	mems   [][]byte
	txOpts []txn.Options
	ini    []*initiatorState

	plan     int
	ops      map[uint64]*opRec
	nextTag  uint64
	cq       []txn.Completion
	tx       map[txKey]int
	del      map[delKey]int
	cidGen   map[cidKey]int // an initiator's connection CID → its generation
	lastRSN  map[*txn.Conn]uint32
	hasRSN   map[*txn.Conn]bool
	badKeys  float64 // fraction of operations naming an unregistered region
	pullOnly bool    // every operation is a pull
	// opTimeout is each connection's txn.ConnOptions.OpTimeout: set where
	// the target dies (the transport's probes of a silent peer end those
	// operations too, whichever comes first).
	opTimeout time.Duration
	faultEnd  time.Duration
	// peerGone: the target is dead at the end, so operations may fail and
	// there is no probe.
	peerGone bool
	// allOK: every operation must complete OK (the fault loses nothing for
	// good: forgeries).
	allOK bool
	// payloadCheck is off where an old incarnation's bytes may legitimately
	// reach a target (nowhere yet).
	err error
}

func (x *fx) violate(format string, args ...any) {
	if x.err == nil {
		x.err = fmt.Errorf("at %v: "+format, append([]any{x.c.Clock.Now()}, args...)...)
	}
}

// pattern is the byte at addr of a push from node's connection gen, or of
// the target's pull area (node = target, gen 0).
func pattern(node, gen int, addr uint64) byte { return byte(int(addr)*7 + node*13 + gen*29 + 1) }

func defaultTransport() rt.Options {
	return rt.Options{
		MaxConns:    8,
		WindowSize:  64,
		MinRTO:      100 * time.Microsecond,
		InitialRTO:  200 * time.Microsecond,
		MaxRTO:      2 * time.Millisecond,
		RetryLimit:  faultRetry,
		CloseLinger: time.Millisecond,
		RNRTimeout:  50 * time.Microsecond,
	}
}

// newFx builds the cluster of a run: k initiators and a target, each a
// txn.Endpoint on a link of the switch.
func newFx(sc *faultScenario, seed uint64, shards int, pool *mbuf.Pool, trace bool) (*fx, error) {
	x := &fx{sc: sc, seed: seed, shards: shards, rng: rand.New(rand.NewPCG(seed, 0xfa17)), pool: pool,
		ops: make(map[uint64]*opRec), tx: make(map[txKey]int), del: make(map[delKey]int),
		cidGen: make(map[cidKey]int), lastRSN: make(map[*txn.Conn]uint32), hasRSN: make(map[*txn.Conn]bool),
		cq: make([]txn.Completion, 64)}
	x.k = max(sc.initiators, 1)
	x.target = x.k
	x.plan = sc.ops
	if x.plan == 0 {
		x.plan = 12
	}
	n := x.k + 1
	x.eps = make([]*txn.Endpoint, n)
	x.keys = make([]uint32, n)
	x.mems = make([][]byte, n)
	x.txOpts = make([]txn.Options, n)
	x.cfg = ClusterConfig{Seed: seed, Pool: pool, Start: 1_000_000, Check: 1}
	for i := range n {
		nc := NodeConfig{Transport: defaultTransport()}
		nc.Up.Delay, nc.Down.Delay = faultLinkDelay, faultLinkDelay
		x.txOpts[i] = txn.Options{MaxOps: 64, CQSize: 256, Segment: faultSegment, SolicitThreshold: 2 * faultSegment, IncastCap: 4 * faultMaxLen}
		x.cfg.Nodes = append(x.cfg.Nodes, nc)
	}
	for range x.k {
		x.ini = append(x.ini, &initiatorState{ordered: x.rng.IntN(4) != 0})
	}
	// The target reclaims the connections of initiators that vanished
	// (failed their half, restarted): it probes a silent connection every
	// millisecond and gives up after five (rt keeps both off by default).
	x.cfg.Nodes[x.target].Transport.KeepAlive = time.Millisecond
	x.cfg.Nodes[x.target].Transport.IdleTimeout = 5 * time.Millisecond
	sc.setup(x)
	if shards > 1 {
		// A sharded target; initiator i's CIDs name shard i mod shards, so
		// the target's NIC pairs its connection with the target's shard of
		// that number, as queue i of one multi-queue port reaches queue i
		// of its peer.
		x.cfg.Nodes[x.target].Shards = shards
		for i := range x.k {
			x.cfg.Nodes[i].Transport.ShardBits, x.cfg.Nodes[i].Transport.Shard = shard.Bits(shards), i%shards
		}
	}
	if trace {
		x.cfg.Trace = os.Stdout
	}
	for i := range x.cfg.Nodes {
		x.cfg.Nodes[i].Make = x.make
	}
	c, err := NewCluster(x.cfg)
	if err != nil {
		return nil, err
	}
	x.c = c
	c.OnTransmit = x.onTransmit
	c.AddStage(x)
	return x, nil
}

// make builds an incarnation of node n: a txn endpoint with its region.
func (x *fx) make(n *Node, o rt.Options) (Peer, error) {
	opts := x.txOpts[n.Index]
	opts.Transport = o
	if n.Index == x.target {
		opts.OnRequest = x.onRequest
	}
	ep, err := txn.New(opts)
	if err != nil {
		return nil, err
	}
	size := 2 * faultSlots * faultMaxLen
	if n.Index == x.target {
		size = (x.k + 1) * faultSlots * faultMaxLen
	}
	if n.Index == x.target && o.Shard > 0 {
		// Another shard of the same incarnation: the same memory, under
		// the key the first shard's region got (each endpoint's first
		// region has the same key).
		r, err := ep.Register(x.mems[n.Index], txn.RemoteWrite|txn.RemoteRead)
		if err == nil && r.Key != x.keys[n.Index] {
			err = fmt.Errorf("shard %d registered the target's region as key %#x, shard 0 as %#x", o.Shard, r.Key, x.keys[n.Index])
		}
		if err != nil {
			return nil, errors.Join(err, ep.Close())
		}
		x.tgts = append(x.tgts, ep)
		return ep, nil
	}
	if n.Index == x.target {
		x.tgts = x.tgts[:0]
	}
	mem := make([]byte, size)
	if n.Index == x.target {
		for a := x.k * faultSlots * faultMaxLen; a < size; a++ {
			mem[a] = pattern(x.target, 0, uint64(a))
		}
	}
	r, err := ep.Register(mem, txn.RemoteWrite|txn.RemoteRead)
	if err != nil {
		return nil, errors.Join(err, ep.Close())
	}
	if n.Index < x.k && x.eps[n.Index] != nil {
		// An initiator restarted: its operations died with it.
		for _, op := range x.ops {
			if op.node == n.Index && op.done == 0 {
				op.orphaned = true
			}
		}
		st := x.ini[n.Index]
		st.conn, st.posted = nil, 0 // the new process runs its plan again
		st.gen++
	}
	x.eps[n.Index], x.keys[n.Index], x.mems[n.Index] = ep, r.Key, mem
	if n.Index == x.target {
		x.tgts = append(x.tgts, ep)
	}
	return ep, nil
}

func (x *fx) nodeOf(ip [4]byte) int { return int(ip[3]) - 1 }

// onRequest is the target's ULP.
func (x *fx) onRequest(r *txn.Request) {
	tc := r.Conn.Transport()
	if tc == nil {
		x.violate("request RSN %d on a connection with no transport", r.RSN)
		return
	}
	node := x.nodeOf(tc.Peer().IP.As4())
	if node < 0 || node >= x.k {
		x.violate("request from %v, not an initiator", tc.Peer())
		return
	}
	// The connection generation the request belongs to: the one whose
	// initiator-side CID the target's connection names (an old
	// incarnation's packets may still arrive on the old connection).
	gen, known := x.cidGen[cidKey{node, tc.PeerCID()}]
	if !known {
		gen = x.ini[node].gen
	}
	key := delKey{node, gen, r.RSN}
	x.del[key]++
	if x.del[key] > 1 {
		x.violate("node %d connection %d request RSN %d handed to the target's ULP %d times", node, gen, r.RSN, x.del[key])
	}
	if r.Conn.Ordered() {
		if x.hasRSN[r.Conn] && int32(r.RSN-x.lastRSN[r.Conn]) <= 0 {
			x.violate("ordered connection of node %d: request RSN %d handed to the ULP after RSN %d", node, r.RSN, x.lastRSN[r.Conn])
		}
		x.lastRSN[r.Conn], x.hasRSN[r.Conn] = r.RSN, true
	}
	if r.Kind == txn.OpPush {
		for i, b := range r.Data {
			if want := pattern(node, gen, r.Region.Addr+uint64(i)); b != want {
				x.violate("push RSN %d from node %d connection %d: byte %d at %#x is %#x, its connection sent %#x (an old connection's or incarnation's data?)",
					r.RSN, node, gen, i, r.Region.Addr+uint64(i), b, want)
				return
			}
		}
	}
}

func (x *fx) onTransmit(node int, raw []byte) {
	var f wire.Frame
	if f.Decode(raw) != nil {
		return
	}
	h := &f.Header
	w := h.Window()
	if w == wire.WindowNone {
		return
	}
	// Every transmission at a PSN after the first is flagged (a resync
	// standing in for a packet too: an ACK of the PSN could be for
	// either); the packet and the resync each go out at most RetryLimit+1
	// times.
	peer := x.nodeOf(f.Addrs.DstIP.As4())
	if peer < 0 || peer >= len(x.c.Nodes) {
		return
	}
	// An initiator sends on its current connection only; the target's
	// packets name the initiator's CID, which differs between its
	// connections.
	gen := -1
	if node < x.k {
		gen = x.ini[node].gen
	}
	key := txKey{node: node, inc: x.c.Nodes[node].Incarnation, peer: peer, gen: gen,
		cid: h.DestCID, win: w, psn: h.PSN, all: true}
	x.tx[key]++
	n := x.tx[key]
	key.all, key.resync = false, h.Type == wire.TypeResync
	x.tx[key]++
	m := x.tx[key]
	retx := h.Flags.Has(wire.FlagRetransmission)
	switch {
	case n == 1 && retx:
		x.violate("node %d: first transmission of %v PSN %d (CID %#x) flagged as a retransmission", node, h.Type, h.PSN, h.DestCID)
	case n > 1 && !retx:
		x.violate("node %d: transmission %d of PSN %d (CID %#x), a %v, not flagged as a retransmission (Karn's rule)", node, n, h.PSN, h.DestCID, h.Type)
	case m > faultRetry+1:
		x.violate("node %d: %v PSN %d (CID %#x) sent %d times, past RetryLimit %d + 1", node, h.Type, h.PSN, h.DestCID, m, faultRetry)
	}
}

// Name implements lcore.Stage: x is the workload.
func (x *fx) Name() string { return "fault-workload" }

// Poll drains completions and posts what the plan and the windows allow.
func (x *fx) Poll(now clock.Time) int {
	work := x.drain()
	for i, st := range x.ini {
		ep := x.eps[i]
		if x.c.Nodes[i].Dead || ep == nil {
			continue
		}
		if st.conn == nil || (!st.conn.Live() && st.reconnect) {
			if st.reconnect || st.posted < x.plan {
				if st.conn != nil {
					st.gen++
				}
				c, err := ep.Open(x.c.Nodes[x.target].Addr(), txn.ConnOptions{Ordered: st.ordered, OpTimeout: x.opTimeout})
				if err != nil {
					if !errors.Is(err, txn.ErrBusy) && !errors.Is(err, rt.ErrBusy) {
						x.violate("node %d: Open: %v", i, err)
					}
					continue
				}
				st.conn, st.seq, st.lastDone = c, 0, 0
				if tc := c.Transport(); tc != nil {
					x.cidGen[cidKey{i, tc.LocalCID()}] = st.gen
				}
				st.free = st.free[:0]
				for s := range faultSlots {
					st.free = append(st.free, s)
				}
				work++
			}
		}
		if st.posted >= x.plan || now < st.nextAt || !st.conn.Live() {
			continue
		}
		if x.post(i, false, 0) {
			st.posted++
			work++
			st.nextAt = now.Add(time.Duration(x.rng.IntN(30)) * time.Microsecond)
		}
	}
	return work
}

// NextDeadline: a paced initiator's next post.
func (x *fx) NextDeadline() (clock.Time, bool) {
	var t clock.Time
	ok := false
	for i, st := range x.ini {
		if st.posted < x.plan && st.conn != nil && !x.c.Nodes[i].Dead && (!ok || st.nextAt < t) {
			t, ok = st.nextAt, true
		}
	}
	if ok && t <= x.c.Clock.Now() {
		return 0, false // posting waits for a free slot or the window, not for time
	}
	return t, ok
}

// post posts one operation of initiator i (a probe: kind forced, must
// succeed). It reports whether it was accepted.
func (x *fx) post(i int, probe bool, kind txn.OpKind) bool {
	st := x.ini[i]
	if len(st.free) == 0 {
		return false
	}
	slot := st.free[len(st.free)-1]
	length := 1 + x.rng.IntN(faultMaxLen)
	if kind == 0 {
		kind = txn.OpPush
		if x.pullOnly || x.rng.IntN(5) < 2 {
			kind = txn.OpPull
		}
	}
	solicit := txn.Solicit(x.rng.IntN(3))
	if probe {
		solicit = txn.SolicitAlways
	}
	op := &opRec{tag: x.nextTag, node: i, gen: st.gen, kind: kind, slot: slot, length: length, posted: x.c.Clock.Now(), probe: probe}
	key := x.keys[x.target]
	if !probe && x.badKeys > 0 && x.rng.Float64() < x.badKeys {
		key ^= 0x5a5a00
		op.badKey = true
	}
	local := uint64(slot * faultMaxLen)
	if kind == txn.OpPush {
		op.raddr = uint64((i*faultSlots + slot) * faultMaxLen)
		for a := range length {
			x.mems[i][local+uint64(a)] = pattern(i, st.gen, op.raddr+uint64(a))
		}
	} else {
		local += faultSlots * faultMaxLen
		op.raddr = uint64((x.k*faultSlots + slot) * faultMaxLen)
	}
	o := txn.Op{Local: txn.Region{Key: x.keys[i], Len: len(x.mems[i])}, LocalAddr: local, Len: length,
		Remote: wire.RegionRef{Key: key, Addr: op.raddr}, Tag: op.tag, Solicit: solicit}
	var rsn uint32
	var err error
	if kind == txn.OpPush {
		rsn, err = st.conn.Push(o)
	} else {
		rsn, err = st.conn.Pull(o)
	}
	if err != nil {
		if !errors.Is(err, txn.ErrBusy) && !errors.Is(err, txn.ErrClosed) {
			x.violate("node %d: posting %v: %v", i, kind, err)
		}
		return false
	}
	st.free = st.free[:len(st.free)-1]
	st.seq++
	op.rsn, op.seq = rsn, st.seq
	x.ops[op.tag] = op
	x.nextTag++
	return true
}

// drain takes every completion from every live initiator.
func (x *fx) drain() int {
	work := 0
	for i := range x.k {
		ep := x.eps[i]
		if ep == nil || x.c.Nodes[i].Dead {
			continue
		}
		for {
			n := ep.Completions(x.cq)
			for _, cpl := range x.cq[:n] {
				x.complete(i, &cpl)
			}
			work += n
			if n < len(x.cq) {
				break
			}
		}
	}
	return work
}

func (x *fx) complete(i int, cpl *txn.Completion) {
	if testenv.Debug() {
		fmt.Printf("%v complete node %d tag %d rsn %d %v conn %p\n", x.c.Clock.Now(), i, cpl.Tag, cpl.RSN, cpl.Status, cpl.Conn)
	}
	op := x.ops[cpl.Tag]
	if op == nil || op.node != i {
		x.violate("node %d: completion for tag %d that it never posted (%v)", i, cpl.Tag, cpl.Status)
		return
	}
	op.done++
	if op.done > 1 {
		x.violate("node %d: operation %d (%v RSN %d) completed %d times (now %v, first %v)", i, op.tag, op.kind, op.rsn, op.done, cpl.Status, op.status)
		return
	}
	if op.orphaned {
		return
	}
	op.status, op.ended = cpl.Status, x.c.Clock.Now()
	if x.opTimeout > 0 && cpl.Latency() > x.opTimeout+faultOpSlack {
		x.violate("node %d: operation %d (%v RSN %d) ended %v, %v after it was posted: past its timeout %v", i, op.tag, op.kind, op.rsn, cpl.Status, cpl.Latency(), x.opTimeout)
	}
	if strings.HasPrefix(cpl.Status.String(), "Status(") {
		x.violate("node %d: operation %d ended with an unnamed status %v", i, op.tag, cpl.Status)
	}
	st := x.ini[i]
	if op.gen == st.gen {
		if st.ordered {
			if op.seq <= st.lastDone {
				x.violate("ordered connection of node %d: operation #%d (RSN %d) completed after #%d", i, op.seq, op.rsn, st.lastDone)
			}
			st.lastDone = op.seq
		}
		st.free = append(st.free, op.slot)
	}
	if cpl.Status != txn.StatusOK {
		if op.badKey && cpl.Status == txn.StatusOK {
			x.violate("node %d: operation %d named an unregistered region and completed OK", i, op.tag)
		}
		return
	}
	if op.badKey {
		x.violate("node %d: operation %d named an unregistered region and completed OK", i, op.tag)
	}
	if op.kind == txn.OpPull {
		base := uint64(faultSlots*faultMaxLen + op.slot*faultMaxLen)
		for a := range op.length {
			if got, want := x.mems[i][base+uint64(a)], pattern(x.target, 0, op.raddr+uint64(a)); got != want {
				x.violate("node %d: pull %d (RSN %d) completed OK but byte %d is %#x, the target holds %#x", i, op.tag, op.rsn, a, got, want)
				return
			}
		}
	}
}

// pending counts operations that still owe a completion.
func (x *fx) pending() int {
	n := 0
	for _, op := range x.ops {
		if op.done == 0 && !op.orphaned {
			n++
		}
	}
	return n
}

// planDone: every initiator posted its plan, or cannot post any more (its
// connection is gone and it does not reconnect, or it is dead).
func (x *fx) planDone() bool {
	for i, st := range x.ini {
		if st.posted >= x.plan || x.c.Nodes[i].Dead {
			continue
		}
		if st.conn != nil && !st.conn.Live() && !st.reconnect {
			continue
		}
		return false
	}
	return true
}

func (x *fx) describePending() string {
	var s []string
	for _, op := range x.ops {
		if op.done == 0 && !op.orphaned {
			s = append(s, fmt.Sprintf("node %d conn %d #%d %v RSN %d len %d (posted %v)", op.node, op.gen, op.seq, op.kind, op.rsn, op.length, op.posted))
		}
	}
	sort.Strings(s)
	if len(s) > 4 {
		s = append(s[:4], fmt.Sprintf("and %d more", len(s)-4))
	}
	return strings.Join(s, "; ")
}

// run runs the scenario and checks every invariant.
func (x *fx) run() error {
	c := x.c
	// 1. The workload and the fault, then every operation ends within the
	// bound.
	limit := x.faultEnd + faultBound
	err := c.Run(func() bool {
		return x.err != nil || (c.FaultsDone() && x.planDone() && x.pending() == 0)
	}, limit)
	if x.err != nil {
		return x.err
	}
	if err != nil {
		return fmt.Errorf("%d operations did not complete within %v after the fault ended (%w): %s", x.pending(), faultBound, err, x.describePending())
	}
	for _, op := range x.ops {
		if op.orphaned || op.done == 0 {
			continue
		}
		if x.allOK && op.status != txn.StatusOK && !op.badKey {
			return fmt.Errorf("node %d operation %d (%v RSN %d) ended %v; this fault loses nothing for good", op.node, op.tag, op.kind, op.rsn, op.status)
		}
	}
	// 2. With the network healed, a live target serves new operations: each
	// initiator gets a push and a pull through, on a new connection if the
	// one it had failed (its peer restarted) — only that error is allowed.
	if !x.peerGone {
		for _, st := range x.ini {
			st.reconnect, st.nextAt = true, 0
		}
		need := make([][]txn.OpKind, x.k)
		for i := range need {
			need[i] = []txn.OpKind{txn.OpPush, txn.OpPull}
		}
		var mine []*opRec
		attempts := 0
		err := c.Run(func() bool {
			if x.err != nil {
				return true
			}
			for _, op := range mine {
				if op.done == 1 && !op.probe {
					continue
				}
				if op.done == 1 {
					op.probe = false // settled
					switch op.status {
					case txn.StatusOK:
					case txn.StatusConnFailed:
						need[op.node] = append(need[op.node], op.kind)
					default:
						x.violate("after the fault, node %d's probe %v ended %v", op.node, op.kind, op.status)
					}
				}
			}
			for i, st := range x.ini {
				for len(need[i]) > 0 && st.conn != nil && st.conn.Live() && attempts < 8*x.k {
					kind := need[i][0]
					if !x.post(i, true, kind) {
						break
					}
					mine = append(mine, x.ops[x.nextTag-1])
					need[i] = need[i][1:]
					attempts++
				}
			}
			for i := range need {
				if len(need[i]) > 0 {
					return false
				}
			}
			for _, op := range mine {
				if op.probe {
					return false
				}
			}
			return true
		}, faultBound)
		if x.err != nil {
			return x.err
		}
		if err != nil {
			return fmt.Errorf("after the fault, probes did not complete within %v (%d posted; %w): %s", faultBound, attempts, err, x.describePending())
		}
	}
	// 3. Close: nothing outstanding, no connection slot held.
	for _, st := range x.ini {
		st.reconnect = false
		if st.conn != nil {
			_ = st.conn.Close()
		}
	}
	err = c.Run(func() bool {
		for _, n := range c.Nodes {
			if n.Dead || n.Peer == nil {
				continue
			}
			if x.outstanding(n) != 0 || conns(n) != 0 {
				return false
			}
		}
		return true
	}, faultBound)
	if x.err != nil {
		return x.err
	}
	if err != nil {
		var s []string
		for _, n := range c.Nodes {
			if !n.Dead && n.Peer != nil {
				s = append(s, fmt.Sprintf("%s: %d transactions outstanding, %d connections", n.Name, x.outstanding(n), conns(n)))
			}
		}
		return fmt.Errorf("after closing, state left behind within %v (%w): %s", faultBound, err, strings.Join(s, "; "))
	}
	// 4. A push acknowledged was placed, and (now that the target has
	// nothing left in progress) handed to its ULP, unless the target died
	// or its side of a connection failed (its peers' requests are then
	// dropped, placed or not).
	tn := c.Nodes[x.target]
	if tn.Dead || tn.Incarnation > 0 || sideStats(tn.Transports()).ConnFailed > 0 {
		return nil
	}
	for tag := range x.nextTag {
		op := x.ops[tag]
		if op.status == txn.StatusOK && op.done == 1 && !op.orphaned && op.kind == txn.OpPush &&
			x.del[delKey{op.node, op.gen, op.rsn}] == 0 {
			return fmt.Errorf("node %d push %d (RSN %d, connection %d) completed OK but the target's ULP never had it", op.node, op.tag, op.rsn, op.gen)
		}
	}
	return nil
}

// outstanding is the transactions in progress at node n, every shard's.
func (x *fx) outstanding(n *Node) int {
	if n.Index == x.target {
		k := 0
		for _, ep := range x.tgts {
			k += ep.Outstanding()
		}
		return k
	}
	return n.Peer.(*txn.Endpoint).Outstanding()
}

// conns is the connection slots held at node n, every shard's.
func conns(n *Node) int {
	k := 0
	for _, e := range n.Transports() {
		k += e.Conns()
	}
	return k
}

// checkShards verifies a sharded target from its counters: no shard's
// endpoint received a frame whose CID names another shard, nothing was
// handed over in software (the NIC steers every frame), and with at least
// as many initiators as shards every shard of a target that lived through
// the run accepted connections.
func (x *fx) checkShards() error {
	tn := x.c.Nodes[x.target]
	touched, handed := tn.Touched()
	for i, t := range touched {
		if t != 0 {
			return fmt.Errorf("target shard %d received %d frames whose CID names another shard", i, t)
		}
	}
	if handed != 0 {
		return fmt.Errorf("target: %d frames handed between shards in software, and the NIC missteered none", handed)
	}
	if x.k >= x.shards && !tn.Dead && tn.Incarnation == 0 {
		for _, e := range tn.Transports() {
			if e.Stats().ConnAccepted == 0 {
				return fmt.Errorf("target shard %s accepted no connection of %d initiators", e.Name(), x.k)
			}
		}
	}
	return nil
}

// summary reports what the transports did, for a failure message.
func (x *fx) summary() string {
	var s []string
	for _, n := range x.c.Nodes {
		e := n.Transport()
		if e == nil {
			s = append(s, n.Name+": dead")
			continue
		}
		st := e.Stats()
		s = append(s, fmt.Sprintf("%s: retx %d early %d abandoned %d nacks rx %d tx %d forged %d failed %d",
			e.Name(), st.TxRetransmit, st.TxEarlyRetransmit, st.Abandoned, st.RxNack, st.TxNack, st.AckForged, st.ConnFailed))
	}
	return strings.Join(s, "; ")
}

// runFaultSeed runs one seed of a scenario and returns what failed, with
// the command that replays it.
func runFaultSeed(sc *faultScenario, seed uint64, shards int, pool *mbuf.Pool, trace bool) (err error) {
	x, err := newFx(sc, seed, shards, pool, trace)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			replay := fmt.Sprintf("go test ./sim -run 'TestFaults/%s$' -seed=%d", sc.name, seed)
			if shards > 1 {
				replay = fmt.Sprintf("go test ./sim -run 'TestFaultsSharded/shards=%d/%s$' -seed=%d", shards, sc.name, seed)
			}
			err = fmt.Errorf("%s seed %d: %w\n  faults: %s\n  %s\n  replay: %s",
				sc.name, seed, err, strings.Join(x.c.FaultsApplied(), ", "), x.summary(), replay)
		}
	}()
	err = x.run()
	if err == nil && shards > 1 {
		err = x.checkShards()
	}
	x.c.Stop()
	if err == nil && pool.InUse() != 0 {
		err = fmt.Errorf("%d frames still in use after the cluster stopped", pool.InUse())
	}
	return errors.Join(err, x.c.Close())
}

func TestFaults(t *testing.T) { runFaultSuite(t, 1, faultSeeds) }

// shardedFaultSeeds is how many seeds each scenario runs at each of 2
// and 4 shards (PEREGRINE_SEEDS overrides).
var shardedFaultSeeds = testenv.Seeds{Full: 200, Short: 12, Race: 12}

// TestFaultsSharded is the fault suite with a target of 2 and 4 shards
// (NodeConfig.Shards), each initiator's connection paired with the
// target's shard of its number: the suite's invariants, and from the
// counters that no target shard received a frame of another's connection
// and nothing was handed over in software; with as many initiators as
// shards, every shard accepted connections.
func TestFaultsSharded(t *testing.T) {
	for _, shards := range []int{2, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { runFaultSuite(t, shards, shardedFaultSeeds) })
	}
}

// runFaultSuite runs every scenario with a target of shards shards.
func runFaultSuite(t *testing.T, shards int, seeds testenv.Seeds) {
	for i := range faultScenarios {
		sc := &faultScenarios[i]
		t.Run(sc.name, func(t *testing.T) {
			seed, replay := testenv.Replay(t)
			if sc.skip != "" && !replay && os.Getenv("PEREGRINE_FAULT_UNSKIP") == "" {
				t.Skip(sc.skip)
			}
			if replay {
				pool := newFaultPool(t)
				require.NoError(t, runFaultSeed(sc, seed, shards, pool, *traceFlag))
				return
			}
			n := seeds.N(t)
			var next atomic.Int64
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failures []error
			for range 2 {
				pool := newFaultPool(t)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						seed := next.Add(1) - 1
						if seed >= int64(n) {
							return
						}
						if err := runFaultSeed(sc, uint64(seed), shards, pool, false); err != nil {
							mu.Lock()
							failures = append(failures, err)
							mu.Unlock()
							if len(failures) >= 3 {
								next.Store(int64(n))
							}
						}
					}
				}()
			}
			wg.Wait()
			for _, err := range failures {
				t.Error(err)
			}
			t.Logf("%d seeds", n)
		})
	}
}

func newFaultPool(t *testing.T) *mbuf.Pool {
	pool, err := mbuf.New(mbuf.Options{Name: "faults", Frames: 8192, CacheSize: 64})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pool.Close() })
	return pool
}

// The scenarios.

// lossy returns a profile with loss in [lo, hi] percent.
func (x *fx) lossy(lo, hi float64) fabric.Profile {
	p := fabric.Profile{Delay: faultLinkDelay, Loss: fabric.Percent(lo + x.rng.Float64()*(hi-lo))}
	if x.rng.IntN(3) == 0 {
		p.Jitter = time.Duration(x.rng.IntN(10)) * time.Microsecond
	}
	return p
}

// heal restores node i's link at d.
func heal(i int, d time.Duration) Fault {
	return Fault{At: d, Do: SetProfile{Node: i, Dir: fabric.Both, Profile: fabric.Profile{Delay: faultLinkDelay}}}
}

// frameType returns the transport type of a frame, or TypeInvalid.
func frameType(raw []byte) wire.Type {
	off, ok := wire.L4Offset(raw)
	if !ok || len(raw) < off+wire.UDPHeaderLen+8 {
		return wire.TypeInvalid
	}
	v, err := wire.ViewHeader(raw[off+wire.UDPHeaderLen:])
	if err != nil {
		return wire.TypeInvalid
	}
	return v.Type()
}

var faultScenarios = []faultScenario{
	{
		name: "heavy-loss",
		setup: func(x *fx) {
			// 10-30 % loss on every link until the fault ends.
			x.faultEnd = time.Duration(1+x.rng.IntN(4)) * time.Millisecond
			for i := range x.cfg.Nodes {
				x.cfg.Nodes[i].Up = x.lossy(10, 30)
				x.cfg.Nodes[i].Down = x.lossy(10, 30)
				x.cfg.Faults = append(x.cfg.Faults, heal(i, x.faultEnd))
			}
		},
	},
	{
		name: "burst-loss",
		setup: func(x *fx) {
			x.faultEnd = time.Duration(1+x.rng.IntN(4)) * time.Millisecond
			for i := range x.cfg.Nodes {
				for _, p := range []*fabric.Profile{&x.cfg.Nodes[i].Up, &x.cfg.Nodes[i].Down} {
					p.Burst = fabric.GilbertElliott{P: fabric.Percent(1 + x.rng.Float64()*4), R: fabric.Percent(10 + x.rng.Float64()*30), BadLoss: 100}
				}
				x.cfg.Faults = append(x.cfg.Faults, heal(i, x.faultEnd))
			}
		},
	},
	{
		name: "link-flap",
		setup: func(x *fx) {
			// The initiator's link goes down and up a few times, for 50µs
			// to 3ms each, one way or both.
			at := time.Duration(x.rng.IntN(300)) * time.Microsecond
			for range 1 + x.rng.IntN(4) {
				dir := fabric.Dir(x.rng.IntN(3))
				node := x.rng.IntN(2)
				down := time.Duration(50+x.rng.IntN(3000)) * time.Microsecond
				x.cfg.Faults = append(x.cfg.Faults,
					Fault{At: at, Do: LinkDown{Node: node, Dir: dir}},
					Fault{At: at + down, Do: LinkUp{Node: node, Dir: dir}})
				at += down + time.Duration(x.rng.IntN(500))*time.Microsecond
			}
			x.faultEnd = at
		},
	},
	{
		name: "ack-only-loss",
		setup: func(x *fx) {
			// 50-100 % of ACKs and extended ACKs are lost until the fault
			// ends; data and NACKs pass.
			pct := 50 + x.rng.Float64()*50
			x.faultEnd = time.Duration(1+x.rng.IntN(3)) * time.Millisecond
			on := true
			x.cfg.Faults = append(x.cfg.Faults, Fault{At: x.faultEnd, Do: Call{Name: "ACKs pass again", Fn: func(*Cluster) error { on = false; return nil }}})
			x.cfg.Faults = append(x.cfg.Faults, Fault{At: 0, Do: Call{Name: fmt.Sprintf("lose %.0f%% of ACKs", pct), Fn: func(c *Cluster) error {
				c.Switch.Drop = func(_, _ int, raw []byte) bool {
					t := frameType(raw)
					return on && (t == wire.TypeAck || t == wire.TypeExtendedAck) && x.rng.Float64()*100 < pct
				}
				return nil
			}}})
		},
	},
	{
		name: "nack-loss",
		setup: func(x *fx) {
			// Every NACK is lost for 1-3 ms, and a third of the
			// operations name an unregistered region, so the target
			// refuses them (ULP-error NACKs that never arrive). A small
			// MaxOps at the target adds resource NACKs.
			x.badKeys = 0.3
			x.txOpts[x.target].MaxOps = 4
			x.faultEnd = time.Duration(1+x.rng.IntN(3)) * time.Millisecond
			x.cfg.Faults = append(x.cfg.Faults,
				Fault{At: 0, Do: Call{Name: "lose every NACK", Fn: func(c *Cluster) error {
					c.Switch.Drop = func(_, _ int, raw []byte) bool { return frameType(raw) == wire.TypeNack }
					return nil
				}}},
				Fault{At: x.faultEnd, Do: Call{Name: "NACKs pass again", Fn: func(c *Cluster) error {
					c.Switch.Drop = nil
					return nil
				}}})
		},
	},
	{
		name: "peer-death",
		setup: func(x *fx) {
			x.opTimeout = 20 * time.Millisecond
			// While operations are in flight (they all complete within
			// about 400µs without a fault).
			at := time.Duration(20+x.rng.IntN(400)) * time.Microsecond
			x.cfg.Faults = append(x.cfg.Faults, Fault{At: at, Do: Kill{Node: x.target, Discard: x.rng.IntN(2) == 0}})
			x.faultEnd, x.peerGone = at, true
		},
	},
	{
		name: "peer-death-pulls",
		setup: func(x *fx) {
			x.opTimeout = 20 * time.Millisecond
			// Pulls only, and from a moment on the target's pull data is
			// lost while its ACKs pass; then it dies. The initiator's pull
			// requests are acknowledged, so nothing is outstanding in its
			// transport.
			x.pullOnly = true
			from := time.Duration(20+x.rng.IntN(300)) * time.Microsecond
			at := from + time.Duration(x.rng.IntN(200))*time.Microsecond
			x.cfg.Faults = append(x.cfg.Faults,
				Fault{At: from, Do: Call{Name: "lose the target's pull data", Fn: func(c *Cluster) error {
					c.Switch.Drop = func(src, _ int, raw []byte) bool { return src == x.target && frameType(raw) == wire.TypePullData }
					return nil
				}}},
				Fault{At: at, Do: Kill{Node: x.target, Discard: x.rng.IntN(2) == 0}})
			x.faultEnd, x.peerGone = at, true
		},
	},
	{
		name: "restart-same-seed",
		setup: func(x *fx) {
			x.opTimeout = 20 * time.Millisecond
			at := time.Duration(20+x.rng.IntN(400)) * time.Microsecond
			down := time.Duration(x.rng.IntN(2000)) * time.Microsecond
			x.cfg.Faults = append(x.cfg.Faults,
				Fault{At: at, Do: Kill{Node: x.target, Discard: true}},
				Fault{At: at + down, Do: Restart{Node: x.target}})
			x.faultEnd = at + down
			for _, st := range x.ini {
				st.reconnect = true
			}
		},
	},
	{
		name: "restart-new-seed",
		setup: func(x *fx) {
			x.opTimeout = 20 * time.Millisecond
			at := time.Duration(20+x.rng.IntN(400)) * time.Microsecond
			down := time.Duration(x.rng.IntN(2000)) * time.Microsecond
			x.cfg.Faults = append(x.cfg.Faults,
				Fault{At: at, Do: Kill{Node: x.target, Discard: true}},
				Fault{At: at + down, Do: Restart{Node: x.target, NewSeed: true, Seed: x.rng.Uint64()}})
			x.faultEnd = at + down
			for _, st := range x.ini {
				st.reconnect = true
			}
		},
	},
	{
		name: "initiator-restarts",
		setup: func(x *fx) {
			// The initiator restarts (a new seed each time) two or three
			// times, and its old connections stay behind at a target whose
			// table has room for two: without reclaiming half-open
			// connections the target ends up refusing everyone.
			x.cfg.Nodes[x.target].Transport.MaxConns = 2
			at := time.Duration(20+x.rng.IntN(200)) * time.Microsecond
			for range 2 + x.rng.IntN(2) {
				x.cfg.Faults = append(x.cfg.Faults, Fault{At: at, Do: Restart{Node: 0, NewSeed: true, Seed: x.rng.Uint64()}})
				at += time.Duration(100+x.rng.IntN(400)) * time.Microsecond
			}
			x.faultEnd = at
		},
	},
	{
		name: "stale-replay",
		setup: func(x *fx) {
			// Both ends restart, each with a new seed as a real process
			// would draw (a same seed under the virtual clock replays the
			// same CIDs and PSNs by design); then the old incarnation's
			// pushes, recorded on the way, arrive at the new target and
			// must change nothing there.
			var rec *Recording
			at := time.Duration(100+x.rng.IntN(300)) * time.Microsecond
			x.cfg.Faults = append(x.cfg.Faults,
				Fault{At: 0, Do: Call{Name: "record pushes", Fn: func(c *Cluster) error {
					rec = c.Record(256, func(from, _ int, f *wire.Frame) bool {
						return from == 0 && f != nil && (f.Header.Type == wire.TypePushUnsolicitedData || f.Header.Type == wire.TypePushSolicitedData)
					})
					return nil
				}}},
				Fault{At: at, Do: Restart{Node: 0, NewSeed: true, Seed: x.rng.Uint64()}},
				Fault{At: at, Do: Restart{Node: x.target, NewSeed: true, Seed: x.rng.Uint64()}},
				Fault{At: at + time.Duration(50+x.rng.IntN(300))*time.Microsecond, Do: Call{Name: "replay the old pushes", Fn: func(c *Cluster) error {
					return Replay{From: rec, To: x.target}.apply(c)
				}}})
			x.faultEnd = at + time.Millisecond
		},
	},
	{
		name: "rnr-storm",
		setup: func(x *fx) {
			// A target with room for two transactions and a long RNR
			// back-off refuses most requests for a while.
			x.txOpts[x.target].MaxOps = 2
			x.cfg.Nodes[x.target].Transport.RNRTimeout = time.Duration(200+x.rng.IntN(800)) * time.Microsecond
			x.faultEnd = time.Millisecond
		},
	},
	{
		name:       "incast-abandon",
		initiators: 4,
		ops:        6,
		setup: func(x *fx) {
			// Four initiators push (solicited) and pull through the switch
			// into one target with a small incast budget, while the
			// target's link loses enough for packets to be abandoned.
			x.txOpts[x.target].IncastCap = faultMaxLen
			for i := range x.k {
				x.txOpts[i].SolicitThreshold = 0
			}
			x.cfg.Nodes[x.target].Down = x.lossy(20, 40)
			x.cfg.Nodes[x.target].Up = x.lossy(20, 40)
			x.faultEnd = time.Duration(2+x.rng.IntN(3)) * time.Millisecond
			x.cfg.Faults = append(x.cfg.Faults, heal(x.target, x.faultEnd))
		},
	},
	{
		name: "spoofed-source",
		setup: func(x *fx) {
			// Pushes in the initiator's connection, at the PSNs it will
			// use next, but from another address: the target must check
			// every packet's source against the connection's peer.
			x.allOK = true
			x.faultEnd = 600 * time.Microsecond
			for k := range 4 + x.rng.IntN(8) {
				at := time.Duration(x.rng.IntN(600)) * time.Microsecond
				ahead := uint32(x.rng.IntN(3))
				x.cfg.Faults = append(x.cfg.Faults, Fault{At: at, Do: Inject{To: x.target, Name: fmt.Sprintf("spoofed push %d", k), Frame: func(c *Cluster) ([]byte, error) {
					return x.spoofPush(ahead)
				}}})
			}
		},
	},
	forged("forged-ack-past-nsn", 0, ""),
	forged("forged-eack-bitmap", 1, ""),
	forged("forged-nack-unexpected", 2, ""),
	forged("forged-rnr-nack", 3, ""),
}

// forged is a scenario of forgeries of one kind (see forge): the
// initiator receives them in the target's name while operations are in
// flight and, for a while, its packets do not reach the target (so a
// forged acknowledgement would retire packets never delivered). A forgery
// must change nothing: every operation still completes OK with the right
// bytes.
func forged(name string, kind int, skip string) faultScenario {
	return faultScenario{name: name, skip: skip, setup: func(x *fx) {
		x.allOK = true
		cut := time.Duration(50+x.rng.IntN(200)) * time.Microsecond
		x.cfg.Faults = append(x.cfg.Faults,
			Fault{At: cut, Do: LinkDown{Node: 0, Dir: fabric.AtoB}},
			Fault{At: cut + 300*time.Microsecond, Do: LinkUp{Node: 0, Dir: fabric.AtoB}})
		x.faultEnd = cut + 300*time.Microsecond
		for k := range 4 + x.rng.IntN(8) {
			at := cut + time.Duration(x.rng.IntN(300))*time.Microsecond
			off := uint32(x.rng.IntN(4))
			x.cfg.Faults = append(x.cfg.Faults, Fault{At: at, Do: Inject{To: 0, Name: fmt.Sprintf("forgery %d", k), Frame: func(c *Cluster) ([]byte, error) {
				return x.forge(kind, off)
			}}})
		}
	}}
}

// spoofPush builds a push of node 0's connection, ahead PSNs past the next
// one it will send, with bytes that are no operation's, from an address
// that is not node 0's.
func (x *fx) spoofPush(ahead uint32) ([]byte, error) {
	st := x.ini[0]
	if st.conn == nil || st.conn.Transport() == nil || st.conn.Transport().State() != rt.StateEstablished {
		return nil, nil
	}
	tc := st.conn.Transport()
	rq := tc.Window(wire.WindowRequest)
	payload := make([]byte, 64)
	for i := range payload {
		payload[i] = 0xee
	}
	h := wire.Header{Version: wire.Version, DestCID: tc.PeerCID(), Type: wire.TypePushUnsolicitedData, PSN: rq.TxNSN + ahead,
		RSN: uint32(st.seq), ReqLen: uint32(len(payload)), Flags: wire.FlagLastOfMessage,
		ReqEBSN: rq.RxBSN, DataEBSN: tc.Window(wire.WindowData).RxBSN, PayloadLen: uint16(len(payload))}
	h.Ext.Present |= wire.ExtRegion
	h.Ext.Region = wire.RegionRef{Key: x.keys[x.target], Addr: 0}
	if st.ordered {
		h.Flags |= wire.FlagOrdered
	}
	a := wire.Addrs{SrcMAC: [6]byte{2, 0, 0, 0, 0, 0x99}, DstMAC: x.c.Nodes[x.target].Addr().MAC,
		SrcIP: netip.AddrFrom4([4]byte{10, 0, 0, 99}), DstIP: x.c.Nodes[x.target].IP}
	buf := make([]byte, 512)
	n, err := wire.EncodeFrame(buf, &a, &h, payload)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// forgeAhead is how far past the initiator's NSN a forged ACK names: past
// any PSN it can assign while the forgery travels (a window is 64 PSNs),
// and well within the half of the sequence space an ACK may name ahead.
const forgeAhead = 1 << 16

// forge builds a hostile acknowledgement to node 0 on its connection, in
// the target's name: kind 0 an ACK past NSN, 1 an extended ACK whose
// bitmap has bit 0 (the eBSN itself) set, 2 a NACK "unexpected" for an
// outstanding PSN, 3 a ULP-error-free RNR NACK for a PSN never sent.
func (x *fx) forge(kind int, off uint32) ([]byte, error) {
	if os.Getenv("PEREGRINE_FAULT_NOFORGE") != "" {
		return nil, nil
	}
	st := x.ini[0]
	if st.conn == nil || st.conn.Transport() == nil {
		return nil, nil
	}
	tc := st.conn.Transport()
	if tc.State() != rt.StateEstablished {
		return nil, nil
	}
	w := wire.WindowRequest
	if off%2 == 1 {
		w = wire.WindowData
	}
	rq, dt := tc.Window(wire.WindowRequest), tc.Window(wire.WindowData)
	ws := rq
	if w == wire.WindowData {
		ws = dt
	}
	h := wire.Header{Version: wire.Version, DestCID: tc.LocalCID(), Type: wire.TypeAck, ReqEBSN: rq.TxBSN, DataEBSN: dt.TxBSN}
	switch kind {
	case 0:
		// Past NSN by far more than the sender can assign before the
		// forgery arrives: one just past it (NSN+1) named, by the time it
		// got there, packets the initiator had sent in the meantime — lost
		// on the cut link — and an acknowledgement of packets that were
		// sent is one no receiver can tell from the peer's own (seed 5
		// failed so: it was counted valid, retired two packets the target
		// never had, and the connection failed on the hole).
		if w == wire.WindowRequest {
			h.ReqEBSN = rq.TxNSN + forgeAhead + off
		} else {
			h.DataEBSN = dt.TxNSN + forgeAhead + off
		}
	case 1:
		if ws.TxNSN == ws.TxBSN {
			return nil, nil // nothing outstanding to lie about
		}
		h.Type = wire.TypeExtendedAck
		bm := &h.Ack.ReqBitmap
		if w == wire.WindowData {
			bm = &h.Ack.DataBitmap
		}
		for n := uint32(0); n < min(ws.TxNSN-ws.TxBSN, 8); n++ {
			bm.Set(n)
		}
	case 2:
		if ws.TxNSN == ws.TxBSN {
			return nil, nil
		}
		h.Type = wire.TypeNack
		h.Nack = wire.NackBody{Code: wire.NackUnexpected, Window: w, PSN: ws.TxBSN + off%(ws.TxNSN-ws.TxBSN)}
	case 3:
		h.Type = wire.TypeNack
		h.Nack = wire.NackBody{Code: wire.NackReceiverNotReady, Window: w, PSN: ws.TxNSN + 10 + off, RNRTimeoutMicros: 100000}
	}
	a := wire.Addrs{SrcMAC: x.c.Nodes[x.target].Addr().MAC, DstMAC: x.c.Nodes[0].Addr().MAC, SrcIP: x.c.Nodes[x.target].IP, DstIP: x.c.Nodes[0].IP}
	buf := make([]byte, 512)
	n, err := wire.EncodeFrame(buf, &a, &h, nil)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// digest describes a finished run: every operation's fate and time, and
// what the transports did.
func (x *fx) digest() string {
	var s []string
	for tag := range x.nextTag {
		op := x.ops[tag]
		s = append(s, fmt.Sprintf("%d:%v@%v", tag, op.status, op.ended))
	}
	return strings.Join(s, " ") + " | " + x.summary() + fmt.Sprintf(" | %+v", x.c.Switch.Stats())
}

// TestFaultsDeterministic: a scenario's seed replays the same run, so the
// replay command a failure prints reproduces it.
func TestFaultsDeterministic(t *testing.T) {
	pool := newFaultPool(t)
	for _, name := range []string{"ack-only-loss", "restart-new-seed", "forged-rnr-nack"} {
		var sc *faultScenario
		for i := range faultScenarios {
			if faultScenarios[i].name == name {
				sc = &faultScenarios[i]
			}
		}
		require.NotNil(t, sc, name)
		for _, seed := range []uint64{1, 2} {
			var digests []string
			for range 2 {
				x, err := newFx(sc, seed, 1, pool, false)
				require.NoError(t, err)
				require.NoError(t, x.run(), "%s seed %d", name, seed)
				digests = append(digests, x.digest())
				x.c.Stop()
				require.NoError(t, x.c.Close())
			}
			require.Equal(t, digests[0], digests[1], "%s seed %d replays the same run", name, seed)
		}
	}
}
