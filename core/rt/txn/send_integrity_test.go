package txn

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// udpCsumOff is where the UDP checksum sits in an IPv4 frame.
const udpCsumOff = wire.EthHeaderLen + wire.IPv4HeaderLen + 6

// forgeSSN rewrites a frame's SSN (a Send's index or number) in place.
func forgeSSN(frame []byte, ssn uint32) { forgeWord(frame, 16, ssn) }

// newTamperPair is a sendPair joined by a middlebox (its tamper and late
// hooks forge, drop and reorder frames); pool nil makes its own (checked
// and closed at cleanup), else the caller calls close.
func newTamperPair(t testing.TB, pool *mbuf.Pool, seed uint64, tweak func(a, b *Options)) (*sendPair, *middlebox) {
	t.Helper()
	own := pool == nil
	if own {
		var err error
		pool, err = mbuf.New(mbuf.Options{Name: t.Name(), Frames: 8192, CacheSize: 64})
		require.NoError(t, err)
	}
	pa, pb, m := newMiddlebox(t, pool)
	sp := &sendPair{}
	sp.pair = buildPair(t, pool, pa, pb, m, seed, func(a, b *Options) {
		for _, o := range []*Options{a, b} {
			o.Segment = 1024
			o.MaxOps = 128
			o.Transport.RetryLimit = 4
			o.Transport.RNRTimeout = 20 * time.Microsecond
		}
		b.OnConnEvent = func(ev ConnEvent) {
			if ev.Kind == ConnEstablished {
				sp.cb = ev.Conn
			}
		}
		if tweak != nil {
			tweak(a, b)
		}
	})
	if own {
		t.Cleanup(func() {
			sp.close()
			require.Zero(t, pool.InUse(), "pool in-use after stop")
			_ = pool.Close()
		})
	}
	return sp, m
}

// isRefusal reports a NACK from B that carries a ULP refusal.
func isRefusal(fromA bool, h wire.HeaderView) bool {
	return !fromA && h.Type() == wire.TypeNack
}

// A Send longer than its WQE is refused; when that refusal NACK is lost
// the Send's packet is resent and finds the WQE consumed. It must be
// refused again, not dropped as stale and acknowledged: before, the
// initiator completed the Send OK while the target completed its WQE
// with a length error. Every Send here is three packets long (each
// packet a chance to be acknowledged as stale), on both placement paths.
func TestSendRefusalRepeatedToEveryResend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     dix.Config
		ordered bool
	}{
		{"baseline", dix.Config{}, false},
		{"baseline-ordered", dix.Config{}, true},
		{"index", dix.Config{Kind: dix.FreeRunning, Width: 16}, false},
		{"index-ordered", dix.Config{Kind: dix.Relative, Width: 8, Carry: dix.CarryUntilAcked}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, m := newTamperPair(t, nil, 1, nil)
			lost := 0
			m.tamper = func(fromA bool, h wire.HeaderView, _ []byte) bool {
				if isRefusal(fromA, h) && lost < 3 {
					lost++
					return true
				}
				return false
			}
			c := sp.openWith(ConnOptions{Index: tc.cfg, Ordered: tc.ordered})
			src := pattern(3, 3000)
			ra, err := sp.a.Register(src, 0)
			require.NoError(t, err)
			dst := make([]byte, 8192)
			rb, err := sp.b.Register(dst, RemoteWrite)
			require.NoError(t, err)
			_, err = sp.cb.PostRecv(RecvWR{Local: rb, Len: 1000, WRID: 0})
			require.NoError(t, err)
			_, err = sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: 4096, Len: 4096, WRID: 1})
			require.NoError(t, err)
			_, err = c.Send(Op{Local: ra, Len: 3000, Tag: 0})
			require.NoError(t, err)
			_, err = c.Send(Op{Local: ra, Len: 3000, Tag: 1})
			require.NoError(t, err)
			sp.run(func() bool { return len(sp.cqA) == 2 && len(sp.recvs()) == 2 }, time.Second)
			got := byTag(t, sp.cqA)
			require.Equal(t, StatusRemoteInvalid, got[0].Status, "the Send longer than its WQE (%d refusal NACKs lost)", lost)
			require.Equal(t, RefusalRecvTooSmall, got[0].Refusal)
			require.Equal(t, StatusOK, got[1].Status)
			recv := byTag(t, sp.recvs())
			require.Equal(t, StatusLocalLength, recv[0].Status)
			require.Equal(t, StatusOK, recv[1].Status)
			require.True(t, bytes.Equal(src, dst[4096:4096+3000]))
			require.Equal(t, 3, lost, "the refusals were lost")
			require.Positive(t, sp.b.SendStats().RefusedAgain)
			sp.run(func() bool { return sp.settled() }, time.Second)
		})
	}
}

// On an ordered connection with the baseline receiver, a Send longer
// than its WQE that arrives before its turn takes the hold path; it must
// keep its turn there as on the direct path. Before, every later Send's
// WQE and every later push waited for it forever, though the initiator
// saw them all complete.
func TestHeldTooLongSendKeepsItsTurn(t *testing.T) {
	sp, m := newTamperPair(t, nil, 2, func(a, b *Options) { b.HoldBytes = 64 << 10 })
	// The first transmission of Send 0 (RSN 0) is lost: Send 1, too long,
	// arrives first and is held back from its WQE.
	lost := false
	m.tamper = func(fromA bool, h wire.HeaderView, _ []byte) bool {
		if fromA && h.Type() == wire.TypeSend && h.RSN() == 0 && !lost {
			lost = true
			return true
		}
		return false
	}
	c := sp.openWith(ConnOptions{Ordered: true})
	src := pattern(4, 16384)
	ra, err := sp.a.Register(src, 0)
	require.NoError(t, err)
	dst := make([]byte, 16384)
	rb, err := sp.b.Register(dst, RemoteWrite)
	require.NoError(t, err)
	for k, n := range []int{4096, 500, 4096} {
		_, err = sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * 4096), Len: n, WRID: uint64(k)})
		require.NoError(t, err)
	}
	for k, n := range []int{100, 2000, 3000} {
		_, err = c.Send(Op{Local: ra, LocalAddr: uint64(k * 4096), Len: n, Tag: uint64(k)})
		require.NoError(t, err)
	}
	_, err = c.Push(Op{Local: ra, LocalAddr: 12288, Len: 64, Remote: wire.RegionRef{Key: rb.Key, Addr: 12288}, Tag: 3})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.cqA) == 4 }, time.Second)
	want := []Status{StatusOK, StatusRemoteInvalid, StatusOK, StatusOK}
	for j, cp := range sp.cqA {
		require.Equal(t, uint64(j), cp.Tag, "posting order")
		require.Equal(t, want[j], cp.Status, "op %d", j)
	}
	require.True(t, lost)
	done := sp.runFor(func() bool { return len(sp.recvs()) == 3 && len(sp.reqB) == 1 }, time.Second)
	require.True(t, done, "receive completions %v, requests delivered %d: the held refusal kept nobody's turn", sp.recvs(), len(sp.reqB))
	recv := byTag(t, sp.recvs())
	require.Equal(t, StatusOK, recv[0].Status)
	require.Equal(t, StatusLocalLength, recv[1].Status)
	require.Equal(t, StatusOK, recv[2].Status)
	require.True(t, bytes.Equal(src[8192:8192+3000], dst[8192:8192+3000]))
	sp.run(func() bool { return sp.settled() }, time.Second)
}

// A packet with a valid PSN whose index names a WQE already bound to
// another Send (misdirected, or forged) cannot take that WQE, and is not
// acknowledged: the packet that really holds its PSN comes again and
// lands in its own WQE. Before, the misdirected packet was dropped and
// acknowledged, so its Send completed OK at the initiator while its WQE
// never completed.
func TestMisdirectedIndexCannotTakeABoundWQE(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  dix.Config
	}{
		{"free-running", dix.Config{Kind: dix.FreeRunning, Width: 8}},
		{"relative", dix.Config{Kind: dix.Relative, Width: 16}},
		{"absolute", dix.Config{Kind: dix.Absolute, Width: 16, Depth: DefaultRecvDepth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Unsealed: the checks a forger that holds the key meets.
			sp, m := newTamperPair(t, nil, 3, func(a, b *Options) { a.Transport.NoSeal = true })
			// Send 0 is three packets and Send 1 one; Send 1's first
			// transmission is rewritten to name WQE 0, which Send 0's
			// first packet bound (the box keeps order).
			forged := 0
			m.tamper = func(fromA bool, h wire.HeaderView, frame []byte) bool {
				if fromA && h.Type() == wire.TypeSend && h.RSN() == 1 && h.Flags()&wire.FlagRetransmission == 0 && forged == 0 {
					forged++
					forgeSSN(frame, h.SSN()-1) // one Send back: WQE 0
				}
				return false
			}
			c := sp.open(tc.cfg)
			src := pattern(5, 8192)
			ra, err := sp.a.Register(src, 0)
			require.NoError(t, err)
			dst := make([]byte, 8192)
			rb, err := sp.b.Register(dst, RemoteWrite)
			require.NoError(t, err)
			for k := range 2 {
				_, err = sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * 4096), Len: 4096, WRID: uint64(k)})
				require.NoError(t, err)
			}
			_, err = c.Send(Op{Local: ra, Len: 3000, Tag: 0})
			require.NoError(t, err)
			_, err = c.Send(Op{Local: ra, LocalAddr: 4096, Len: 700, Tag: 1})
			require.NoError(t, err)
			sp.run(func() bool { return len(sp.cqA) == 2 }, time.Second)
			require.Equal(t, 1, forged)
			for _, cp := range sp.cqA {
				require.Equal(t, StatusOK, cp.Status, "Send %d", cp.Tag)
			}
			done := sp.runFor(func() bool { return len(sp.recvs()) == 2 }, time.Second)
			require.True(t, done, "receive completions %+v after both Sends completed OK", sp.recvs())
			for _, cp := range sp.recvs() {
				require.Equal(t, StatusOK, cp.Status)
			}
			require.True(t, bytes.Equal(src[:3000], dst[:3000]))
			require.True(t, bytes.Equal(src[4096:4096+700], dst[4096:4096+700]))
			require.Equal(t, uint64(1), sp.b.SendStats().Forged)
			require.Equal(t, uint64(1), sp.b.Transport().Stats().RxDropped, "dropped, not acknowledged")
			sp.run(func() bool { return sp.settled() }, time.Second)
		})
	}
}

// Sends starved of WQEs end StatusRNRRetryExceeded, every one of them:
// the transport NACKs only the first packet it refuses and holds off the
// rest behind it, which starve just the same. Before, only the Send the
// NACK named read RNR-retry-exceeded and the other nine "abandoned".
func TestStarvedSendsEndRNRRetryExceeded(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			sp, _ := newTamperPair(t, nil, 4, nil)
			c := sp.openWith(ConnOptions{Ordered: ordered})
			src := pattern(6, 8192)
			ra, err := sp.a.Register(src, 0)
			require.NoError(t, err)
			for k := range 10 {
				_, err = c.Send(Op{Local: ra, Len: 100 + 300*k, Tag: uint64(k)})
				require.NoError(t, err)
			}
			sp.run(func() bool { return len(sp.cqA) == 10 }, time.Second)
			for _, cp := range sp.cqA {
				require.Equal(t, StatusRNRRetryExceeded, cp.Status, "Send %d", cp.Tag)
			}
			require.Equal(t, uint64(10), sp.a.SendStats().RNRExceeded)
		})
	}
}

// The class the tests above stand for, swept: Sends (and, on ordered
// connections, pushes between them) over a box that loses packets and
// refusals, reorders, and rewrites Send indices with valid PSNs, into
// WQEs posted partly late and partly too short, on every index kind and
// both orders. From an independent ledger: every operation ends; a Send
// the initiator completed OK landed whole, byte exact, in its own WQE;
// a WQE that completed with a length error matches a Send the initiator
// saw refused; no WQE completes twice; on an ordered connection every
// push completed OK reached the target's ULP.
func TestSendIntegrityProperty(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "send-integrity", Frames: 8192, CacheSize: 64})
	require.NoError(t, err)
	defer pool.Close()
	if seed, ok := testenv.Replay(t); ok {
		runIntegritySeed(t, pool, seed)
		return
	}
	n := propertySeeds(t)
	var all integrityTally
	for s := range n {
		x := runIntegritySeed(t, pool, uint64(s))
		all.add(x)
	}
	t.Logf("%d seeds: %d Sends (%d OK, %d refused as too long, %d failed otherwise), %d pushes; %d refusal NACKs lost, %d indices rewritten, %d refusals repeated, %d misdirected packets dropped",
		n, all.sends, all.ok, all.tooLong, all.otherErr, all.pushes, all.nacksLost, all.forged, all.refusedAgain, all.dropped)
}

type integrityTally struct {
	sends, ok, tooLong, otherErr, pushes int
	nacksLost, forged                    int
	refusedAgain, dropped                uint64
}

func (a *integrityTally) add(b integrityTally) {
	a.sends += b.sends
	a.ok += b.ok
	a.tooLong += b.tooLong
	a.otherErr += b.otherErr
	a.pushes += b.pushes
	a.nacksLost += b.nacksLost
	a.forged += b.forged
	a.refusedAgain += b.refusedAgain
	a.dropped += b.dropped
}

func runIntegritySeed(t *testing.T, pool *mbuf.Pool, seed uint64) (tally integrityTally) {
	r := rand.New(rand.NewPCG(seed, 0x1e9))
	cfg, start := sendScenario(r)
	ordered := r.IntN(2) == 0
	lossPct, nackLossPct, forgePct, latePct := r.IntN(4), 30+r.IntN(70), 0, r.IntN(10)
	if cfg.Where == dix.InHeader && cfg.Carry == dix.CarryEvery && r.IntN(2) == 0 {
		forgePct = 5 + r.IntN(20)
	}
	sp, m := newTamperPair(t, pool, seed, func(a, b *Options) {
		for _, o := range []*Options{a, b} {
			o.InitialSeq = start
			o.RecvDepth = 64
			o.HoldBytes = 256 << 10
			o.Transport.RetryLimit = 10
		}
	})
	defer func() {
		sp.close()
		require.Zero(t, pool.InUse(), "seed %d: pool in use after stop", seed)
	}()
	// The index's bits in the SSN field, and each Send's number by RSN.
	idxMask := ^uint32(0)
	switch cfg.Kind {
	case dix.Absolute:
		idxMask = uint32(cfg.Depth - 1)
	case dix.Relative, dix.FreeRunning:
		idxMask = uint32(1)<<cfg.Width - 1
	}
	sendK := map[uint32]uint32{}
	m.late = func() bool { return r.IntN(100) < latePct }
	m.tamper = func(fromA bool, h wire.HeaderView, frame []byte) bool {
		if !fromA && h.Type() == wire.TypeNack && r.IntN(100) < nackLossPct {
			tally.nacksLost++
			return true
		}
		if r.IntN(100) < lossPct {
			return true
		}
		if fromA && forgePct > 0 && h.Type() == wire.TypeSend && h.PayloadLen() > 0 && r.IntN(100) < forgePct {
			// A misdirected index, the PSN kept: one to three Sends off,
			// naming a WQE that another Send has bound or consumed
			// already (a forged index naming a WQE nobody has bound yet
			// cannot be told from the real one: see the package doc).
			k, ok := sendK[h.RSN()]
			delta := uint32(1 + r.IntN(3))
			if r.IntN(2) == 0 {
				delta = -delta
			}
			if rq := sp.b.dx.rq[sp.cb.idx]; ok && rq != nil {
				if bound, _ := rq.q.Bound(k + delta); bound || seqLT(k+delta, rq.q.Head()) {
					ssn := h.SSN()
					forgeSSN(frame, ssn&^idxMask|(ssn+delta)&idxMask)
					tally.forged++
				}
			}
		}
		return false
	}
	c := sp.openWith(ConnOptions{Index: cfg, Ordered: ordered})
	const n, slot = 16, 5 << 10
	src := pattern(seed, n*slot)
	ra, err := sp.a.Register(src, 0)
	require.NoError(t, err)
	dst := make([]byte, n*slot+8192)
	rb, err := sp.b.Register(dst, RemoteWrite)
	require.NoError(t, err)
	sizes, wlen := make([]int, n), make([]int, n)
	for i := range n {
		sizes[i] = 1 + r.IntN(4<<10)
		wlen[i] = slot
		if r.IntN(4) == 0 {
			wlen[i] = r.IntN(sizes[i]) // too short
		}
	}
	posted := 0
	post := func() {
		k, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(posted * slot), Len: wlen[posted], WRID: uint64(posted)})
		require.NoError(t, err)
		require.Equal(t, start+uint32(posted), k)
		posted++
	}
	for range r.IntN(n + 1) {
		post()
	}
	pushAt := map[uint64]int{} // push tag -> its offset in dst
	tag := uint64(n)
	for i := range n {
		rsn, err := c.Send(Op{Local: ra, LocalAddr: uint64(i * slot), Len: sizes[i], Tag: uint64(i)})
		require.NoError(t, err)
		sendK[rsn] = start + uint32(i)
		if ordered && r.IntN(3) == 0 {
			off := n*slot + len(pushAt)*64
			_, err := c.Push(Op{Local: ra, LocalAddr: uint64(i * slot), Len: 64, Remote: wire.RegionRef{Key: rb.Key, Addr: uint64(off)}, Tag: tag})
			require.NoError(t, err)
			pushAt[tag] = off
			tag++
		}
	}
	for posted < n {
		sp.runFor(func() bool { return false }, time.Duration(5+r.IntN(40))*time.Microsecond)
		post()
	}
	total := n + len(pushAt)
	ended := sp.runFor(func() bool { return len(sp.cqA) == total && len(sp.recvs()) == n }, 5*time.Second)
	require.True(t, ended, "seed %d cfg %+v ordered %v: %d of %d operations and %d of %d WQEs ended\nA: %s\nB: %s\nA:\n%s\nB:\n%s",
		seed, cfg, ordered, len(sp.cqA), total, len(sp.recvs()), n, statuses(sp.cqA), statuses(sp.recvs()), sp.a.dump(), sp.b.dump())
	sent := byTag(t, sp.cqA)
	recv := byTag(t, sp.recvs())
	for i := range n {
		s, w := sent[uint64(i)], recv[uint64(i)]
		tally.sends++
		switch s.Status {
		case StatusOK:
			tally.ok++
			require.Equal(t, StatusOK, w.Status, "seed %d cfg %+v ordered %v: Send %d completed OK, its WQE %v", seed, cfg, ordered, i, w.Status)
			require.Equal(t, sizes[i], w.Bytes, "seed %d: WQE %d length", seed, i)
			require.True(t, bytes.Equal(src[i*slot:i*slot+sizes[i]], dst[i*slot:i*slot+sizes[i]]), "seed %d cfg %+v: WQE %d bytes", seed, cfg, i)
		case StatusRemoteInvalid:
			tally.tooLong++
		default:
			tally.otherErr++
		}
		if w.Status == StatusLocalLength {
			// Refused (or, every refusal NACK lost, abandoned): never OK.
			require.NotEqual(t, StatusOK, s.Status, "seed %d cfg %+v ordered %v: WQE %d too short, its Send completed OK", seed, cfg, ordered, i)
		}
	}
	delivered := map[uint32]int{}
	for _, q := range sp.reqB {
		delivered[q.RSN]++
	}
	for tg := range pushAt {
		tally.pushes++
		if cp := sent[tg]; cp.Status == StatusOK {
			require.Equal(t, 1, delivered[cp.RSN], "seed %d cfg %+v: push %d completed OK but reached the target's ULP %d times", seed, cfg, tg, delivered[cp.RSN])
		}
	}
	st := sp.b.SendStats()
	tally.refusedAgain = st.RefusedAgain
	tally.dropped = sp.b.Transport().Stats().RxDropped
	require.True(t, sp.runFor(func() bool { return sp.settled() }, time.Second), "seed %d: contexts left", seed)
	require.Zero(t, st.HeldBytes, "seed %d", seed)
	return tally
}

// statuses lists completions as tag:status, for failure messages.
func statuses(cq []Completion) string {
	var b bytes.Buffer
	for _, c := range cq {
		fmt.Fprintf(&b, "%d:%v ", c.Tag, c.Status)
	}
	return b.String()
}
