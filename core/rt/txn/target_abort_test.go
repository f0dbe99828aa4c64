package txn

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// heardOf tallies, by RSN, the requests B's ULP was handed (OnRequest)
// and told were aborted (OnAborted).
type heardOf struct{ delivered, aborted map[uint32]int }

func listenB(h *heardOf) func(a, b *Options) {
	h.delivered, h.aborted = map[uint32]int{}, map[uint32]int{}
	return func(_, b *Options) {
		b.OnRequest = func(r *Request) { h.delivered[r.RSN]++ }
		b.OnAborted = func(r *Request) { h.aborted[r.RSN]++ }
	}
}

// On an ordered connection a push whose every packet was acknowledged
// waits at the target behind an earlier request the initiator gave up
// on, until that one's abort notice arrives. When the connection fails
// first (here every frame is lost from then on), the initiator must not
// have completed the push OK, and the target's ULP is told of the push
// it held. Before, the push completed OK at the initiator and the target
// dropped it with the connection without a word to its ULP.
func TestHeldRequestOutlivedByItsInitiatorsOK(t *testing.T) {
	var h heardOf
	p, m := newFaultPair(t, 5, listenB(&h))
	f := newFaultMem(t, p, 64<<10)
	cut := false
	m.drop = func(fromA bool, hv wire.HeaderView) bool {
		if cut {
			return true
		}
		// Push 1's data never arrives, and neither does its abort notice.
		return fromA && hv.Type() == wire.TypePushUnsolicitedData && hv.RSN() == 0
	}
	c := p.connect(ConnOptions{Ordered: true})
	for tag := uint64(1); tag <= 3; tag++ {
		_, err := c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 4096 * tag}, Tag: tag})
		require.NoError(t, err)
	}
	// Push 1 is abandoned (its resync gets through) and completes; its
	// notice is owed. Then the link dies.
	p.run(func() bool { return len(p.cqA) >= 1 }, time.Second)
	require.Equal(t, StatusAbandoned, p.cqA[0].Status)
	cut = true
	p.run(func() bool { return p.a.Outstanding() == 0 && p.b.Outstanding() == 0 && len(p.cqA) == 3 }, 10*time.Second)
	for _, cp := range p.cqA[1:] {
		if cp.Status == StatusOK {
			require.Equal(t, 1, h.delivered[cp.RSN], "push %d completed OK at the initiator; the target's ULP was handed it %d times (told of its abort %d times)",
				cp.Tag, h.delivered[cp.RSN], h.aborted[cp.RSN])
		}
		require.Equal(t, 1, h.delivered[cp.RSN]+h.aborted[cp.RSN], "push %d (%v): the target's ULP heard of it %d+%d times", cp.Tag, cp.Status, h.delivered[cp.RSN], h.aborted[cp.RSN])
	}
	require.Equal(t, uint64(2), p.b.Stats().HeldAtEnd)
}

// The class swept: ordered and unordered connections, pushes (solicited
// and not) and pulls, a first operation whose packets are all lost (so
// it is abandoned or times out and owes a notice), random loss, then the
// link dies at a random moment. From a ledger: every operation ends;
// every push or pull completed OK at the initiator was handed to the
// target's ULP exactly once; every request the target's ULP heard of, it
// heard of once (handed or aborted, never both).
func TestEveryOKReachesTheTargetULP(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "held-at-end", Frames: 8192, CacheSize: 64})
	require.NoError(t, err)
	defer pool.Close()
	if seed, ok := testenv.Replay(t); ok {
		runHeldSeed(t, pool, seed)
		return
	}
	n := propertySeeds(t)
	var ok, failed, delivered, aborted int
	for seed := range uint64(n) {
		o, f, d, a := runHeldSeed(t, pool, seed)
		ok, failed, delivered, aborted = ok+o, failed+f, delivered+d, aborted+a
	}
	t.Logf("%d seeds: %d operations completed OK, %d not; the target's ULP was handed %d requests and told of %d held when their connection ended",
		n, ok, failed, delivered, aborted)
}

func runHeldSeed(t *testing.T, pool *mbuf.Pool, seed uint64) (ok, failed, delivered, aborted int) {
	r := rand.New(rand.NewPCG(seed, 0xab0))
	var h heardOf
	listen := listenB(&h)
	sp, m := newTamperPair(t, pool, seed, func(a, b *Options) {
		listen(a, b)
		a.SolicitThreshold = 2048
		a.Transport.RetryLimit, b.Transport.RetryLimit = 2, 2
	})
	p := sp.pair
	defer func() {
		p.close()
		require.Zero(t, pool.InUse(), "seed %d: pool in use after stop", seed)
	}()
	f := newFaultMem(t, p, 256<<10)
	ordered := r.IntN(4) != 0
	lossPct := r.IntN(5)
	noticeLost := r.IntN(2) == 0
	cut := false
	m.tamper = func(fromA bool, hv wire.HeaderView, _ []byte) bool {
		if cut {
			return true
		}
		if fromA && hv.RSN() == 0 && hv.Type() >= wire.TypePullRequest && hv.Type() <= wire.TypePushUnsolicitedData {
			// The first operation never reaches the target; its abort
			// notice does on some seeds, before the link dies.
			return hv.Offset() != abortOffset || noticeLost
		}
		return r.IntN(100) < lossPct
	}
	c := p.connect(ConnOptions{Ordered: ordered})
	const ops = 8
	kinds := map[uint64]OpKind{}
	for tag := uint64(0); tag < ops; tag++ {
		op := Op{Local: f.rSrc, LocalAddr: 8192 * tag, Len: 1 + r.IntN(6000), Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 8192 * tag}, Tag: tag}
		if tag == 0 && r.IntN(2) == 0 {
			op.Timeout = time.Duration(50+r.IntN(500)) * time.Microsecond
		}
		var err error
		if r.IntN(3) == 0 {
			op.Local = f.rDst
			_, err = c.Pull(op)
			kinds[tag] = OpPull
		} else {
			_, err = c.Push(op)
			kinds[tag] = OpPush
		}
		require.NoError(t, err)
	}
	p.runFor(func() bool { return false }, time.Duration(r.IntN(3000))*time.Microsecond)
	cut = true
	done := p.runFor(func() bool { return len(p.cqA) == ops && p.a.Outstanding() == 0 && p.b.Outstanding() == 0 }, 10*time.Second)
	if _, ok := testenv.Replay(t); ok {
		t.Logf("seed %d: virtual %v; A %s; delivered %v aborted %v", seed, p.clk.Now(), statuses(p.cqA), h.delivered, h.aborted)
	}
	require.True(t, done, "seed %d: %d of %d operations ended\nA:\n%s\nB:\n%s", seed, len(p.cqA), ops, p.a.dump(), p.b.dump())
	for _, cp := range p.cqA {
		d, a := h.delivered[cp.RSN], h.aborted[cp.RSN]
		delivered, aborted = delivered+d, aborted+a
		if cp.Status == StatusOK {
			ok++
		} else {
			failed++
		}
		require.LessOrEqual(t, d+a, 1, "seed %d ordered %v: %v %d heard of %d+%d times", seed, ordered, kinds[cp.Tag], cp.Tag, d, a)
		if cp.Status == StatusOK {
			require.Equal(t, 1, d, "seed %d ordered %v: %v %d completed OK at the initiator, handed to the target's ULP %d times (aborted %d)",
				seed, ordered, kinds[cp.Tag], cp.Tag, d, a)
		}
	}
	return ok, failed, delivered, aborted
}

// A completion held behind an unacknowledged abort notice still ends by
// its own deadline: here push 0 times out and neither its data nor its
// notice ever arrives, so the target never releases what follows it.
// Pushes 1 and 2 are acknowledged, yet held; push 3's data is lost too,
// so it times out in its turn while push 0's notice is still owed. Each
// ends StatusTimeout (never OK: the target's ULP may never get it) within
// its timeout and one tick, long before the notice's retries run out.
// Before, pushes 1 to 3 waited for the connection to fail, far past
// their deadlines.
func TestHeldCompletionEndsByItsTimeout(t *testing.T) {
	var h heardOf
	p, m := newFaultPair(t, 7, func(a, b *Options) {
		listenB(&h)(a, b)
		a.Transport.RetryLimit = 7
	})
	f := newFaultMem(t, p, 64<<10)
	cut := false
	m.drop = func(fromA bool, hv wire.HeaderView) bool {
		lost := hv.RSN() == 0 || hv.RSN() == 3
		return cut || fromA && lost && hv.Type() >= wire.TypePullRequest && hv.Type() <= wire.TypePushUnsolicitedData
	}
	c := p.connect(ConnOptions{Ordered: true})
	timeouts := []time.Duration{200 * time.Microsecond, 3 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond}
	for tag, to := range timeouts {
		_, err := c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 4096 * uint64(tag)}, Tag: uint64(tag), Timeout: to})
		require.NoError(t, err)
	}
	p.runFor(func() bool { return len(p.cqA) == len(timeouts) }, 50*time.Millisecond)
	require.Len(t, p.cqA, len(timeouts), "A:\n%s", p.a.dump())
	require.NotZero(t, p.a.Stats().CompletionsHeld, "the pushes behind push 0 were not held: the test lost its point")
	tick := p.a.wheel.Tick()
	for _, cp := range p.cqA {
		require.Equal(t, StatusTimeout, cp.Status, "push %d", cp.Tag)
		require.LessOrEqual(t, cp.Latency(), timeouts[cp.Tag]+tick, "push %d ended %v after it was posted, timeout %v", cp.Tag, cp.Latency(), timeouts[cp.Tag])
	}
	// Push 0's notice is resent while the link lives; cut it, so that
	// the connection ends: the target's ULP heard once of each push it
	// got.
	cut = true
	p.run(func() bool { return p.a.Outstanding() == 0 && p.b.Outstanding() == 0 }, 10*time.Second)
	for _, cp := range p.cqA {
		n := h.delivered[cp.RSN] + h.aborted[cp.RSN]
		if cp.Tag == 1 || cp.Tag == 2 {
			require.Equal(t, 1, n, "push %d: handed %d, aborted %d", cp.Tag, h.delivered[cp.RSN], h.aborted[cp.RSN])
		}
		require.LessOrEqual(t, n, 1, "push %d", cp.Tag)
	}
}

// An abort notice the target never acknowledges, on a link that works
// (everything else gets through: the resyncs, the ACKs), is sent again
// only within a retry budget, as any reliable packet is: abandoned more
// than RetryLimit times over at least (RetryLimit+1)×MaxRTO, the longest
// one packet's retries take, the connection gives up (ConnFailed,
// rt.ErrRetryExhausted) and every operation on it ends. Before, the
// notice was sent again forever (85,714 times in the 60 s this test
// allows) and the connection, its context and the operations held behind
// it lived on.
func TestAbortNoticeHasARetryBudget(t *testing.T) {
	var failed []error
	var p *pair
	var failedAt time.Duration
	p, m := newFaultPair(t, 6, func(a, _ *Options) {
		a.OnConnEvent = func(ev ConnEvent) {
			if ev.Kind == ConnFailed {
				failed = append(failed, ev.Err)
				failedAt = time.Duration(p.clk.Now())
			}
		}
	})
	start := time.Duration(p.clk.Now())
	f := newFaultMem(t, p, 64<<10)
	m.drop = func(fromA bool, hv wire.HeaderView) bool {
		// Push 1's data never arrives, and neither does any abort notice.
		return fromA && (hv.Type() == wire.TypePushUnsolicitedData && hv.RSN() == 0 || hv.Offset() == abortOffset)
	}
	c := p.connect(ConnOptions{Ordered: true})
	for tag := uint64(1); tag <= 3; tag++ {
		_, err := c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 4096 * tag}, Tag: tag})
		require.NoError(t, err)
	}
	ended := p.runFor(func() bool { return len(p.cqA) == 3 && p.a.Outstanding() == 0 }, 60*time.Second)
	ro := p.a.Transport().Options()
	budget := time.Duration(ro.RetryLimit+1) * ro.MaxRTO
	st := p.a.Stats()
	t.Logf("notices sent %d, acknowledged %d; connection failed %v after the start (budget %v); completions %s",
		st.NoticesSent, st.NoticesAcked, failedAt-start, budget, statuses(p.cqA))
	require.True(t, ended, "operations still held after 60 s: %s; %d notices sent", statuses(p.cqA), st.NoticesSent)
	require.Equal(t, []error{rt.ErrRetryExhausted}, failed)
	require.Greater(t, st.NoticesSent, uint64(ro.RetryLimit+1), "sent again within its budget")
	require.GreaterOrEqual(t, failedAt-start, budget, "not before a packet's retries could have run out")
	require.Less(t, failedAt-start, 2*budget, "and soon after")
	require.Equal(t, StatusAbandoned, p.cqA[0].Status)
	for _, cp := range p.cqA[1:] {
		require.Equal(t, StatusConnFailed, cp.Status, "op %d: held behind the notice, never OK", cp.Tag)
	}
	// B, holding the pushes behind the one it never heard of, finds A's
	// half gone by its own probes.
	require.True(t, p.runFor(func() bool { return p.b.Outstanding() == 0 }, 10*time.Second), "B still holds %d requests", p.b.Outstanding())
	require.Equal(t, uint64(1), p.a.Stats().NoticeGiveUps)
}
