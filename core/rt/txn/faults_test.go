package txn

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// middlebox joins a pair's ports with no delay and drops the frames its
// drop function picks: the way to lose exactly one packet type, one
// segment or every frame of one direction, deterministically.
type middlebox struct {
	pool   *mbuf.Pool
	a, b   port.Port // the box's ends: a faces endpoint A, b faces B
	ports  []port.Port
	buf    []mbuf.Handle
	drop   func(fromA bool, h wire.HeaderView) bool
	killed int
	// keep, if it says so, holds a frame back in *held instead (the
	// test replays or frees it; Close frees what is left).
	keep func(fromA bool, h wire.HeaderView) bool
	held *[]mbuf.Handle
	// tamper sees the whole frame: it may drop it (true) or rewrite its
	// transport header in place (forgeWord). late, when it says so,
	// holds a frame back behind the next one of its direction.
	tamper func(fromA bool, h wire.HeaderView, frame []byte) bool
	late   func() bool
	lateH  [2]mbuf.Handle
	isLate [2]bool
}

// hdrOff is where the transport header starts in an IPv4 frame.
const hdrOff = wire.EthHeaderLen + wire.IPv4HeaderLen + wire.UDPHeaderLen

func (m *middlebox) Poll(clock.Time) int {
	work := 0
	for di, dir := range []struct {
		from, to port.Port
		fromA    bool
	}{{m.a, m.b, true}, {m.b, m.a, false}} {
		n := dir.from.RxBurst(0, m.buf)
		work += n
		for _, h := range m.buf[:n] {
			one := []mbuf.Handle{h}
			d := m.pool.Data(h)
			if m.keep != nil && len(d) >= hdrOff+wire.BaseHeaderLen && m.keep(dir.fromA, wire.HeaderView(d[hdrOff:])) {
				*m.held = append(*m.held, h)
				continue
			}
			if len(d) >= hdrOff+wire.BaseHeaderLen && (m.drop != nil && m.drop(dir.fromA, wire.HeaderView(d[hdrOff:])) ||
				m.tamper != nil && m.tamper(dir.fromA, wire.HeaderView(d[hdrOff:]), d)) {
				m.killed++
				m.pool.Free(one)
				continue
			}
			if !m.isLate[di] && m.late != nil && m.late() {
				m.lateH[di], m.isLate[di] = h, true
				continue
			}
			m.send(dir.to, h)
			if m.isLate[di] {
				m.isLate[di] = false
				m.send(dir.to, m.lateH[di])
			}
		}
		if n == 0 && m.isLate[di] {
			// Nothing to overtake it: it goes now.
			m.isLate[di] = false
			m.send(dir.to, m.lateH[di])
			work++
		}
	}
	return work
}

func (m *middlebox) send(to port.Port, h mbuf.Handle) {
	one := []mbuf.Handle{h}
	if to.TxBurst(0, one) != 1 {
		m.pool.Free(one)
	}
}

func (m *middlebox) NextDeadline() (clock.Time, bool) { return 0, false }
func (m *middlebox) Stop(clock.Time)                  {}

func (m *middlebox) Close() error {
	if m.held != nil {
		m.pool.Free(*m.held)
		*m.held = nil
	}
	for di := range m.isLate {
		if m.isLate[di] {
			m.pool.Free([]mbuf.Handle{m.lateH[di]})
			m.isLate[di] = false
		}
	}
	for _, pt := range []port.Port{m.a, m.b} {
		for n := pt.RxBurst(0, m.buf); n > 0; n = pt.RxBurst(0, m.buf) {
			m.pool.Free(m.buf[:n])
		}
	}
	for _, pt := range m.ports {
		_ = pt.Close()
	}
	return nil
}

// newMiddlebox makes the ports a pair's endpoints use (pa, pb) and the
// middlebox between them, on pool.
func newMiddlebox(t testing.TB, pool *mbuf.Pool) (pa, pb port.Port, m *middlebox) {
	t.Helper()
	pa, ma, err := mem.NewPair(pool, mem.PairOptions{Name: "fa", Size: 4096})
	require.NoError(t, err)
	pb, mb, err := mem.NewPair(pool, mem.PairOptions{Name: "fb", Size: 4096})
	require.NoError(t, err)
	return pa, pb, &middlebox{pool: pool, a: ma, b: mb, ports: []port.Port{pa, ma, pb, mb}, buf: make([]mbuf.Handle, 64)}
}

// newFaultPair is newPair with a middlebox instead of a fabric, and a
// small retry limit so that abandonment comes quickly.
func newFaultPair(t *testing.T, seed uint64, tweak func(a, b *Options)) (*pair, *middlebox) {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: 8192, CacheSize: 64})
	require.NoError(t, err)
	pa, pb, m := newMiddlebox(t, pool)
	p := buildPair(t, pool, pa, pb, m, seed, func(a, b *Options) {
		for _, o := range []*Options{a, b} {
			o.Transport.RetryLimit = 2
			o.MaxOps = 64
		}
		if tweak != nil {
			tweak(a, b)
		}
	})
	t.Cleanup(func() {
		p.close()
		require.Zero(t, pool.InUse(), "pool in-use after stop")
		_ = pool.Close()
	})
	return p, m
}

// settled reports that neither endpoint holds a context, a reorder entry,
// a scheduler item or incast credit.
func (p *pair) settled() bool {
	for _, e := range []*Endpoint{p.a, p.b} {
		if e.Outstanding() != 0 || e.ro.Len() != 0 || e.sch.Len() != 0 || e.granted != 0 {
			return false
		}
	}
	return true
}

func (p *pair) requireSettled() {
	p.t.Helper()
	for _, e := range []*Endpoint{p.a, p.b} {
		require.Zero(p.t, e.Outstanding(), "%s: contexts held", e.Name())
		require.Zero(p.t, e.ro.Len(), "%s: reorder entries held", e.Name())
		require.Zero(p.t, e.sch.Len(), "%s: scheduler items held", e.Name())
		require.Zero(p.t, e.granted, "%s: incast credit held", e.Name())
	}
}

// faultMem registers a source and a destination region on A and a
// writable, readable region on B.
type faultMem struct {
	src, dst, remote []byte
	rSrc, rDst, rRem Region
}

func newFaultMem(t *testing.T, p *pair, n int) *faultMem {
	f := &faultMem{src: pattern(7, n), dst: make([]byte, n), remote: pattern(8, n)}
	var err error
	f.rSrc, err = p.a.Register(f.src, 0)
	require.NoError(t, err)
	f.rDst, err = p.a.Register(f.dst, 0)
	require.NoError(t, err)
	f.rRem, err = p.b.Register(f.remote, RemoteWrite|RemoteRead)
	require.NoError(t, err)
	return f
}

// byTag returns the completions of cq by tag, failing on a duplicate.
func byTag(t *testing.T, cq []Completion) map[uint64]Completion {
	t.Helper()
	m := map[uint64]Completion{}
	for _, c := range cq {
		_, dup := m[c.Tag]
		require.False(t, dup, "tag %d completed twice", c.Tag)
		m[c.Tag] = c
	}
	return m
}

// Class 1: a pull whose data the target abandons completes at the
// initiator with a named error, and the operations behind it on an
// ordered connection proceed.
func TestPullDataAbandonedByTarget(t *testing.T) {
	p, m := newFaultPair(t, 1, nil)
	f := newFaultMem(t, p, 64<<10)
	seg := p.a.Segment()
	// Every pull data segment is lost (its resync gets through, so the
	// target's abandonment is acknowledged and the connection lives on;
	// so does the target's abort notice, which carries no data).
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		return !fromA && h.Type() == wire.TypePullData && h.PayloadLen() > 0
	}
	c := p.connect(ConnOptions{Ordered: true})
	_, err := c.Pull(Op{Local: f.rDst, Len: 3 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	_, err = c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 8 * uint64(seg)}, Tag: 2})
	require.NoError(t, err)
	p.run(func() bool { return len(p.cqA) == 2 }, time.Second)
	got := byTag(t, p.cqA)
	require.Equal(t, StatusRemoteAbandoned, got[1].Status, "the abandoned pull")
	require.Equal(t, StatusOK, got[2].Status, "the push behind it")
	require.Equal(t, []uint64{1, 2}, []uint64{p.cqA[0].Tag, p.cqA[1].Tag}, "posting order")

	// Later pulls go through once the loss stops.
	m.drop = nil
	_, err = c.Pull(Op{Local: f.rDst, Len: 3 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 3})
	require.NoError(t, err)
	p.run(func() bool { return len(p.cqA) == 3 && p.settled() }, time.Second)
	require.Equal(t, StatusOK, p.cqA[2].Status)
	require.True(t, bytes.Equal(f.remote[:3*seg], f.dst[:3*seg]))
	p.requireSettled()
}

// Class 2: an abandoned push segment ends the target's transaction (its
// context freed, the target ULP told) and the pushes behind it on an
// ordered connection reach the target's ULP.
func TestPushSegmentAbandoned(t *testing.T) {
	for _, solicit := range []Solicit{SolicitNever, SolicitAlways} {
		t.Run(map[Solicit]string{SolicitNever: "unsolicited", SolicitAlways: "solicited"}[solicit], func(t *testing.T) {
			var aborted []Request
			p, m := newFaultPair(t, 2, func(_, b *Options) {
				b.OnAborted = func(r *Request) { aborted = append(aborted, *r) }
			})
			f := newFaultMem(t, p, 64<<10)
			seg := p.a.Segment()
			c := p.connect(ConnOptions{Ordered: true})
			rsn, err := c.Push(Op{Local: f.rSrc, Len: 3 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1, Solicit: solicit})
			require.NoError(t, err)
			// The middle segment of the first push never arrives.
			m.drop = func(fromA bool, h wire.HeaderView) bool {
				return fromA && h.RSN() == rsn && h.Offset() == uint32(seg) &&
					(h.Type() == wire.TypePushUnsolicitedData || h.Type() == wire.TypePushSolicitedData)
			}
			_, err = c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 8 * uint64(seg)}, Tag: 2, Solicit: solicit})
			require.NoError(t, err)
			p.run(func() bool { return len(p.cqA) == 2 }, time.Second)
			got := byTag(t, p.cqA)
			require.Equal(t, StatusAbandoned, got[1].Status)
			require.Equal(t, StatusOK, got[2].Status)
			ok := p.runFor(func() bool { return len(p.reqB) == 1 && p.settled() }, time.Second)
			require.True(t, ok, "target: %d requests delivered (want the second push), %d contexts, %d reorder entries, %d bytes of incast credit held",
				len(p.reqB), p.b.Outstanding(), p.b.ro.Len(), p.b.granted)
			require.Equal(t, rsn+1, p.reqB[0].RSN)
			require.Len(t, aborted, 1, "the target ULP is told of the abandoned push")
			require.Equal(t, rsn, aborted[0].RSN)
			p.requireSettled()
		})
	}
}

// Class 3: solicited bytes the initiator abandons go back to the target's
// incast budget, so later solicited pushes are still granted.
func TestAbandonedSolicitedBytesReturnToIncastBudget(t *testing.T) {
	p, m := newFaultPair(t, 3, func(_, b *Options) { b.IncastCap = 4 << 10 })
	f := newFaultMem(t, p, 64<<10)
	seg := p.a.Segment()
	c := p.connect(ConnOptions{})
	lose := map[uint32]bool{}
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		return fromA && h.Type() == wire.TypePushSolicitedData && lose[h.RSN()] && h.Offset() == 0
	}
	for i := range 4 {
		rsn, err := c.Push(Op{Local: f.rSrc, Len: 2 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: uint64(i), Solicit: SolicitAlways})
		require.NoError(t, err)
		lose[rsn] = true
	}
	ok := p.runFor(func() bool { return len(p.cqA) == 4 }, time.Second)
	require.True(t, ok, "%d of 4 solicited pushes completed: target holds %d bytes of incast credit (cap %d)", len(p.cqA), p.b.granted, p.b.opts.IncastCap)
	for _, cp := range p.cqA {
		require.Equal(t, StatusAbandoned, cp.Status)
	}
	_, err := c.Push(Op{Local: f.rSrc, Len: 2 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 9, Solicit: SolicitAlways})
	require.NoError(t, err)
	ok = p.runFor(func() bool { return len(p.cqA) == 5 }, time.Second)
	require.True(t, ok, "a solicited push after four abandoned ones was never granted: target holds %d bytes of incast credit (cap %d)", p.b.granted, p.b.opts.IncastCap)
	require.Equal(t, StatusOK, p.cqA[4].Status)
	p.run(p.settled, time.Second)
	p.requireSettled()
}

// Class 4: a target that dies right after acknowledging a request; the
// initiator's operation ends.
func TestTargetDiesAfterAck(t *testing.T) {
	// A retry budget far past the timeout: the operation's timeout ends it
	// here, before the transport's probes of the silent target give up
	// (TestWaitingSideFindsVanishedPeer).
	p, m := newFaultPair(t, 4, func(a, _ *Options) { a.Transport.RetryLimit = 20 })
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{Ordered: true, OpTimeout: 5 * time.Millisecond})
	_, err := c.Pull(Op{Local: f.rDst, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	// B acknowledges the request, then dies: nothing but its ACKs ever
	// leaves it.
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		return !fromA && h.Type() != wire.TypeAck && h.Type() != wire.TypeExtendedAck
	}
	p.run(func() bool { return len(p.reqB) == 1 && c.Transport().Outstanding(wire.WindowRequest) == 0 }, time.Second)
	p.deadB = true
	ok := p.runFor(func() bool { return len(p.cqA) == 1 }, time.Second)
	require.True(t, ok, "the pull never completed: %d outstanding at A", p.a.Outstanding())
	require.Equal(t, StatusTimeout, p.cqA[0].Status)
	require.LessOrEqual(t, p.cqA[0].Latency(), 5*time.Millisecond+10*time.Microsecond, "completed at its timeout")
}

// Class 4 with the transport's keepalive instead of a timeout: the dead
// target's connection fails with rt.ErrIdleTimeout, the pull completes
// StatusConnFailed before the event reports why.
func TestTargetDiesAfterAckIdleTimeout(t *testing.T) {
	var ev events
	p, m := newFaultPair(t, 5, func(a, b *Options) {
		withEvents(&ev)(a, b)
		a.Transport.KeepAlive, a.Transport.IdleTimeout = time.Millisecond, 5*time.Millisecond
	})
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{Ordered: true})
	_, err := c.Pull(Op{Local: f.rDst, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		return !fromA && h.Type() != wire.TypeAck && h.Type() != wire.TypeExtendedAck
	}
	p.run(func() bool { return len(p.reqB) == 1 && c.Transport().Outstanding(wire.WindowRequest) == 0 }, time.Second)
	p.deadB = true
	p.run(func() bool { return len(p.cqA) == 1 }, time.Second)
	require.Equal(t, StatusConnFailed, p.cqA[0].Status)
	require.Equal(t, []ConnEventKind{ConnEstablished, ConnFailed}, kinds(ev.a))
	require.ErrorIs(t, ev.a[1].Err, rt.ErrIdleTimeout)
	require.Zero(t, p.a.Outstanding())
}

// Found by the fault property suite: a grant the transport abandoned left
// the initiator's solicited push waiting forever (and, on an ordered
// connection, everything behind it). The target grants again.
func TestAbandonedGrantIsResent(t *testing.T) {
	p, m := newFaultPair(t, 6, nil)
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{Ordered: true})
	lost := 0
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		if !fromA && h.Type() == wire.TypePushGrant && lost < 3 { // the grant and both its retries
			lost++
			return true
		}
		return false
	}
	_, err := c.Push(Op{Local: f.rSrc, Len: 5000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1, Solicit: SolicitAlways})
	require.NoError(t, err)
	_, err = c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 8000}, Tag: 2})
	require.NoError(t, err)
	ok := p.runFor(func() bool { return len(p.cqA) == 2 && p.settled() }, time.Second)
	require.True(t, ok, "%d completions; target granted %d bytes, %d contexts", len(p.cqA), p.b.granted, p.b.Outstanding())
	require.Equal(t, 3, lost)
	require.Equal(t, StatusOK, p.cqA[0].Status)
	require.Equal(t, StatusOK, p.cqA[1].Status)
	require.Equal(t, uint64(1), p.b.Stats().GrantsResent)
	require.True(t, bytes.Equal(f.src[:5000], f.remote[:5000]))
	p.requireSettled()
}

// An abort notice the transport abandons is sent again: the target still
// ends the transaction and the ordered connection moves on.
func TestAbortNoticeLostIsResent(t *testing.T) {
	p, m := newFaultPair(t, 7, nil)
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{Ordered: true})
	rsn, err := c.Push(Op{Local: f.rSrc, Len: 3000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	notices := 0
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		if !fromA || h.RSN() != rsn {
			return false
		}
		if h.Offset() == abortOffset {
			notices++
			return notices <= 3 // the first notice and both its retries
		}
		return h.Type() == wire.TypePushUnsolicitedData // every segment
	}
	_, err = c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 8000}, Tag: 2})
	require.NoError(t, err)
	ok := p.runFor(func() bool { return len(p.cqA) == 2 && len(p.reqB) == 1 && p.settled() }, time.Second)
	require.True(t, ok, "%d completions, %d requests at the target, %d contexts there", len(p.cqA), len(p.reqB), p.b.Outstanding())
	require.Equal(t, StatusAbandoned, p.cqA[0].Status)
	require.Equal(t, StatusOK, p.cqA[1].Status)
	require.Equal(t, 4, notices, "sent again after the transport abandoned it")
	require.Equal(t, rsn+1, p.reqB[0].RSN)
	p.requireSettled()
}

// Found by the fault suite's link-flap scenario (seeds 156, 349, 631): the
// target gave up its half of a connection (its retries ran out while the
// link was down) while the initiator only waited for it — its pull
// requests all acknowledged, nothing of its own unacknowledged, so no
// timer ran — and the pulls never completed. While a connection holds
// work the transport probes a silent peer: one that dropped its half
// answers with a bad-CID NACK, one that is gone answers nothing and the
// probes run out as a packet's retries would.
func TestWaitingSideFindsVanishedPeer(t *testing.T) {
	for _, tc := range []struct {
		name string
		dead bool
		err  error
	}{{"half dropped", false, rt.ErrPeerReset}, {"peer dead", true, rt.ErrRetryExhausted}} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			p, m := newFaultPair(t, 6, withEvents(&ev))
			f := newFaultMem(t, p, 64<<10)
			c := p.connect(ConnOptions{Ordered: true})
			// B acknowledges the pull request but its data never arrives.
			m.drop = func(fromA bool, h wire.HeaderView) bool { return !fromA && h.Type() == wire.TypePullData }
			_, err := c.Pull(Op{Local: f.rDst, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
			require.NoError(t, err)
			p.run(func() bool {
				return len(p.reqB) == 1 && len(ev.b) == 1 && c.Transport().Outstanding(wire.WindowRequest) == 0
			}, time.Second)
			if tc.dead {
				p.deadB = true
			} else {
				// B drops its half without a word, as when its own retries
				// ran out while the link was down.
				require.NoError(t, ev.b[0].Conn.Abort())
				m.drop = nil
			}
			ok := p.runFor(func() bool { return len(p.cqA) == 1 }, time.Second)
			require.True(t, ok, "the pull never completed: A waits with nothing outstanding (%d contexts)", p.a.Outstanding())
			require.Equal(t, StatusConnFailed, p.cqA[0].Status)
			require.Equal(t, []ConnEventKind{ConnEstablished, ConnFailed}, kinds(ev.a))
			require.ErrorIs(t, ev.a[1].Err, tc.err)
			require.Zero(t, p.a.Outstanding())
		})
	}
}

// Found by the fault suite's rnr-storm and nack-loss scenarios: on an
// ordered connection, requests that arrived ahead of an earlier one took
// every context of a small target while the one they all waited for was
// refused (NoResources) for want of one — forever: its retries ran out,
// the abort notice that stood in for it was refused the same way, and the
// pulls behind it never completed. The last context is kept for a
// request at the head of its order.
func TestHeadOfOrderAlwaysAdmitted(t *testing.T) {
	p, m := newFaultPair(t, 7, func(a, b *Options) {
		a.Transport.RetryLimit = 20 // refused requests come back, not abandoned
		b.MaxOps = 2
	})
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{Ordered: true})
	seg := p.a.Segment()
	// The first transmission of the first request is lost: the two pulls
	// behind it arrive first.
	first := true
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		if fromA && first && h.Type() == wire.TypePullRequest {
			first = false
			return true
		}
		return false
	}
	for tag := range uint64(3) {
		_, err := c.Pull(Op{Local: f.rDst, LocalAddr: tag * uint64(seg), Len: seg, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: tag * uint64(seg)}, Tag: tag})
		require.NoError(t, err)
	}
	ok := p.runFor(func() bool { return len(p.cqA) == 3 }, time.Second)
	require.True(t, ok, "%d of 3 pulls completed; B holds %d contexts", len(p.cqA), p.b.Outstanding())
	for _, cp := range p.cqA {
		require.Equal(t, StatusOK, cp.Status, "pull %d", cp.Tag)
	}
	require.True(t, bytes.Equal(f.remote[:3*seg], f.dst[:3*seg]))
	p.run(p.settled, time.Second)
	p.requireSettled()
}
