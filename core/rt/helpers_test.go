package rt

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

// tapPort wraps a port and lets a test drop or duplicate frames on
// transmit.
type tapPort struct {
	port.Port
	pool *mbuf.Pool
	// tap sees every transmitted frame; it returns how many copies to send
	// (0 drops it).
	tap  func(f *wire.Frame) int
	buf  []mbuf.Handle
	seen int
}

func (p *tapPort) TxBurst(q int, hs []mbuf.Handle) int {
	if p.tap == nil {
		return p.Port.TxBurst(q, hs)
	}
	p.buf = p.buf[:0]
	for _, h := range hs {
		p.seen++
		var f wire.Frame
		copies := 1
		if err := f.Decode(p.pool.Data(h)); err == nil {
			copies = p.tap(&f)
		}
		switch copies {
		case 0:
			p.pool.Free([]mbuf.Handle{h})
		case 1:
			p.buf = append(p.buf, h)
		default:
			p.buf = append(p.buf, h)
			for range copies - 1 {
				d := make([]mbuf.Handle, 1)
				if p.pool.AllocBulk(d) == 1 {
					src := p.pool.Data(h)
					copy(p.pool.Append(d[0], len(src)), src)
					p.buf = append(p.buf, d[0])
				}
			}
		}
	}
	if n := p.Port.TxBurst(q, p.buf); n < len(p.buf) {
		p.pool.Free(p.buf[n:])
	}
	return len(hs)
}

type delivery struct {
	cid    uint32
	win    wire.Window
	psn    uint32
	seq    uint64
	typ    wire.Type
	length int
}

type harness struct {
	t      testing.TB
	clk    *clock.Virtual
	pool   *mbuf.Pool
	a, b   *Endpoint
	pa, pb *tapPort
	evA    []Event
	evB    []Event
	gotA   []delivery
	gotB   []delivery
	polls  int
	// check runs CheckInvariants after every Poll.
	check bool
}

func newPool(t testing.TB, frames int) *mbuf.Pool {
	t.Helper()
	p, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: frames, CacheSize: 64})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func newHarness(t testing.TB, tweak func(a, b *Options)) *harness {
	t.Helper()
	pool := newPool(t, 8192)
	ea, eb, err := mem.NewPair(pool, mem.PairOptions{Name: t.Name(), Size: 1024})
	require.NoError(t, err)
	h := &harness{t: t, clk: clock.NewVirtual(1_000_000), pool: pool, check: true}
	h.pa = &tapPort{Port: ea, pool: pool}
	h.pb = &tapPort{Port: eb, pool: pool}
	oa := Options{Name: "a", Port: h.pa, Pool: pool, Clock: h.clk, LocalIP: ipA, Seed: 1, MaxConns: 8}
	ob := Options{Name: "b", Port: h.pb, Pool: pool, Clock: h.clk, LocalIP: ipB, Seed: 2, MaxConns: 8}
	if tweak != nil {
		tweak(&oa, &ob)
	}
	h.a, err = NewEndpoint(oa)
	require.NoError(t, err)
	h.b, err = NewEndpoint(ob)
	require.NoError(t, err)
	setEvents(h.a, func(ev Event) { h.evA = append(h.evA, ev) })
	setEvents(h.b, func(ev Event) { h.evB = append(h.evB, ev) })
	setDeliver(h.a, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		h.gotA = append(h.gotA, record(c, hd, p))
		return Accept
	})
	setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		h.gotB = append(h.gotB, record(c, hd, p))
		return Accept
	})
	t.Cleanup(func() {
		h.a.Close()
		h.b.Close()
		_ = ea.Close()
		_ = eb.Close()
	})
	return h
}

func record(c *Conn, hd *wire.Header, p []byte) delivery {
	d := delivery{cid: c.LocalCID(), win: hd.Window(), psn: hd.PSN, typ: hd.Type, length: len(p)}
	if len(p) >= 8 {
		d.seq = binary.BigEndian.Uint64(p)
	}
	return d
}

func payload(seq uint64, n int) []byte {
	p := make([]byte, max(n, 8))
	binary.BigEndian.PutUint64(p, seq)
	for i := 8; i < len(p); i++ {
		p[i] = byte(seq) + byte(i)
	}
	return p
}

// poll polls both endpoints once at the current time.
func (h *harness) poll() int {
	now := h.clk.Now()
	w := h.a.Poll(now) + h.b.Poll(now)
	h.polls++
	if h.check {
		require.NoError(h.t, h.a.CheckInvariants(), "a")
		require.NoError(h.t, h.b.CheckInvariants(), "b")
	}
	return w
}

// run polls until cond holds, jumping virtual time to the next deadline
// when both endpoints are idle. It fails the test if cond does not hold
// within limit of virtual time.
func (h *harness) run(cond func() bool, limit time.Duration) {
	h.t.Helper()
	require.True(h.t, h.runFor(cond, limit), "condition not reached within %v (now %v)", limit, h.clk.Now())
}

func (h *harness) runFor(cond func() bool, limit time.Duration) bool {
	end := h.clk.Now().Add(limit)
	for !cond() {
		if h.poll() > 0 {
			continue
		}
		next, ok := h.next()
		if !ok {
			return cond()
		}
		if next <= h.clk.Now() {
			next = h.clk.Now().Add(time.Microsecond)
		}
		if next > end {
			require.NoError(h.t, h.clk.Set(end))
			h.poll()
			return cond()
		}
		require.NoError(h.t, h.clk.Set(next))
	}
	return true
}

// idle runs for d of virtual time.
func (h *harness) idle(d time.Duration) { h.runFor(func() bool { return false }, d) }

func (h *harness) next() (clock.Time, bool) {
	ta, oka := h.a.NextDeadline()
	tb, okb := h.b.NextDeadline()
	switch {
	case oka && okb:
		return min(ta, tb), true
	case oka:
		return ta, true
	case okb:
		return tb, true
	}
	return 0, false
}

// connect opens a connection from a to b and runs until both ends are
// established; it returns a's and b's handles.
func (h *harness) connect() (*Conn, *Conn) {
	h.t.Helper()
	ca, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(h.t, err)
	var cb *Conn
	h.run(func() bool {
		for _, ev := range h.evB {
			if ev.Kind == EventEstablished {
				cb = ev.Conn
			}
		}
		return ca.State() == StateEstablished && cb != nil
	}, 100*time.Millisecond)
	return ca, cb
}

func macOf(p port.Port) [6]byte { return [6]byte(p.Info().MAC) }

// sendAll sends n packets of type typ on c, polling when busy, and returns
// the PSNs.
func (h *harness) sendAll(c *Conn, typ wire.Type, first uint64, n, size int) []uint32 {
	h.t.Helper()
	var psns []uint32
	for i := range n {
		for {
			psn, err := c.Send(SendHeader{Type: typ, RSN: uint32(i)}, payload(first+uint64(i), size))
			if err == nil {
				psns = append(psns, psn)
				break
			}
			require.ErrorIs(h.t, err, ErrBusy)
			if h.poll() == 0 {
				next, ok := h.next()
				require.True(h.t, ok, "busy but nothing pending")
				if next <= h.clk.Now() {
					next = h.clk.Now().Add(time.Microsecond)
				}
				require.NoError(h.t, h.clk.Set(next))
			}
		}
	}
	return psns
}

func (h *harness) quiet() bool {
	return h.a.Outstanding() == 0 && h.b.Outstanding() == 0
}

func eventsOf(evs []Event, k EventKind) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

var (
	netipZero netip.Addr
	netipV6   = netip.MustParseAddr("fe80::1")
)

type mbufHandle = mbuf.Handle

// sealForA seals hd (of a payload of n bytes) with the key a checks its
// peer's packets with, as a forger who holds that key would: the frame
// then reaches the checks behind the seal. A header for no live
// connection of a's, or of an unsealed one, is left as it is.
func (h *harness) sealForA(hd *wire.Header, n int) {
	for i := range h.a.conns {
		c := &h.a.conns[i]
		if c.state != StateFree && c.localCID == hd.DestCID && c.sealRx.On() && hd.Type.Sealed() {
			hd.Seal(c.sealRx, n)
			return
		}
	}
}

// funcULP is a ULP made of functions a test sets and swaps one at a time
// (setDeliver, setAcked, setEvents); a nil one accepts, or ignores.
type funcULP struct {
	deliver func(*Conn, *wire.Header, []byte) Verdict
	acked   func(*Conn, wire.Window, uint32, uint64)
	event   func(Event)
}

func (u *funcULP) Deliver(c *Conn, h *wire.Header, p []byte) Verdict {
	if u.deliver == nil {
		return Accept
	}
	return u.deliver(c, h, p)
}

func (u *funcULP) Acked(c *Conn, w wire.Window, psn uint32, cookie uint64) {
	if u.acked != nil {
		u.acked(c, w, psn, cookie)
	}
}

func (u *funcULP) Event(ev Event) {
	if u.event != nil {
		u.event(ev)
	}
}

// ulpOf returns e's funcULP, giving it one first.
func ulpOf(e *Endpoint) *funcULP {
	if u, ok := e.ulp.(*funcULP); ok {
		return u
	}
	u := &funcULP{}
	e.SetULP(u)
	return u
}

func setDeliver(e *Endpoint, fn func(*Conn, *wire.Header, []byte) Verdict) {
	ulpOf(e).deliver = fn
}

func setAcked(e *Endpoint, fn func(*Conn, wire.Window, uint32, uint64)) { ulpOf(e).acked = fn }

func setEvents(e *Endpoint, fn func(Event)) { ulpOf(e).event = fn }
