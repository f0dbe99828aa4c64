package txn

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// oneLoop is an initiator and a target over an in-memory port pair, both
// polled by the caller's goroutine as one poll loop would poll them: the
// clock read once an iteration, every stage polled with that reading.
type oneLoop struct {
	clk    *clock.Real
	pool   *mbuf.Pool
	a, b   *Endpoint
	conns  []*Conn
	local  Region
	remote Region
	cq     []Completion
	next   int // the connection the next push goes to
}

// newOneLoop connects conns connections from a to b, each with
// inflight/conns operations' worth of congestion window, as the smallops
// scenario's in-memory rows configure theirs.
func newOneLoop(tb testing.TB, conns, inflight int) *oneLoop {
	return newOneLoopTapped(tb, conns, inflight, nil)
}

// newOneLoopTapped is newOneLoop with every frame an endpoint receives
// shown to tap first (nil: none), with the receiving endpoint's address.
func newOneLoopTapped(tb testing.TB, conns, inflight int, tap func(frame []byte, dst netip.Addr)) *oneLoop {
	tb.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: tb.Name(), Frames: 16384, CacheSize: 256})
	require.NoError(tb, err)
	pa, pb, err := mem.NewPair(pool, mem.PairOptions{Name: "oneloop", Size: 4096})
	require.NoError(tb, err)
	l := &oneLoop{clk: clock.NewReal(), pool: pool, cq: make([]Completion, 256)}
	var portA, portB port.Port = pa, pb
	if tap != nil {
		portA = &tapPort{Port: pa, pool: pool, dst: ipA, tap: tap}
		portB = &tapPort{Port: pb, pool: pool, dst: ipB, tap: tap}
	}
	sp := swift.DefaultParams()
	sp.BaseTarget = 200 * time.Microsecond
	sp.MinCwnd = float64(inflight / conns)
	sp.InitialCwnd = sp.MinCwnd
	ropts := func(name string, p port.Port, ip netip.Addr, seed uint64, maxConns int) rt.Options {
		return rt.Options{Name: name, Port: p, Pool: pool, Clock: l.clk, LocalIP: ip, LocalMAC: [6]byte(p.Info().MAC),
			MaxConns: maxConns, MinRTO: time.Millisecond, RetryLimit: 20, Seed: seed}
	}
	oa := Options{Transport: ropts("a", portA, ipA, 1, max(2*conns, 4)), Congestion: &sp, MaxOps: max(2*inflight, 512)}
	ob := Options{Transport: ropts("b", portB, ipB, 2, 64), Congestion: &sp, OnRequest: func(*Request) {}}
	l.a, err = New(oa)
	require.NoError(tb, err)
	l.b, err = New(ob)
	require.NoError(tb, err)
	l.local, err = l.a.Register(make([]byte, 64<<10), 0)
	require.NoError(tb, err)
	l.remote, err = l.b.Register(make([]byte, 64<<10), RemoteWrite)
	require.NoError(tb, err)
	peer := rt.PeerAddr{MAC: [6]byte(pb.Info().MAC), IP: ipB}
	for range conns {
		c, err := l.a.Open(peer, ConnOptions{})
		require.NoError(tb, err)
		l.conns = append(l.conns, c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range l.conns {
		for c.Transport() == nil || c.Transport().State() != rt.StateEstablished {
			require.True(tb, time.Now().Before(deadline), "connections not established")
			l.iterate()
		}
	}
	tb.Cleanup(func() {
		now := l.clk.Now()
		l.a.Stop(now)
		l.b.Stop(now)
		_ = l.a.Close()
		_ = l.b.Close()
		drain := make([]mbuf.Handle, 64)
		for _, p := range []*mem.Port{pa, pb} {
			for n := p.RxBurst(0, drain); n > 0; n = p.RxBurst(0, drain) {
				pool.Free(drain[:n])
			}
		}
		_ = pa.Close()
		_ = pb.Close()
		require.Zero(tb, pool.InUse(), "pool in-use after stop")
		_ = pool.Close()
	})
	return l
}

// tapPort shows every frame its port receives to tap before the endpoint
// sees it.
type tapPort struct {
	*mem.Port
	pool *mbuf.Pool
	dst  netip.Addr
	tap  func(frame []byte, dst netip.Addr)
}

func (p *tapPort) RxBurst(queue int, bufs []mbuf.Handle) int {
	n := p.Port.RxBurst(queue, bufs)
	for _, h := range bufs[:n] {
		p.tap(p.pool.Data(h), p.dst)
	}
	return n
}

// iterate is one iteration of the loop: one clock reading, the initiator
// then the target polled; it returns the initiator's completions, each
// checked OK.
func (l *oneLoop) iterate() int {
	now := l.clk.Now()
	l.a.Poll(now)
	l.b.Poll(now)
	n := l.a.Completions(l.cq)
	for i := range n {
		if l.cq[i].Status != StatusOK {
			panic(l.cq[i].Status)
		}
	}
	return n
}

// push posts one size-byte push, round robin over the connections; false
// when the endpoint is busy.
func (l *oneLoop) push(size int) bool {
	c := l.conns[l.next]
	l.next = (l.next + 1) % len(l.conns)
	_, err := c.Push(Op{Local: l.local, Len: size, Remote: wire.RegionRef{Key: l.remote.Key}})
	return err == nil
}

// run completes n pushes of size bytes with up to inflight outstanding.
func (l *oneLoop) run(n, size, inflight int) {
	posted, done := 0, 0
	for done < n {
		for posted < n && posted-done < inflight && l.push(size) {
			posted++
		}
		done += l.iterate()
	}
}

// BenchmarkPush64OneLoop is the CPU a 64 B push costs both endpoints
// together: the initiator and the target of an in-memory pair polled by
// one goroutine, 256 pushes in flight over two connections (the smallops
// scenario's mem_push64 row without its second core). Its ns/op holds no
// cross-core exchange, so it is the figure to profile (-cpuprofile) and
// compare on a shared machine.
func BenchmarkPush64OneLoop(b *testing.B) {
	const conns, inflight = 2, 2 * rt.DefaultWindowSize
	l := newOneLoop(b, conns, inflight)
	l.run(20_000, 64, inflight) // warm: caches, CAMs, congestion windows
	// The thread's CPU time is what the push cost, however much of the
	// wall-clock time a shared machine gave to others.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	b.ReportAllocs()
	b.ResetTimer()
	l.run(b.N, 64, inflight)
	b.StopTimer()
	b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	st, sb := l.a.Transport().Stats(), l.b.Transport().Stats()
	b.ReportMetric(float64(st.TxRetransmit+st.TxEarlyRetransmit), "retx")
	// How many ACK frames a push costs: the target's standalone ACKs over
	// the initiator's data packets (both counted from the start).
	b.ReportMetric(float64(sb.TxAck+sb.TxExtendedAck)/float64(st.TxData), "acks/push")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// threadCPU reads the calling thread's CPU time in nanoseconds.
func threadCPU(tb testing.TB) int64 {
	var ts unix.Timespec
	require.NoError(tb, unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts))
	return ts.Nano()
}

// TestOneLoopPushesAllocateNothing: the one-loop harness's pushes, posted
// and completed in steady state, allocate nothing at either end.
func TestOneLoopPushesAllocateNothing(t *testing.T) {
	l := newOneLoop(t, 2, 2*rt.DefaultWindowSize)
	l.run(5000, 64, 256)
	require.Zero(t, testing.AllocsPerRun(20, func() { l.run(1000, 64, 256) }))
}

// TestOneLoopPushesTakeFastDecode: in steady state every frame of 64 B
// pushes, at either end (the data packets and the ACKs), is one
// wire.DecodeFastIPv4 takes; the general decoder is for the rest.
func TestOneLoopPushesTakeFastDecode(t *testing.T) {
	var slow, all map[wire.Type]int
	var hd wire.Header
	tap := func(b []byte, dst netip.Addr) {
		if all == nil {
			return // connection setup
		}
		f, err := wire.DecodeFrame(b)
		require.NoError(t, err)
		all[f.Header.Type]++
		if _, ok := wire.DecodeFastIPv4(b, dst.As4(), wire.DefaultPort, &hd); !ok {
			slow[f.Header.Type]++
		}
	}
	l := newOneLoopTapped(t, 2, 2*rt.DefaultWindowSize, tap)
	l.run(2000, 64, 256)
	slow, all = map[wire.Type]int{}, map[wire.Type]int{}
	l.run(5000, 64, 256)
	require.NotEmpty(t, all)
	require.Empty(t, slow, "frames that took the general decoder, by type, of %v", all)
}
