package txn

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/fabric"
)

var (
	ipA = netip.MustParseAddr("198.18.0.1")
	ipB = netip.MustParseAddr("198.18.0.2")
)

// link is what joins a pair's ports: a *fabric.Fabric, or a test's own
// middlebox.
type link interface {
	Poll(now clock.Time) int
	NextDeadline() (clock.Time, bool)
	Stop(now clock.Time)
	Close() error
}

// pair is two endpoints joined by an in-process fabric on a virtual clock.
type pair struct {
	t      testing.TB
	clk    *clock.Virtual
	pool   *mbuf.Pool
	fab    link
	deadB  bool // B is dead: never polled (its frames stay where they are)
	pa, pb port.Port
	a, b   *Endpoint
	reqB   []Request // requests B's ULP saw (Data copied)
	reqA   []Request
	cqA    []Completion
	cqB    []Completion
	buf    []Completion
}

func newPair(t testing.TB, seed uint64, profile string, tweak func(a, b *Options)) *pair {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: 16384, CacheSize: 128})
	require.NoError(t, err)
	p := newPairOn(t, pool, seed, profile, tweak)
	t.Cleanup(func() {
		p.close()
		require.Zero(t, pool.InUse(), "pool in-use after stop")
		_ = pool.Close()
	})
	return p
}

// newPairOn builds a pair on a pool the caller owns and closes; the caller
// also calls close.
func newPairOn(t testing.TB, pool *mbuf.Pool, seed uint64, profile string, tweak func(a, b *Options)) *pair {
	t.Helper()
	prof, err := fabric.ParseProfile(profile)
	require.NoError(t, err)
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: "txn", AtoB: prof, BtoA: prof, Seed: seed ^ 0xfab, LinkRing: 4096})
	require.NoError(t, err)
	return buildPair(t, pool, pa, pb, fab, seed, tweak)
}

// buildPair makes the two endpoints of a pair on ports joined by fab.
func buildPair(t testing.TB, pool *mbuf.Pool, pa, pb port.Port, fab link, seed uint64, tweak func(a, b *Options)) *pair {
	t.Helper()
	var err error
	p := &pair{t: t, clk: clock.NewVirtual(1_000_000), pool: pool, fab: fab, pa: pa, pb: pb, buf: make([]Completion, 256)}
	oa := Options{Transport: rt.Options{Name: "a", Port: pa, Pool: pool, Clock: p.clk, LocalIP: ipA, Seed: seed, MaxConns: 8}}
	ob := Options{Transport: rt.Options{Name: "b", Port: pb, Pool: pool, Clock: p.clk, LocalIP: ipB, Seed: seed + 1, MaxConns: 8}}
	oa.OnRequest = func(r *Request) { p.reqA = append(p.reqA, copyReq(r)) }
	ob.OnRequest = func(r *Request) { p.reqB = append(p.reqB, copyReq(r)) }
	if tweak != nil {
		tweak(&oa, &ob)
	}
	p.a, err = New(oa)
	require.NoError(t, err)
	p.b, err = New(ob)
	require.NoError(t, err)
	return p
}

// close stops everything and returns every frame to the pool.
func (p *pair) close() {
	now := p.clk.Now()
	p.a.Stop(now)
	p.b.Stop(now)
	_ = p.a.Close()
	_ = p.b.Close()
	p.fab.Stop(now)
	drain := make([]mbuf.Handle, 64)
	for _, pt := range []port.Port{p.pa, p.pb} {
		for n := pt.RxBurst(0, drain); n > 0; n = pt.RxBurst(0, drain) {
			p.pool.Free(drain[:n])
		}
	}
	_ = p.fab.Close()
}

func copyReq(r *Request) Request {
	c := *r
	c.Data = append([]byte(nil), r.Data...)
	return c
}

func (p *pair) peerB() rt.PeerAddr { return rt.PeerAddr{MAC: [6]byte(p.pb.Info().MAC), IP: ipB} }
func (p *pair) peerA() rt.PeerAddr { return rt.PeerAddr{MAC: [6]byte(p.pa.Info().MAC), IP: ipA} }

func (p *pair) poll() int {
	now := p.clk.Now()
	w := p.a.Poll(now) + p.fab.Poll(now)
	if !p.deadB {
		w += p.b.Poll(now)
	}
	for {
		n := p.a.Completions(p.buf)
		p.cqA = append(p.cqA, p.buf[:n]...)
		if n < len(p.buf) {
			break
		}
	}
	for {
		n := p.b.Completions(p.buf)
		p.cqB = append(p.cqB, p.buf[:n]...)
		if n < len(p.buf) {
			break
		}
	}
	return w
}

func (p *pair) next() (clock.Time, bool) {
	t, ok := clock.Time(0), false
	fs := []func() (clock.Time, bool){p.a.NextDeadline, p.fab.NextDeadline}
	if !p.deadB {
		fs = append(fs, p.b.NextDeadline)
	}
	for _, f := range fs {
		if u, uok := f(); uok && (!ok || u < t) {
			t, ok = u, true
		}
	}
	return t, ok
}

// run polls until cond holds, jumping the virtual clock when idle; it
// fails the test when limit of virtual time passes first.
func (p *pair) run(cond func() bool, limit time.Duration) {
	p.t.Helper()
	require.True(p.t, p.runFor(cond, limit), "condition not reached within %v", limit)
}

func (p *pair) runFor(cond func() bool, limit time.Duration) bool {
	end := p.clk.Now().Add(limit)
	for !cond() {
		if p.poll() > 0 {
			continue
		}
		next, ok := p.next()
		if !ok {
			return cond()
		}
		if next <= p.clk.Now() {
			next = p.clk.Now().Add(time.Microsecond)
		}
		if next > end {
			require.NoError(p.t, p.clk.Set(end))
			p.poll()
			return cond()
		}
		require.NoError(p.t, p.clk.Set(next))
	}
	return true
}

// connect opens a connection from A to B and runs until established.
func (p *pair) connect(opts ConnOptions) *Conn {
	p.t.Helper()
	c, err := p.a.Open(p.peerB(), opts)
	require.NoError(p.t, err)
	p.run(func() bool { return c.Transport() != nil && c.Transport().State() == rt.StateEstablished }, 100*time.Millisecond)
	return c
}

func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}
