package rt

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// The tests of this file reproduce the failure-handling defects that
// live in the transport (classes 5 to 10, and Abort's event): each failed
// on the code before its fix.

// injectA hands frame to endpoint a as if b had sent it, and polls a once.
func (h *harness) injectA(frame []byte) { h.t.Helper(); h.injectInto(h.a, h.pb, frame) }

// injectInto sends frame on the peer's port from, and polls e once.
func (h *harness) injectInto(e *Endpoint, from *tapPort, frame []byte) {
	h.t.Helper()
	hs := make([]mbufHandle, 1)
	require.Equal(h.t, 1, h.pool.AllocBulk(hs))
	copy(h.pool.Append(hs[0], len(frame)), frame)
	require.Equal(h.t, 1, from.Port.TxBurst(0, hs))
	e.Poll(h.clk.Now())
	require.NoError(h.t, e.CheckInvariants())
}

// frameFromB encodes hd from b's address to a's.
func (h *harness) frameFromB(hd *wire.Header, edit func(a *wire.Addrs)) []byte {
	h.t.Helper()
	addrs := wire.Addrs{SrcMAC: macOf(h.pb), DstMAC: macOf(h.pa), SrcIP: ipB, DstIP: ipA}
	if edit != nil {
		edit(&addrs)
	}
	h.sealForA(hd, 0)
	buf := make([]byte, 256)
	n, err := wire.EncodeFrame(buf, &addrs, hd, nil)
	require.NoError(h.t, err)
	return buf[:n]
}

// restartB replaces b by a fresh endpoint on the same port: the peer lost
// its state (a crash and restart).
func (h *harness) restartB(tweak func(o *Options)) {
	h.t.Helper()
	o := h.b.Options()
	h.b.Stop(h.clk.Now())
	h.b.Close()
	o.Seed += 1000 // a new incarnation: what the default (crypto/rand) does
	if tweak != nil {
		tweak(&o)
	}
	var err error
	h.b, err = NewEndpoint(o)
	require.NoError(h.t, err)
	setEvents(h.b, func(ev Event) { h.evB = append(h.evB, ev) })
	setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		h.gotB = append(h.gotB, record(c, hd, p))
		return Accept
	})
}

// restartA does the same to a.
func (h *harness) restartA(tweak func(o *Options)) {
	h.t.Helper()
	o := h.a.Options()
	h.a.Stop(h.clk.Now())
	h.a.Close()
	o.Seed += 1000
	if tweak != nil {
		tweak(&o)
	}
	var err error
	h.a, err = NewEndpoint(o)
	require.NoError(h.t, err)
	setEvents(h.a, func(ev Event) { h.evA = append(h.evA, ev) })
}

// Class 5: a receiver that refuses a packet (RNR) with a 1 ms back-off
// must not see it again every round trip because the extended ACKs it
// sends for the packets behind it trigger early retransmission.
func TestEarlyRetransmitRespectsRNRBackOff(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { b.RNRTimeout = time.Millisecond; a.RetryLimit = 50 })
	ca, _ := h.connect()
	var first uint32
	refusing := true
	setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		if refusing && hd.PSN == first {
			return NotReady
		}
		h.gotB = append(h.gotB, record(c, hd, p))
		return Accept
	})
	sends := 0
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushRequest && f.Header.PSN == first {
			sends++
		}
		return 1
	}
	first = ca.Window(wire.WindowRequest).TxNSN
	h.sendAll(ca, wire.TypePushRequest, 0, 5, 16)
	h.idle(10 * time.Millisecond)
	// One first transmission plus one resend per RNR back-off (1 ms):
	// about 11 in 10 ms, never one per round trip.
	require.LessOrEqual(t, sends, 12, "the refused packet was resent %d times in 10 ms with a 1 ms RNR back-off", sends)
	refusing = false
	h.run(func() bool { return len(h.gotB) == 5 && h.quiet() }, time.Second)
	require.Equal(t, StateEstablished, ca.State())
}

// Class 6: when every refusal NACK is lost, the extended ACKs behind the
// refused packet trigger early retransmissions; they must count toward
// the retry limit, so the packet is sent at most RetryLimit+1 times before
// a resync takes its place, and every resend is flagged as one.
func TestEarlyRetransmitsCountTowardRetryLimit(t *testing.T) {
	const limit = 4
	h := newHarness(t, func(a, b *Options) { a.RetryLimit = limit })
	ca, _ := h.connect()
	var first uint32
	setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		if hd.PSN == first {
			return NotReady
		}
		h.gotB = append(h.gotB, record(c, hd, p))
		return Accept
	})
	h.pb.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeNack {
			return 0 // every refusal NACK is lost
		}
		return 1
	}
	var sent []wire.Header
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushRequest && f.Header.PSN == first {
			sent = append(sent, f.Header)
		}
		return 1
	}
	first = ca.Window(wire.WindowRequest).TxNSN
	h.sendAll(ca, wire.TypePushRequest, 0, 5, 16)
	h.run(func() bool { return len(eventsOf(h.evA, EventAbandoned)) == 1 && h.quiet() }, 5*time.Second)
	require.LessOrEqual(t, len(sent), limit+1, "transmissions of one packet are bounded by the retry limit")
	for i, hd := range sent[1:] {
		require.True(t, hd.Flags.Has(wire.FlagRetransmission), "resend %d flagged", i+1)
	}
	require.Equal(t, uint64(1), h.a.Stats().ResyncSent)
	require.Equal(t, StateEstablished, ca.State())
	require.Len(t, h.gotB, 4)
}

// Class 6: the send counter saturates: a packet resent 65,535 times still
// goes out flagged as a retransmission (Karn's rule), never as a first
// transmission after a wrap.
func TestRetransmissionFlagNeverWraps(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.RetryLimit = 50; a.MaxRTO = time.Millisecond })
	ca, _ := h.connect()
	var sent []wire.Header
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushRequest {
			sent = append(sent, f.Header)
		}
		return 0
	}
	h.sendAll(ca, wire.TypePushRequest, 0, 1, 16)
	h.poll()
	require.Len(t, sent, 1)
	idx, ok := h.a.retx.Lookup(keyOf(ca, wire.WindowRequest, sent[0].PSN))
	require.True(t, ok)
	h.a.ctx[idx].sends = ^uint16(0) // as if resent 65,534 times
	h.run(func() bool { return len(sent) == 4 }, time.Second)
	for i, hd := range sent[1:] {
		require.True(t, hd.Flags.Has(wire.FlagRetransmission), "resend %d flagged as a retransmission", i+1)
		require.Equal(t, uint8(wire.MaxRetry), hd.Retry)
	}
}

// Class 7: a frame for a CID this endpoint does not know (it restarted)
// is answered by a bad-CID NACK, so the peer fails the connection within
// a round trip instead of retrying for seconds.
func TestBadCIDNackFailsPeerFast(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	h.restartB(nil)
	start := h.clk.Now()
	h.sendAll(ca, wire.TypePushRequest, 0, 1, 16)
	h.run(func() bool { return ca.State() == StateFailed }, time.Second)
	require.ErrorIs(t, ca.Err(), ErrPeerReset)
	require.Less(t, h.clk.Now().Sub(start), time.Millisecond, "failed within a round trip, not after the retries")
	f := eventsOf(h.evA, EventFailed)
	require.Len(t, f, 1)
	require.ErrorIs(t, f[0].Err, ErrPeerReset)
	require.Equal(t, uint64(1), h.b.Stats().TxBadCIDNack)
	require.Equal(t, 0, h.a.Conns())
}

// Class 7: bad-CID NACKs are rate-limited by a token bucket; the ones
// suppressed are counted.
func TestBadCIDNackRateLimited(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.BadCIDNackBurst = 4; a.BadCIDNackRate = 1000; a.Burst = 64 })
	h.connect()
	s0 := h.a.Stats()
	for i := range 20 {
		hd := wire.Header{Version: wire.Version, DestCID: 0x7ffff0 + uint32(i%8), Type: wire.TypePushRequest, PSN: 1}
		hs := make([]mbufHandle, 1)
		require.Equal(t, 1, h.pool.AllocBulk(hs))
		fr := h.frameFromB(&hd, nil)
		copy(h.pool.Append(hs[0], len(fr)), fr)
		require.Equal(t, 1, h.pb.Port.TxBurst(0, hs))
	}
	h.a.Poll(h.clk.Now())
	s := h.a.Stats()
	require.Equal(t, uint64(4), s.TxBadCIDNack-s0.TxBadCIDNack, "the burst")
	require.Equal(t, uint64(16), s.BadCIDNackSuppressed-s0.BadCIDNackSuppressed)
	// 1000/s: one more token per millisecond.
	h.clk.Advance(2 * time.Millisecond)
	h.injectA(h.frameFromB(&wire.Header{Version: wire.Version, DestCID: 0x7ffff0, Type: wire.TypePushRequest}, nil))
	require.Equal(t, uint64(5), h.a.Stats().TxBadCIDNack-s0.TxBadCIDNack)
}

// Class 7: a target with a two-slot table recovers the slots of
// initiators that crashed (keepalive probes reach the new incarnation,
// whose bad-CID NACK frees the slot; a silent peer is dropped by the idle
// timeout), so every later initiator gets in.
func TestSmallTableRecoversAfterInitiatorRestarts(t *testing.T) {
	h := newHarness(t, func(a, b *Options) {
		b.MaxConns = 2
		b.KeepAlive, b.IdleTimeout = time.Millisecond, 5*time.Millisecond
	})
	var failed []error
	for i := range 5 {
		for _, ev := range eventsOf(h.evB, EventFailed) {
			failed = append(failed, ev.Err)
		}
		h.evB = nil
		ca, _ := h.connect()
		require.Equal(t, StateEstablished, ca.State(), "incarnation %d", i)
		h.restartA(nil) // crash: b is not told
	}
	require.NotZero(t, h.b.Stats().KeepAliveSent+h.b.Stats().ReclaimProbes)
	// Each zombie was ended by the new incarnation's bad-CID NACK, or by
	// the idle timeout.
	require.NotEmpty(t, failed)
	for _, err := range failed {
		require.True(t, errors.Is(err, ErrPeerReset) || errors.Is(err, ErrIdleTimeout), "%v", err)
	}
	require.Contains(t, failed, ErrPeerReset, "the restarted initiator's bad-CID NACK ended a zombie")
}

// Class 7: the idle timeout fails a connection whose peer went silent
// with nothing outstanding; keepalive probes keep a live one open.
func TestIdleTimeoutAndKeepAlive(t *testing.T) {
	h := newHarness(t, func(a, b *Options) {
		a.KeepAlive, a.IdleTimeout = time.Millisecond, 4*time.Millisecond
	})
	ca, _ := h.connect()
	h.idle(20 * time.Millisecond)
	require.Equal(t, StateEstablished, ca.State(), "probes answered: the connection stays")
	require.NotZero(t, h.a.Stats().KeepAliveSent)
	h.pb.tap = func(*wire.Frame) int { return 0 } // the peer goes silent
	h.run(func() bool { return ca.State() == StateFailed }, 20*time.Millisecond)
	require.ErrorIs(t, ca.Err(), ErrIdleTimeout)
	require.Len(t, eventsOf(h.evA, EventFailed), 1)
	require.Equal(t, uint64(1), h.a.Stats().IdleTimeouts)
}

// Class 8: by default a restarted endpoint draws new CIDs and initial
// PSNs; an explicit Seed still replays.
func TestUnpredictableCIDsAndPSNsByDefault(t *testing.T) {
	h := newHarness(t, nil)
	first := func(seed uint64) (uint32, uint32) {
		o := h.a.Options()
		o.Seed = seed
		o.Clock = clock.NewReal() // not a simulation
		o.Name = "probe"
		e, err := NewEndpoint(o)
		require.NoError(t, err)
		defer e.Close()
		c, err := e.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
		require.NoError(t, err)
		return c.LocalCID(), c.c.rx[0].bsn
	}
	c1, p1 := first(0)
	c2, p2 := first(0)
	require.False(t, c1 == c2 && p1 == p2, "two incarnations without a seed chose the same CID %#x and initial PSN %d", c1, p1)
	c1, p1 = first(7)
	c2, p2 = first(7)
	require.Equal(t, c1, c2, "an explicit seed replays")
	require.Equal(t, p1, p2)
}

// Class 8: a packet for a live connection from another address (IP or
// UDP port) than its peer's is dropped and counted, on the fast path and
// the general one.
func TestSourceAddressChecked(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	bsn := ca.Window(wire.WindowRequest).RxBSN
	hd := func() *wire.Header {
		return &wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: wire.TypePushRequest, PSN: bsn,
			ReqEBSN: ca.Window(wire.WindowRequest).TxBSN, DataEBSN: ca.Window(wire.WindowData).TxBSN}
	}
	s0 := h.a.Stats()
	h.injectA(h.frameFromB(hd(), func(a *wire.Addrs) { a.SrcIP = netip.MustParseAddr("10.0.0.9") }))
	h.injectA(h.frameFromB(hd(), func(a *wire.Addrs) { a.SrcPort = 4242 }))
	x := hd()
	x.Type = wire.TypeAck
	h.injectA(h.frameFromB(x, func(a *wire.Addrs) { a.SrcPort = 4242 }))
	require.Empty(t, h.gotA, "nothing from a stranger is delivered")
	require.Equal(t, bsn, ca.Window(wire.WindowRequest).RxBSN)
	require.Equal(t, uint64(3), h.a.Stats().RxBadSource-s0.RxBadSource)
	// The real peer still gets through.
	h.injectA(h.frameFromB(hd(), nil))
	require.Len(t, h.gotA, 1)
}

// Class 9: a NACK "unexpected" for an outstanding packet does not hand
// its cookie back: the packet is still the transport's until it resolves,
// and its cookie comes back exactly once (here, with its ACK).
func TestUnexpectedNackKeepsCookieUntilResolved(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	acked := map[uint64]int{}
	setAcked(h.a, func(c *Conn, w wire.Window, psn uint32, cookie uint64) { acked[cookie]++ })
	h.pa.tap = func(*wire.Frame) int { return 0 }
	psn, err := ca.Send(SendHeader{Type: wire.TypePushRequest, Cookie: 42}, payload(1, 16))
	require.NoError(t, err)
	h.poll()
	h.injectA(h.frameFromB(&wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: wire.TypeNack,
		ReqEBSN: ca.Window(wire.WindowRequest).TxBSN, DataEBSN: ca.Window(wire.WindowData).TxBSN,
		TxEcho: stamp(h.clk.Now()), // the refused transmission's TxTime: this NACK names it
		Nack:   wire.NackBody{Code: wire.NackUnexpected, Window: wire.WindowRequest, PSN: psn}}, nil))
	nacks := eventsOf(h.evA, EventNack)
	require.Len(t, nacks, 1, "the ULP hears of the NACK")
	h.pa.tap = nil
	h.run(h.quiet, time.Second)
	reports := acked[42]
	for _, ev := range eventsOf(h.evA, EventNack) {
		if ev.HasCookie && ev.Cookie == 42 {
			reports++
		}
	}
	require.Equal(t, 1, reports, "the cookie is handed back exactly once")
	require.Equal(t, 1, acked[42], "when the packet is acknowledged")
}

// Class 10: an acknowledgement inconsistent with itself or with what was
// sent is counted as forged and changes nothing.
func TestInconsistentAcksAreForgedAndChangeNothing(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	h.pa.tap = func(*wire.Frame) int { return 0 }
	h.sendAll(ca, wire.TypePushRequest, 0, 4, 8)
	h.sendAll(ca, wire.TypePullData, 0, 4, 8)
	h.poll()
	before := snapshotConn(ca)
	base := func(typ wire.Type) *wire.Header {
		return &wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: typ,
			ReqEBSN: before.tx[0].bsn, DataEBSN: before.tx[1].bsn}
	}
	cases := []struct {
		name string
		hd   func() *wire.Header
	}{
		{"EACK bit 0 set: the eBSN says not received, the bitmap says received", func() *wire.Header {
			hd := base(wire.TypeExtendedAck)
			hd.Ack.ReqBitmap.Set(0)
			hd.Ack.ReqBitmap.Set(1)
			return hd
		}},
		{"ACK: one window honest, the other beyond NSN", func() *wire.Header {
			hd := base(wire.TypeAck)
			hd.ReqEBSN = before.tx[0].bsn + 2
			hd.DataEBSN = before.tx[1].nsn + 3
			return hd
		}},
		{"EACK: one window honest, the other's bitmap past NSN", func() *wire.Header {
			hd := base(wire.TypeExtendedAck)
			hd.Ack.ReqBitmap.Set(2)
			hd.Ack.DataBitmap.Set(50)
			return hd
		}},
		{"NACK RNR for a PSN never sent", func() *wire.Header {
			hd := base(wire.TypeNack)
			hd.Nack = wire.NackBody{Code: wire.NackReceiverNotReady, Window: wire.WindowRequest, PSN: before.tx[0].nsn + 7, RNRTimeoutMicros: 1e6}
			return hd
		}},
		{"NACK with a forged eBSN", func() *wire.Header {
			hd := base(wire.TypeNack)
			hd.ReqEBSN = before.tx[0].nsn + 9
			hd.Nack = wire.NackBody{Code: wire.NackReceiverNotReady, Window: wire.WindowRequest, PSN: before.tx[0].bsn, RNRTimeoutMicros: 1e6}
			return hd
		}},
		{"NACK ULP error for a PSN never sent", func() *wire.Header {
			hd := base(wire.TypeNack)
			hd.Nack = wire.NackBody{Code: wire.NackULPError, Window: wire.WindowData, PSN: before.tx[1].nsn}
			return hd
		}},
	}
	for _, tc := range cases {
		s0 := h.a.Stats()
		ev0 := len(h.evA)
		h.injectA(h.frameFromB(tc.hd(), nil))
		require.Equal(t, s0.AckForged+1, h.a.Stats().AckForged, tc.name)
		require.Equal(t, before, snapshotConn(ca), tc.name)
		require.Len(t, h.evA, ev0, "%s: no event", tc.name)
		require.Zero(t, h.a.Stats().ResyncSent, tc.name)
	}
	// No hold-off was applied: the packets are resent on their timers.
	h.pa.tap = nil
	h.run(func() bool { return len(h.gotB) == 8 && h.quiet() }, 20*time.Millisecond)
	require.Equal(t, StateEstablished, ca.State())
}

// API: Abort tells the ULP, exactly once, with EventFailed and
// ErrAborted.
func TestAbortEmitsEventFailedOnce(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	h.pa.tap = func(*wire.Frame) int { return 0 }
	h.sendAll(ca, wire.TypePushRequest, 0, 3, 10)
	h.poll()
	ca.Abort()
	ca.Abort()
	h.idle(time.Millisecond)
	f := eventsOf(h.evA, EventFailed)
	require.Len(t, f, 1)
	require.Same(t, ca, f[0].Conn)
	require.ErrorIs(t, f[0].Err, ErrAborted)
	require.Equal(t, 0, h.a.Outstanding())
}

func keyOf(h *Conn, w wire.Window, psn uint32) cam.TransportKey {
	return cam.TransportKey{CID: h.LocalCID(), Win: uint32(w), PSN: psn}
}

func TestFailureOptionsValidation(t *testing.T) {
	h := newHarness(t, nil)
	base := Options{Port: h.pa, Pool: h.pool, Clock: h.clk, LocalIP: ipA}
	for _, tc := range []struct {
		mut  func(*Options)
		want string
	}{
		{func(o *Options) { o.KeepAlive, o.IdleTimeout = time.Millisecond, time.Millisecond }, "IdleTimeout 1ms does not exceed KeepAlive 1ms"},
		{func(o *Options) { o.BadCIDNackBurst = -1 }, "BadCIDNackBurst -1"},
	} {
		o := base
		tc.mut(&o)
		_, err := NewEndpoint(o)
		require.ErrorIs(t, err, ErrInvalidOptions)
		require.ErrorContains(t, err, tc.want)
	}
	e, err := NewEndpoint(base)
	require.NoError(t, err)
	defer e.Close()
	o := e.Options()
	require.Equal(t, DefaultBadCIDNackRate, o.BadCIDNackRate)
	require.Equal(t, DefaultBadCIDNackBurst, o.BadCIDNackBurst)
	require.Equal(t, DefaultKeepAlive, o.KeepAlive, "on by default")
	require.Equal(t, DefaultIdleTimeout, o.IdleTimeout, "on by default")
	off := base
	off.KeepAlive, off.IdleTimeout = -1, -1
	e2, err := NewEndpoint(off)
	require.NoError(t, err)
	defer e2.Close()
	require.Zero(t, e2.Options().KeepAlive, "negative: off")
	require.Zero(t, e2.Options().IdleTimeout, "negative: off")
	short := base
	short.IdleTimeout = 8 * time.Millisecond
	e3, err := NewEndpoint(short)
	require.NoError(t, err)
	defer e3.Close()
	require.Equal(t, 2*time.Millisecond, e3.Options().KeepAlive, "a short idle timeout shortens the default keepalive")

	// A negative rate sends no bad-CID NACK at all.
	h2 := newHarness(t, func(a, b *Options) { a.BadCIDNackRate = -1 })
	h2.connect()
	h2.injectA(h2.frameFromB(&wire.Header{Version: wire.Version, DestCID: 0x7ffff0, Type: wire.TypePushRequest}, nil))
	require.Zero(t, h2.a.Stats().TxBadCIDNack)
	require.Equal(t, uint64(1), h2.a.Stats().BadCIDNackSuppressed)
}

// Class 7: a bad-CID NACK must come from the connection's peer and name
// the CID we send to; a NACK to an unknown CID is never answered (two
// endpoints that both lost a connection must not bounce NACKs forever).
func TestBadCIDNackChecked(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	bad := func(scid uint32) *wire.Header {
		return &wire.Header{Version: wire.Version, Type: wire.TypeNack, Nack: wire.NackBody{Code: wire.NackBadCID, Window: wire.WindowRequest},
			Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: scid}}
	}
	h.injectA(h.frameFromB(bad(ca.PeerCID()), func(a *wire.Addrs) { a.SrcPort = 4242 }))
	h.injectA(h.frameFromB(bad(ca.PeerCID()), func(a *wire.Addrs) { a.SrcIP = netip.MustParseAddr("10.0.0.9") }))
	h.injectA(h.frameFromB(bad(ca.PeerCID()^1), nil))
	require.Equal(t, StateEstablished, ca.State(), "not from the peer, or not our peer CID")
	s0 := h.a.Stats()
	x := bad(0)
	x.DestCID = 0x7ffff0 // a NACK to a CID a does not know
	h.injectA(h.frameFromB(x, nil))
	require.Equal(t, s0.TxBadCIDNack, h.a.Stats().TxBadCIDNack, "a NACK earns no NACK")
	require.Equal(t, s0.BadCIDNackSuppressed, h.a.Stats().BadCIDNackSuppressed)
	h.injectA(h.frameFromB(bad(ca.PeerCID()), nil))
	require.Equal(t, StateFailed, ca.State())
	require.ErrorIs(t, ca.Err(), ErrPeerReset)
	require.Len(t, eventsOf(h.evA, EventFailed), 1)
}

// Class 10: the fields an acknowledgement carries besides its BSNs are
// bounded by what we sent too: an RTT echo older than the connection
// gives no sample, and an RNR delay cannot hold a packet past MaxRTO.
func TestAckEchoAndRNRDelayBounded(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.MaxRTO = 2 * time.Millisecond })
	ca, _ := h.connect()
	h.idle(time.Millisecond)
	s0 := h.a.Stats()
	ack := &wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: wire.TypeAck,
		ReqEBSN: ca.Window(wire.WindowRequest).TxBSN, DataEBSN: ca.Window(wire.WindowData).TxBSN,
		TxEcho: stamp(h.a.Now()) - uint32(time.Second), TxTime: 5}
	ack.Ack.RxTime = 5
	h.injectA(h.frameFromB(ack, nil))
	require.Equal(t, s0.RTTSamples, h.a.Stats().RTTSamples, "an echo older than the connection")

	var sends []clock.Time
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushRequest {
			sends = append(sends, h.clk.Now())
			return 0
		}
		return 1
	}
	psn := h.sendAll(ca, wire.TypePushRequest, 0, 1, 8)[0]
	h.poll()
	require.Len(t, sends, 1)
	h.injectA(h.frameFromB(&wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: wire.TypeNack,
		ReqEBSN: ca.Window(wire.WindowRequest).TxBSN, DataEBSN: ca.Window(wire.WindowData).TxBSN,
		Nack: wire.NackBody{Code: wire.NackReceiverNotReady, Window: wire.WindowRequest, PSN: psn, RNRTimeoutMicros: 3_600_000_000}}, nil))
	h.run(func() bool { return len(sends) == 2 }, 10*time.Millisecond)
	require.LessOrEqual(t, sends[1].Sub(sends[0]), 3*time.Millisecond, "held at most MaxRTO")
}

// SetAwaiting (found by the fault suite's link-flap scenario): a side that
// only waits for its peer, with nothing of its own unacknowledged, finds a
// peer that dropped its half (its probe earns a bad-CID NACK); a
// connection with no work in progress sends nothing at all, so an idle
// endpoint stays idle.
func TestAwaitingProbesSilentPeer(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.KeepAlive, a.IdleTimeout, b.KeepAlive, b.IdleTimeout = -1, -1, -1, -1 })
	ca, cb := h.connect()
	h.idle(time.Millisecond) // the setup's last ACKs
	sent := 0
	h.pa.tap = func(*wire.Frame) int { sent++; return 1 }
	h.idle(50 * time.Millisecond)
	require.Zero(t, sent, "an idle connection without keepalive sends nothing")
	_, ok := h.next()
	require.False(t, ok, "an idle connection without keepalive or idle timeout runs no timer")

	ca.SetAwaiting(true)
	cb.Abort() // b gives up its half without a word
	h.run(func() bool { return ca.State() == StateFailed }, time.Second)
	require.ErrorIs(t, ca.Err(), ErrPeerReset)
	require.Positive(t, h.a.Stats().AwaitProbes, "a probed its silent peer")
	require.Zero(t, h.a.Stats().KeepAliveSent, "no keepalive configured: the probes are SetAwaiting's")
	require.Len(t, eventsOf(h.evA, EventFailed), 1)
}

// A peer that answers every probe but has nothing else to say (its own
// backlog holds our next move: a grant, a pull's data) is probed on a
// backoff that grows through the wait, answered or not, up to MaxRTO —
// not every RTO, which with a thousand such connections spends the
// transmit budget on probes (livelock). The wait's first probe still comes
// one RTO after silence, and a peer that dies afterwards is still found
// (RetryLimit+1 unanswered probes, at most MaxRTO apart).
func TestAnsweredProbesBackOff(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	h.idle(time.Millisecond)
	ca.SetAwaiting(true)
	h.idle(time.Second) // b answers every probe
	probes := h.a.Stats().AwaitProbes
	// RTO 100µs..1ms doubling to MaxRTO 100ms: about ten to get there,
	// then one per 100ms. Every RTO would be a thousand or more.
	require.Positive(t, probes, "a probed its silent peer")
	require.LessOrEqual(t, probes, uint64(10+int(time.Second/DefaultMaxRTO)+2), "answered probes back off")
	require.Equal(t, StateEstablished, ca.State(), "a live peer is never given up on")

	cb.Abort()
	start := h.clk.Now()
	h.run(func() bool { return ca.State() == StateFailed }, 2*time.Second)
	require.ErrorIs(t, ca.Err(), ErrPeerReset)
	require.LessOrEqual(t, h.clk.Now().Sub(start), DefaultMaxRTO+time.Millisecond, "the next probe finds the dead peer")
}
