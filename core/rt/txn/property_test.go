package txn

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// propertySeeds is 1000 (100 under -short), or PEREGRINE_SEEDS.
func propertySeeds(t *testing.T) int { return testenv.Seeds{Full: 1000, Short: 100}.N(t) }

const (
	propSlot  = 24 << 10 // bytes of region per operation
	propOps   = 10       // operations per connection
	propConns = 3
	propZone  = 2 * propOps * propSlot // slots of both A→B connections
)

// propSide is one endpoint's memory in the property test: src holds what
// its pushes send, dst where its pulls land, remote what peers push into
// (first half) and pull from (second half).
type propSide struct {
	src, dst, remote []byte
	rSrc, rDst, rRem Region
}

type propOp struct {
	conn      int
	kind      OpKind
	size      int
	bad       bool
	slot      int
	solicit   Solicit
	tag       uint64
	posted    bool
	rsn       uint32
	completed int
	// Harsh scenarios only: the operation's timeout, and the poll after
	// which it is cancelled (-1: never).
	timeout  time.Duration
	cancelAt int
}

// propScenario is one seed's workload: three connections (A→B ordered,
// A→B unordered, B→A ordered), mixed pushes (solicited and not) and pulls,
// some naming a region that does not exist, through a fabric with loss,
// reordering, duplication, corruption and delay.
type propScenario struct {
	seed    uint64
	profile string
	swift   bool
	ops     []propOp
	// tight: a third of the seeds cap each window at two unacknowledged
	// packets (without Swift) and refuse a third of the operations, so
	// connections often wait for room while their last packets are
	// refused.
	tight bool
	// harsh: a fault scenario (TestTransactionFaultProperty): heavy loss
	// and a small retry limit, so packets are abandoned, notices lost and
	// connections fail; every operation must still complete exactly once
	// with a named status, and nothing may stay allocated.
	harsh      bool
	retryLimit int
}

func randomScenario(seed uint64) propScenario {
	r := rand.New(rand.NewPCG(seed, 0x7a))
	sc := propScenario{seed: seed, swift: r.IntN(2) == 0}
	sc.profile = fmt.Sprintf("loss=%.2f%%,dup=%.2f%%,reorder=%.1f%%/%dus,corrupt=%.2f%%,delay=%dus,jitter=%dus",
		r.Float64()*3, r.Float64()*2, r.Float64()*10, 5+r.IntN(40), r.Float64(), 2+r.IntN(8), r.IntN(5))
	var per [propConns][]propOp
	for c := range propConns {
		for i := range propOps {
			op := propOp{conn: c, kind: OpPush, slot: i, tag: uint64(c*1000 + i)}
			if r.IntN(3) == 0 {
				op.kind = OpPull
			}
			switch r.IntN(4) {
			case 0:
				op.size = r.IntN(64)
			case 1:
				op.size = r.IntN(4 << 10)
			default:
				op.size = r.IntN(propSlot + 1)
			}
			op.solicit = Solicit(r.IntN(3))
			op.bad = r.IntN(12) == 0
			per[c] = append(per[c], op)
		}
	}
	// Interleave the connections, each in its own slot (posting) order.
	for len(sc.ops) < propConns*propOps {
		c := r.IntN(propConns)
		if len(per[c]) > 0 {
			sc.ops = append(sc.ops, per[c][0])
			per[c] = per[c][1:]
		}
	}
	// Drawn last, so the scenarios above stay what they were.
	if sc.tight = r.IntN(3) == 0; sc.tight {
		for i := range sc.ops {
			sc.ops[i].bad = sc.ops[i].bad || r.IntN(3) == 0
		}
	}
	return sc
}

// harshScenario is randomScenario's workload through heavy loss (10–30 %)
// with a retry limit of 2, 3 or the default 7.
func harshScenario(seed uint64) propScenario {
	sc := randomScenario(seed)
	r := rand.New(rand.NewPCG(seed, 0x4a5))
	sc.harsh = true
	sc.profile = fmt.Sprintf("loss=%.1f%%,reorder=%.1f%%/%dus,delay=%dus,jitter=%dus",
		10+r.Float64()*20, r.Float64()*10, 5+r.IntN(40), 2+r.IntN(8), r.IntN(5))
	sc.retryLimit = [...]int{2, 3, 7}[r.IntN(3)]
	// Some operations time out early, some are cancelled.
	for i := range sc.ops {
		sc.ops[i].cancelAt = -1
		switch r.IntN(8) {
		case 0:
			sc.ops[i].timeout = time.Duration(20+r.IntN(2000)) * time.Microsecond
		case 1:
			sc.ops[i].cancelAt = r.IntN(60)
		}
	}
	return sc
}

func (sc propScenario) String() string {
	test := "TestTransactionProperty"
	if sc.harsh {
		test = "TestTransactionFaultProperty"
	}
	return fmt.Sprintf("seed %d (replay: go test ./core/rt/txn -run %s -seed %d): profile %s swift=%v tight=%v retry=%d", sc.seed, test, sc.seed, sc.profile, sc.swift, sc.tight, sc.retryLimit)
}

// TestTransactionFaultProperty runs the property workload through heavy
// loss with few retries (fault seeds: 200, or PEREGRINE_SEEDS).
// Packets are abandoned at both ends, abort notices are lost and resent,
// connections fail. Checked by the test, not by the library: every
// posted operation completes exactly once, OK or a named error, in
// posting order on ordered connections; an OK one placed exactly its
// bytes; no request reaches a target ULP twice or out of order; and in
// the end no context, reorder entry, scheduler item, incast credit or
// frame is held.
func TestTransactionFaultProperty(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "txn-fault-property", Frames: 16384, CacheSize: 128})
	require.NoError(t, err)
	defer pool.Close()
	if seed, ok := testenv.Replay(t); ok {
		sc := harshScenario(seed)
		t.Log(sc)
		require.NoError(t, runScenario(t, pool, sc))
		return
	}
	n := testenv.Seeds{Full: 200, Short: 50}.N(t)
	for s := range n {
		sc := harshScenario(uint64(s))
		if err := runScenario(t, pool, sc); err != nil {
			t.Fatalf("%v\n%v", sc, err)
		}
	}
	t.Logf("%d fault seeds: every operation completed exactly once with a named status, nothing held at the end; statuses %v", n, harshTally)
}

func TestTransactionProperty(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "txn-property", Frames: 16384, CacheSize: 128})
	require.NoError(t, err)
	defer pool.Close()
	if seed, ok := testenv.Replay(t); ok {
		sc := randomScenario(seed)
		t.Log(sc)
		require.NoError(t, runScenario(t, pool, sc))
		return
	}
	n := propertySeeds(t)
	for s := range n {
		sc := randomScenario(uint64(s))
		if err := runScenario(t, pool, sc); err != nil {
			t.Fatalf("%v\n%v", sc, err)
		}
	}
	t.Logf("%d seeds: every transaction completed exactly once, in order where promised, byte-exact", n)
}

func runScenario(t *testing.T, pool *mbuf.Pool, sc propScenario) (err error) {
	const incast = 32 << 10
	p := newPairOn(t, pool, sc.seed, sc.profile, func(a, b *Options) {
		for _, o := range []*Options{a, b} {
			o.IncastCap = incast
			o.MaxOps = 64
			if sc.tight {
				o.Transport.MaxOutstanding = 2
			}
			if sc.retryLimit > 0 {
				o.Transport.RetryLimit = sc.retryLimit
			}
			if sc.harsh {
				// A connection that fails at one end only (its retries
				// ran out there) is found at the other by the idle
				// timeout; no operation has a timeout, so one that hangs
				// fails the test.
				o.Transport.KeepAlive, o.Transport.IdleTimeout = time.Millisecond, 50*time.Millisecond
			}
			if sc.swift {
				sp := swift.DefaultParams()
				o.Congestion = &sp
			}
		}
	})
	defer func() {
		p.close()
		if n := pool.InUse(); n != 0 && err == nil {
			err = fmt.Errorf("pool in-use %d after stop", n)
		}
	}()
	sides := [2]*propSide{{}, {}}
	eps := [2]*Endpoint{p.a, p.b}
	for i, s := range sides {
		s.src = pattern(sc.seed*2+uint64(i), propZone)
		s.dst = make([]byte, propZone)
		s.remote = make([]byte, 2*propZone)
		copy(s.remote[propZone:], pattern(sc.seed*2+uint64(i)+100, propZone))
		s.rSrc, _ = eps[i].Register(s.src, 0)
		s.rDst, _ = eps[i].Register(s.dst, 0)
		s.rRem, _ = eps[i].Register(s.remote, RemoteWrite|RemoteRead)
	}
	conns := [propConns]*Conn{}
	from := [propConns]int{0, 0, 1}
	for c := range propConns {
		ep, peer := p.a, p.peerB()
		if from[c] == 1 {
			ep, peer = p.b, p.peerA()
		}
		conns[c], err = ep.Open(peer, ConnOptions{Ordered: c != 1})
		if err != nil {
			return err
		}
	}
	// Post everything (retrying on busy), then run to completion.
	byTag := map[uint64]*propOp{}
	for i := range sc.ops {
		op := &sc.ops[i]
		byTag[op.tag] = op
		src, dst := sides[from[op.conn]], sides[1-from[op.conn]]
		o := Op{Len: op.size, Tag: op.tag, Solicit: op.solicit, Timeout: op.timeout}
		remoteKey := dst.rRem.Key
		if op.bad {
			remoteKey ^= 0x5a5a0000
		}
		slot := uint64(opSlotIndex(op)) * propSlot
		if op.kind == OpPush {
			o.Local, o.LocalAddr = src.rSrc, slot
			o.Remote = wire.RegionRef{Key: remoteKey, Addr: slot}
		} else {
			o.Local, o.LocalAddr = src.rDst, slot
			o.Remote = wire.RegionRef{Key: remoteKey, Addr: propZone + slot}
		}
		for {
			if op.kind == OpPush {
				op.rsn, err = conns[op.conn].Push(o)
			} else {
				op.rsn, err = conns[op.conn].Pull(o)
			}
			if err == nil {
				op.posted = true
				break
			}
			if sc.harsh && err == ErrClosed {
				break // the connection failed already
			}
			if !isBusy(err) {
				return fmt.Errorf("post %+v: %w", *op, err)
			}
			p.poll()
			p.clk.Advance(time.Microsecond)
		}
	}
	total := len(sc.ops)
	if sc.harsh {
		return checkHarsh(p, sc, byTag, sides, from, conns)
	}
	if !p.runFor(func() bool { return len(p.cqA)+len(p.cqB) >= total }, 20*time.Second) {
		return fmt.Errorf("only %d of %d completions after 20s (A %+v, B %+v)\nA:\n%sB:\n%scompletions A %v\nB %v", len(p.cqA)+len(p.cqB), total, p.a.Stats(), p.b.Stats(), p.a.dump(), p.b.dump(), brief(p.cqA), brief(p.cqB))
	}
	// Settle: every request released and every packet acknowledged.
	p.runFor(func() bool {
		return p.a.Outstanding() == 0 && p.b.Outstanding() == 0 && p.a.Transport().Outstanding() == 0 && p.b.Transport().Outstanding() == 0
	}, 5*time.Second)

	// Exactly once, with the expected status, in posting order per
	// ordered connection.
	last := [propConns]int{-1, -1, -1}
	for _, cq := range [][]Completion{p.cqA, p.cqB} {
		for _, cp := range cq {
			op := byTag[cp.Tag]
			if op == nil {
				return fmt.Errorf("completion for unknown tag %d", cp.Tag)
			}
			op.completed++
			if op.completed > 1 {
				return fmt.Errorf("tag %d completed twice", cp.Tag)
			}
			want := StatusOK
			if op.bad {
				want = StatusRemoteAccess
			}
			if cp.Status != want {
				return fmt.Errorf("tag %d (%v %d bytes, bad=%v): status %v, want %v", cp.Tag, op.kind, op.size, op.bad, cp.Status, want)
			}
			if op.conn != 1 {
				if op.slot <= last[op.conn] {
					return fmt.Errorf("conn %d: completion of slot %d after slot %d (ordered)", op.conn, op.slot, last[op.conn])
				}
				last[op.conn] = op.slot
			}
		}
	}
	// Byte-exact placement; refused operations wrote nothing.
	for _, op := range sc.ops {
		src, dst := sides[from[op.conn]], sides[1-from[op.conn]]
		slot := opSlotIndex(&op) * propSlot
		switch {
		case op.kind == OpPush:
			got := dst.remote[slot : slot+op.size]
			if op.bad {
				if !allZero(dst.remote[slot : slot+propSlot]) {
					return fmt.Errorf("tag %d: refused push wrote the target", op.tag)
				}
			} else if !bytes.Equal(got, src.src[slot:slot+op.size]) {
				return fmt.Errorf("tag %d: pushed bytes differ", op.tag)
			}
		default:
			got := src.dst[slot : slot+op.size]
			want := dst.remote[propZone+slot : propZone+slot+op.size]
			if op.bad {
				if !allZero(src.dst[slot : slot+propSlot]) {
					return fmt.Errorf("tag %d: refused pull wrote local memory", op.tag)
				}
			} else if !bytes.Equal(got, want) {
				return fmt.Errorf("tag %d: pulled bytes differ", op.tag)
			}
		}
	}
	// Requests reached the target ULPs once each, in RSN order where ordered.
	for side, reqs := range [][]Request{p.reqB, p.reqA} {
		seen := map[[2]uint64]bool{}
		lastRSN := map[*Conn]int64{}
		for _, r := range reqs {
			k := [2]uint64{uint64(r.Conn.idx), uint64(r.RSN)}
			if seen[k] {
				return fmt.Errorf("side %d: request rsn %d delivered twice", side, r.RSN)
			}
			seen[k] = true
			if r.Conn.Ordered() {
				if l, ok := lastRSN[r.Conn]; ok && int64(r.RSN) <= l {
					return fmt.Errorf("side %d: request rsn %d after %d on an ordered connection", side, r.RSN, l)
				}
				lastRSN[r.Conn] = int64(r.RSN)
			}
		}
	}
	good := 0
	for _, op := range sc.ops {
		if !op.bad {
			good++
		}
	}
	if got := len(p.reqA) + len(p.reqB); got != good {
		return fmt.Errorf("%d requests delivered to the ULPs, want %d", got, good)
	}
	for i, ep := range eps {
		st := ep.Stats()
		if st.GrantedMax > incast && st.GrantedMax > propSlot {
			return fmt.Errorf("side %d granted %d bytes at once, cap %d", i, st.GrantedMax, incast)
		}
		if ep.Outstanding() != 0 || ep.Transport().Outstanding() != 0 {
			return fmt.Errorf("side %d: %d transactions, %d packets outstanding at the end", i, ep.Outstanding(), ep.Transport().Outstanding())
		}
		if ep.Transport().Stats().Internal != 0 {
			return fmt.Errorf("side %d: transport internal errors", i)
		}
		if err := ep.Transport().CheckInvariants(); err != nil {
			return fmt.Errorf("side %d: %w", i, err)
		}
	}
	return nil
}

// opSlotIndex separates the slots of the two A→B connections.
func opSlotIndex(op *propOp) int {
	if op.conn == 1 {
		return op.slot + propOps
	}
	return op.slot
}

func allZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

func isBusy(err error) bool { return err == ErrBusy || err == rt.ErrBusy }

func brief(cq []Completion) string {
	s := ""
	for _, c := range cq {
		s += fmt.Sprintf(" %d:%v", c.Tag, c.Status)
	}
	return s
}
