package txn

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// advTally counts the statuses the operations of a sweep ended with.
var advTally map[Status]int

// advOp is one operation the sweep posted: the ledger's own record.
type advOp struct {
	kind    OpKind
	tag     uint64
	rsn     uint32
	n       int
	off     uint64 // in the source (push, Send) or local (pull) region
	remote  uint64 // in B's region (push, pull)
	wqeLen  int    // Send: the WQE posted for it
	lateWQE int    // Send: polls before its WQE is posted (0: before the Send)
}

// advStash is a copy of a real frame the adversary replays later.
type advStash struct {
	h     mbuf.Handle
	fromA bool
}

// TestAdversarySweep runs, per seed, Sends (WQEs posted late or too
// short), pushes and pulls on an ordered or unordered connection (with
// and without a delivery index) through an adversary that loses frames,
// loses refusals, holds frames back behind later ones, rewrites fields
// of real frames keeping their PSN and connection (request number, Send
// index, request length, offset: TestAdversarySweepForged only), and
// replays copies of real frames later. It checks, from its own ledger of what it posted and what B's
// ULP saw (not from the transport's counters): every operation ends; an
// OK push is in B's memory and was handed to B's ULP exactly once; an OK
// Send is in exactly one WQE, which completed OK for it; an OK pull
// read B's bytes; no WQE completes twice or for two Sends.
//
// Seeds: 1000, PEREGRINE_SEEDS, or 100 under -short or -race; -seed=N
// replays one. Forged fields are TestAdversarySweepForged; replayed
// 0-RTT connects TestAdversarySweepEarlyReplay.
func TestAdversarySweep(t *testing.T) { adversarySweep(t, false) }

// TestAdversarySweepForged is the sweep with the forger on: real frames
// (data, requests, ACKs and NACKs) with a field rewritten (request
// number, Send index, request length, offset) keeping their PSN and
// connection. Every packet of a connection is sealed (core/rt seal.go):
// the rewritten one fails its tag, is dropped unacknowledged, and the
// real one's resend wins.
func TestAdversarySweepForged(t *testing.T) { adversarySweep(t, true) }

func adversarySweep(t *testing.T, forged bool) {
	advTally = map[Status]int{}
	n := sweepSeeds(t, func(pool *mbuf.Pool, seed uint64) error { return runAdversarySeed(t, pool, seed, forged) })
	t.Logf("%d seeds; operations by status: %v", n, advTally)
}

// sweepSeeds runs one seed after another on one pool and returns how many
// ran: 1000, PEREGRINE_SEEDS, or 100 under -short or -race; -seed=N runs
// that one. The first ten failures are reported in full, the rest by
// number, so that one run tells how many seeds fail.
func sweepSeeds(t *testing.T, run func(pool *mbuf.Pool, seed uint64) error) int {
	n := testenv.Seeds{Full: 1000, Short: 100, Race: 100}.N(t)
	first := 0
	if seed, ok := testenv.Replay(t); ok {
		first, n = int(seed), 1
	}
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: 8192, CacheSize: 64})
	require.NoError(t, err)
	defer pool.Close()
	var failed []uint64
	for seed := first; seed < first+n; seed++ {
		if err := run(pool, uint64(seed)); err != nil {
			if failed = append(failed, uint64(seed)); len(failed) <= 10 {
				t.Errorf("seed %d: %v\nreplay: go test ./core/rt/txn -run '%s$' -count=1 -seed=%d", seed, err, t.Name(), seed)
			}
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d seeds failed: %v", len(failed), n, failed)
	}
	return n
}

func runAdversarySeed(t *testing.T, pool *mbuf.Pool, seed uint64, forged bool) (err error) {
	r := rand.New(rand.NewPCG(seed, 0xad7e))
	cfg := []dix.Config{{}, {Kind: dix.FreeRunning, Width: 16}, {Kind: dix.Relative, Width: 8, Carry: dix.CarryUntilAcked}}[r.IntN(3)]
	ordered := r.IntN(2) == 0
	loss := r.Float64() * 0.05
	nackLoss := r.Float64() * 0.5
	forge := r.Float64() * 0.03
	replay := r.Float64() * 0.03
	reorder := r.Float64() * 0.1
	if !forged {
		forge = 0
	}
	// PEREGRINE_ADVERSARY_OFF (a comma list of loss, nack, forge, replay,
	// reorder) turns faults off, to tell which one a failing seed needs;
	// the random draws stay the same.
	for _, f := range strings.Split(os.Getenv("PEREGRINE_ADVERSARY_OFF"), ",") {
		switch f {
		case "loss":
			loss = 0
		case "nack":
			nackLoss = 0
		case "forge":
			forge = 0
		case "replay":
			replay = 0
		case "reorder":
			reorder = 0
		}
	}

	sp, m := newTamperPair(t, pool, seed, nil)
	var stash []advStash
	var acts []string // what the adversary did, for the report
	defer func() {
		for _, s := range stash {
			pool.Free([]mbuf.Handle{s.h})
		}
		sp.close()
		if n := pool.InUse(); err == nil && n != 0 {
			err = fmt.Errorf("%d frames in use after close", n)
		}
	}()
	c := sp.openWith(ConnOptions{Index: cfg, Ordered: ordered})

	m.late = func() bool { return r.Float64() < reorder }
	m.tamper = func(fromA bool, h wire.HeaderView, frame []byte) bool {
		if h.Type() == wire.TypeNack && r.Float64() < nackLoss || r.Float64() < loss {
			acts = append(acts, fmt.Sprintf("drop %v %d/%d", h.Type(), h.PSN(), h.RSN()))
			return true
		}
		if r.Float64() < replay && len(stash) < 64 {
			cp := make([]mbuf.Handle, 1)
			if pool.AllocBulk(cp) == 1 && pool.SetLen(cp[0], len(frame)) {
				copy(pool.Data(cp[0]), frame)
				stash = append(stash, advStash{cp[0], fromA})
				acts = append(acts, fmt.Sprintf("copy %v %d/%d", h.Type(), h.PSN(), h.RSN()))
			} else if cp[0] != 0 {
				pool.Free(cp)
			}
		}
		if r.Float64() < forge {
			// A real frame with a field rewritten: its PSN and
			// connection stay valid, so only the ULP's checks see it.
			f := r.IntN(4)
			v := []uint32{uint32(r.IntN(16)), uint32(r.IntN(16)), uint32(r.IntN(8192)), uint32(r.IntN(8192))}[f]
			acts = append(acts, fmt.Sprintf("forge %s=%d of %v %d/%d", []string{"rsn", "ssn", "reqlen", "offset"}[f], v, h.Type(), h.PSN(), h.RSN()))
			if f == 1 {
				forgeSSN(frame, v) // Send index or number
			} else {
				forgeWord(frame, []int{12, 0, 36, 40}[f], v) // request number, request length, offset
			}
		}
		return false
	}

	const slot = 4096
	nOps := 3 + r.IntN(10)
	src := pattern(seed, nOps*slot)
	local := make([]byte, nOps*slot)
	dst := pattern(^seed, nOps*slot)
	orig := append([]byte(nil), dst...)
	wqeMem := make([]byte, nOps*slot)
	var regs [4]Region
	for i, g := range []struct {
		e      *Endpoint
		mem    []byte
		access Access
	}{{sp.a, src, 0}, {sp.a, local, 0}, {sp.b, dst, RemoteWrite | RemoteRead}, {sp.b, wqeMem, 0}} {
		if regs[i], err = g.e.Register(g.mem, g.access); err != nil {
			return err
		}
	}
	ra, rl, rb, rw := regs[0], regs[1], regs[2], regs[3]

	ops := make([]advOp, nOps)
	var lateWQEs []int
	for i := range ops {
		op := &ops[i]
		op.tag, op.off, op.remote = uint64(i), uint64(i*slot), uint64(i*slot)
		op.n = 1 + r.IntN(3000)
		op.kind = []OpKind{OpSend, OpPush, OpPull}[r.IntN(3)]
		if op.kind == OpSend {
			op.wqeLen = op.n
			if r.IntN(8) == 0 {
				op.wqeLen = r.IntN(op.n) // too short
			}
			if r.IntN(4) == 0 {
				op.lateWQE = 1 + r.IntN(200)
				lateWQEs = append(lateWQEs, i)
			} else if _, err := sp.cb.PostRecv(RecvWR{Local: rw, LocalAddr: op.off, Len: op.wqeLen, WRID: op.tag}); err != nil {
				return fmt.Errorf("post recv %d: %w", i, err)
			}
		}
	}
	for i := range ops {
		op := &ops[i]
		o := Op{Local: ra, LocalAddr: op.off, Len: op.n, Remote: wire.RegionRef{Key: rb.Key, Addr: op.remote}, Tag: op.tag}
		switch op.kind {
		case OpSend:
			o.Remote = wire.RegionRef{}
			op.rsn, err = c.Send(o)
		case OpPush:
			op.rsn, err = c.Push(o)
		default:
			o.Local = rl
			op.rsn, err = c.Pull(o)
		}
		if err != nil {
			return fmt.Errorf("post op %d (%v): %w", i, op.kind, err)
		}
	}
	// Late WQEs in their order, each after its number of polls; replayed
	// frames go in now and then, into the direction they came from.
	for step := 0; len(lateWQEs) > 0 || step < 400; step++ {
		if len(lateWQEs) > 0 && ops[lateWQEs[0]].lateWQE <= step {
			op := &ops[lateWQEs[0]]
			lateWQEs = lateWQEs[1:]
			if _, err := sp.cb.PostRecv(RecvWR{Local: rw, LocalAddr: op.off, Len: op.wqeLen, WRID: op.tag}); err != nil {
				return fmt.Errorf("post late recv %d: %w", op.tag, err)
			}
		}
		if len(stash) > 0 && r.IntN(8) == 0 {
			k := r.IntN(len(stash))
			s := stash[k]
			stash = append(stash[:k], stash[k+1:]...)
			to := m.b
			if !s.fromA {
				to = m.a
			}
			m.send(to, s.h)
			acts = append(acts, "replay")
		}
		if sp.poll() == 0 {
			sp.clk.Advance(time.Microsecond)
		}
	}
	if !sp.runFor(func() bool { return len(sp.cqA) >= nOps }, 10*time.Second) {
		return fmt.Errorf("only %d of %d operations ended (%s)\ncompletions %s\nops %+v\nadversary %v\nledger %v", len(sp.cqA), nOps, advScenario(cfg, ordered, loss, nackLoss, forge, replay, reorder), statuses(sp.cqA), ops, acts,
			advCheck(ops, sp, src, local, dst, orig, wqeMem, ""))
	}
	sp.runFor(func() bool { return sp.settled() }, 2*time.Second)
	if err := advCheck(ops, sp, src, local, dst, orig, wqeMem, advScenario(cfg, ordered, loss, nackLoss, forge, replay, reorder)); err != nil {
		return fmt.Errorf("%w\nops %+v\nadversary %v", err, ops, acts)
	}
	return nil
}

func advScenario(cfg dix.Config, ordered bool, loss, nackLoss, forge, replay, reorder float64) string {
	return fmt.Sprintf("index %+v ordered %v loss %.3f nack-loss %.2f forge %.3f replay %.3f reorder %.2f", cfg, ordered, loss, nackLoss, forge, replay, reorder)
}

// advCheck holds the ledger against what happened.
func advCheck(ops []advOp, sp *sendPair, src, local, dst, orig, wqeMem []byte, scen string) error {
	fail := func(f string, a ...any) error { return fmt.Errorf(f+" (%s)", append(a, scen)...) }
	done := map[uint64]Completion{}
	for _, cp := range sp.cqA {
		if _, dup := done[cp.Tag]; dup {
			return fail("tag %d completed twice", cp.Tag)
		}
		done[cp.Tag] = cp
		advTally[cp.Status]++
	}
	// B's WQEs (named by the WRID, the tag of the Send whose slot of
	// memory it is; Sends take WQEs in the order they were posted): each
	// completes once, and OK for one Send at most.
	wqeBy := map[uint64]Completion{}
	okBy := map[uint32]Completion{}
	for _, rc := range sp.recvs() {
		if _, dup := wqeBy[rc.Tag]; dup {
			return fail("WQE %d (WRID) completed twice", rc.Tag)
		}
		wqeBy[rc.Tag] = rc
		if rc.Status == StatusOK {
			if prev, dup := okBy[rc.RSN]; dup {
				return fail("Send RSN %d filled two WQEs (WRIDs %d and %d)", rc.RSN, prev.Tag, rc.Tag)
			}
			okBy[rc.RSN] = rc
		}
	}
	pushSeen := map[uint32][]Request{}
	for _, rq := range sp.reqB {
		if rq.Kind == OpPush {
			pushSeen[rq.RSN] = append(pushSeen[rq.RSN], rq)
		}
	}
	for _, op := range ops {
		cp, ok := done[op.tag]
		if !ok {
			return fail("op %d (%v) never ended", op.tag, op.kind)
		}
		if cp.Status != StatusOK {
			continue
		}
		want := src[op.off : op.off+uint64(op.n)]
		switch op.kind {
		case OpPush:
			if !bytes.Equal(dst[op.remote:op.remote+uint64(op.n)], want) {
				return fail("push %d OK at A but B's memory does not hold its bytes", op.tag)
			}
			seen := pushSeen[op.rsn]
			if len(seen) != 1 {
				return fail("push %d (RSN %d) OK at A, handed to B's ULP %d times", op.tag, op.rsn, len(seen))
			}
			if !bytes.Equal(seen[0].Data, want) {
				return fail("push %d: B's ULP saw other bytes", op.tag)
			}
		case OpPull:
			if !bytes.Equal(local[op.off:op.off+uint64(op.n)], orig[op.remote:op.remote+uint64(op.n)]) {
				return fail("pull %d OK at A but its bytes are not B's", op.tag)
			}
		case OpSend:
			rc, ok := okBy[op.rsn]
			if !ok {
				return fail("Send %d (RSN %d) OK at A; no WQE completed OK for it (WQE completions %s)", op.tag, op.rsn, statuses(sp.recvs()))
			}
			at := ops[rc.Tag].off
			if rc.Bytes != op.n || !bytes.Equal(wqeMem[at:at+uint64(op.n)], want) {
				return fail("Send %d OK at A; WQE %d holds %d bytes, not the Send's", op.tag, rc.Tag, rc.Bytes)
			}
		}
	}
	return nil
}

// TestAdversarySweepEarlyReplay: per seed, A opens an early (0-RTT)
// connection and pushes at once, before ConnAccept, through an adversary
// that loses and reorders frames and keeps a copy of every early frame A
// sends (the early ConnOpens, resends included, and the pushes riding
// them). Once every push completed, the connection closed and its
// linger passed, B's memory is overwritten with newer data; the copies
// then come back, in a random order, some twice. No old push may run
// again: B's memory keeps the newer bytes, B's ULP is handed nothing
// more, and B accepts no connection.
//
// Seeds as TestAdversarySweep.
func TestAdversarySweepEarlyReplay(t *testing.T) {
	replayed := 0
	n := sweepSeeds(t, func(pool *mbuf.Pool, seed uint64) error {
		k, err := runEarlyReplaySeed(t, pool, seed)
		replayed += k
		return err
	})
	t.Logf("%d seeds; %d early frames replayed", n, replayed)
	require.Positive(t, replayed, "the adversary replayed nothing")
}

func runEarlyReplaySeed(t *testing.T, pool *mbuf.Pool, seed uint64) (replayed int, err error) {
	r := rand.New(rand.NewPCG(seed, 0xea71))
	loss := r.Float64() * 0.05
	reorder := r.Float64() * 0.1
	sp, m := newTamperPair(t, pool, seed, nil)
	var stash []mbuf.Handle
	defer func() {
		pool.Free(stash)
		sp.close()
		if n := pool.InUse(); err == nil && n != 0 {
			err = fmt.Errorf("%d frames in use after close", n)
		}
	}()
	m.late = func() bool { return r.Float64() < reorder }
	m.tamper = func(fromA bool, h wire.HeaderView, frame []byte) bool {
		// Every early frame of A's: destination CID 0 (ConnOpen, and the
		// data sent before ConnAccept).
		if fromA && binary.BigEndian.Uint32(frame[hdrOff:])&wire.MaxCID == 0 && len(stash) < 64 {
			cp := make([]mbuf.Handle, 1)
			if pool.AllocBulk(cp) == 1 && pool.SetLen(cp[0], len(frame)) {
				copy(pool.Data(cp[0]), frame)
				stash = append(stash, cp[0])
			} else if cp[0] != 0 {
				pool.Free(cp)
			}
		}
		return r.Float64() < loss
	}

	const slot = 4096
	nOps := 1 + r.IntN(6)
	src := pattern(seed, nOps*slot)
	dst := pattern(^seed, nOps*slot)
	ra, err := sp.a.Register(src, 0)
	if err != nil {
		return 0, err
	}
	rb, err := sp.b.Register(dst, RemoteWrite)
	if err != nil {
		return 0, err
	}
	c, err := sp.a.OpenEarly(sp.peerB(), ConnOptions{Ordered: r.IntN(2) == 0})
	if err != nil {
		return 0, err
	}
	for i := range nOps {
		o := Op{Local: ra, LocalAddr: uint64(i * slot), Len: 1 + r.IntN(900), Remote: wire.RegionRef{Key: rb.Key, Addr: uint64(i * slot)}, Tag: uint64(i)}
		if _, err := c.Push(o); err != nil {
			return 0, fmt.Errorf("push %d: %w", i, err)
		}
	}
	if !sp.runFor(func() bool { return len(sp.cqA) == nOps }, 10*time.Second) {
		return 0, fmt.Errorf("only %d of %d pushes ended (loss %.3f reorder %.2f): %s", len(sp.cqA), nOps, loss, reorder, statuses(sp.cqA))
	}
	if err := c.Close(); err != nil {
		return 0, fmt.Errorf("close: %w", err)
	}
	if !sp.runFor(func() bool { return sp.a.Transport().Conns() == 0 && sp.b.Transport().Conns() == 0 }, 10*time.Second) {
		return 0, fmt.Errorf("the connection never closed (A %d, B %d slots)", sp.a.Transport().Conns(), sp.b.Transport().Conns())
	}
	m.tamper, m.late = nil, nil
	sp.runFor(func() bool { return false }, time.Second) // long past B's linger
	newer := pattern(seed+7, len(dst))
	copy(dst, newer)
	reqs, accepted := len(sp.reqB), sp.b.Transport().Stats().ConnAccepted
	if len(stash) == 0 {
		return 0, nil
	}
	// Some twice: a network may duplicate as well as delay.
	for range r.IntN(len(stash) + 1) {
		cp := make([]mbuf.Handle, 1)
		k := stash[r.IntN(len(stash))]
		if pool.AllocBulk(cp) == 1 && pool.SetLen(cp[0], len(pool.Data(k))) {
			copy(pool.Data(cp[0]), pool.Data(k))
			stash = append(stash, cp[0])
		} else if cp[0] != 0 {
			pool.Free(cp)
		}
	}
	r.Shuffle(len(stash), func(i, j int) { stash[i], stash[j] = stash[j], stash[i] })
	for len(stash) > 0 {
		h := stash[0]
		stash = stash[1:]
		m.send(m.b, h)
		replayed++
		for range r.IntN(3) {
			sp.poll()
			sp.clk.Advance(time.Duration(r.IntN(50)) * time.Microsecond)
		}
	}
	sp.runFor(func() bool { return false }, 50*time.Millisecond)
	switch {
	case !bytes.Equal(dst, newer):
		return replayed, fmt.Errorf("a replayed 0-RTT push overwrote newer data (%d early frames replayed)", replayed)
	case len(sp.reqB) != reqs:
		return replayed, fmt.Errorf("B's ULP was handed %d more requests after the replay", len(sp.reqB)-reqs)
	case sp.b.Transport().Stats().ConnAccepted != accepted:
		return replayed, fmt.Errorf("B accepted a replayed connect")
	}
	return replayed, nil
}
