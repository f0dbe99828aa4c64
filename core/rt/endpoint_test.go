package rt

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

func TestOptionsValidation(t *testing.T) {
	h := newHarness(t, nil)
	base := Options{Port: h.pa, Pool: h.pool, Clock: h.clk, LocalIP: ipA}
	cases := []struct {
		mut  func(*Options)
		want string
	}{
		{func(o *Options) { o.Port = nil }, "Options.Port"},
		{func(o *Options) { o.Pool = nil }, "Options.Pool"},
		{func(o *Options) { o.Clock = nil }, "Options.Clock"},
		{func(o *Options) { o.LocalIP = netipZero }, "Options.LocalIP"},
		{func(o *Options) { o.WindowSize = 100 }, "WindowSize 100 is not a multiple of 64 in 64..4096 (use 128)"},
		{func(o *Options) { o.MaxOutstanding = 500 }, "MaxOutstanding 500"},
		{func(o *Options) { o.MaxConns = -1 }, "MaxConns -1"},
		{func(o *Options) { o.Queue = 3 }, "Queue 3"},
		{func(o *Options) { o.MinRTO, o.MaxRTO = time.Second, time.Millisecond }, "MinRTO"},
		{func(o *Options) { o.RetryLimit = 1000 }, "RetryLimit 1000"},
		{func(o *Options) { o.Burst = 1000 }, "Burst 1000"},
		{func(o *Options) { o.EarlyRetransmitDistance = 128 }, "EarlyRetransmitDistance 128"},
	}
	for _, tc := range cases {
		o := base
		tc.mut(&o)
		_, err := NewEndpoint(o)
		require.ErrorIs(t, err, ErrInvalidOptions)
		require.ErrorContains(t, err, tc.want)
	}
	e, err := NewEndpoint(base)
	require.NoError(t, err)
	o := e.Options()
	require.Equal(t, DefaultWindowSize, o.WindowSize)
	require.Equal(t, DefaultWindowSize, o.MaxOutstanding)
	require.Equal(t, uint16(wire.DefaultPort), o.LocalPort)
	require.NoError(t, e.Close())
}

func TestCIDLayout(t *testing.T) {
	for _, n := range []int{1, 2, 3, 64, 1000, MaxMaxConns} {
		l := newCIDLayout(n, 0, 0)
		require.GreaterOrEqual(t, l.genMax, uint32(15), "n=%d", n)
		for _, idx := range []int32{0, int32(n - 1)} {
			cid := l.make(l.genMax, idx)
			require.LessOrEqual(t, cid, uint32(wire.MaxCID))
			require.Equal(t, uint32(idx), l.index(cid))
			require.NotZero(t, l.make(1, idx))
		}
	}
}

func TestHandshakeTransferClose(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	require.Equal(t, ca.LocalCID(), cb.PeerCID())
	require.Equal(t, cb.LocalCID(), ca.PeerCID())
	require.Len(t, eventsOf(h.evA, EventEstablished), 1)
	require.Len(t, eventsOf(h.evB, EventEstablished), 1)

	const n = 600
	psnReq := h.sendAll(ca, wire.TypePushUnsolicitedData, 0, n, 200)
	psnData := h.sendAll(cb, wire.TypePullData, 10000, n, 100)
	h.run(func() bool { return len(h.gotB) == n && len(h.gotA) == n && h.quiet() }, time.Second)

	// Exactly once, in order on a clean link, PSNs consecutive.
	for i, d := range h.gotB {
		require.Equal(t, uint64(i), d.seq)
		require.Equal(t, psnReq[i], d.psn)
		require.Equal(t, wire.WindowRequest, d.win)
		require.Equal(t, 200, d.length)
		require.Equal(t, psnReq[0]+uint32(i), d.psn)
	}
	for i, d := range h.gotA {
		require.Equal(t, uint64(10000+i), d.seq)
		require.Equal(t, psnData[i], d.psn)
		require.Equal(t, wire.WindowData, d.win)
	}
	sa, sb := h.a.Stats(), h.b.Stats()
	require.Equal(t, uint64(n), sa.TxData)
	require.Equal(t, uint64(n), sb.RxDelivered)
	require.Zero(t, sa.TxRetransmit+sb.TxRetransmit, "no loss, no retransmission")
	require.Zero(t, sa.Internal+sb.Internal)
	require.Zero(t, sa.RxBadChecksum+sb.RxBadChecksum)
	require.NotZero(t, sa.RTTSamples+sb.RTTSamples)

	// Close from a; b answers with its own ConnClose.
	require.NoError(t, ca.Close())
	_, err := ca.Send(SendHeader{Type: wire.TypePullRequest}, nil)
	require.ErrorIs(t, err, ErrClosed)
	h.run(func() bool { return ca.State() == StateClosed && cb.State() == StateClosed }, time.Second)
	require.Len(t, eventsOf(h.evA, EventClosed), 1)
	require.Len(t, eventsOf(h.evB, EventClosed), 1)
	require.Equal(t, 1, h.a.Conns())
	h.idle(h.a.Options().CloseLinger + time.Millisecond)
	require.Equal(t, 0, h.a.Conns())
	require.Equal(t, 0, h.b.Conns())
	require.Equal(t, StateClosed, ca.State())
	require.Nil(t, ca.Err())

	h.a.Stop(h.clk.Now())
	h.b.Stop(h.clk.Now())
	require.Equal(t, 0, h.pool.InUse(), "every frame back in the pool")
}

func TestRetransmitSamePSN(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	// Drop the first transmission of every third data packet.
	type seen struct{ retry uint8 }
	sends := map[uint32][]wire.Header{}
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type != wire.TypePushUnsolicitedData {
			return 1
		}
		sends[f.Header.PSN] = append(sends[f.Header.PSN], f.Header)
		if f.Header.PSN%3 == 0 && len(sends[f.Header.PSN]) == 1 {
			return 0
		}
		return 1
	}
	const n = 90
	h.sendAll(ca, wire.TypePushUnsolicitedData, 0, n, 64)
	h.run(func() bool { return len(h.gotB) == n && h.quiet() }, time.Second)
	seq := map[uint64]int{}
	for _, d := range h.gotB {
		seq[d.seq]++
	}
	require.Len(t, seq, n)
	for s, k := range seq {
		require.Equal(t, 1, k, "seq %d delivered %d times", s, k)
	}
	for psn, hs := range sends {
		if psn%3 == 0 {
			require.GreaterOrEqual(t, len(hs), 2, "PSN %d was resent", psn)
			r := hs[1]
			require.Equal(t, psn, r.PSN, "same PSN")
			require.True(t, r.Flags.Has(wire.FlagRetransmission))
			require.Equal(t, uint8(1), r.Retry)
			require.Equal(t, hs[0].RSN, r.RSN)
		}
	}
	s := h.a.Stats()
	require.NotZero(t, s.TxRetransmit+s.TxEarlyRetransmit)
	require.NotZero(t, s.TxEarlyRetransmit, "holes overtaken by later PSNs are resent early")
}

func TestOpenTimeoutAndRefusal(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		h := newHarness(t, func(a, b *Options) { a.RetryLimit = 3 })
		h.pa.tap = func(*wire.Frame) int { return 0 }
		ca, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
		require.NoError(t, err)
		h.run(func() bool { return ca.State() == StateFailed }, time.Second)
		require.ErrorIs(t, ca.Err(), ErrOpenTimeout)
		f := eventsOf(h.evA, EventFailed)
		require.Len(t, f, 1)
		require.ErrorIs(t, f[0].Err, ErrOpenTimeout)
		require.Equal(t, uint64(4), h.a.Stats().TxControl, "1 ConnOpen + RetryLimit resends")
		require.Equal(t, 0, h.a.Conns())
	})
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t, func(a, b *Options) { b.Accept = func(PeerAddr) bool { return false } })
		ca, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
		require.NoError(t, err)
		h.run(func() bool { return ca.State() == StateFailed }, time.Second)
		require.ErrorIs(t, ca.Err(), ErrRefused)
		require.Equal(t, uint64(1), h.b.Stats().ConnRejected)
		require.Equal(t, 0, h.b.Conns())
	})
	t.Run("table full", func(t *testing.T) {
		h := newHarness(t, func(a, b *Options) { b.MaxConns = 1; a.RetryLimit = 2 })
		h.connect()
		c2, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
		require.NoError(t, err)
		h.run(func() bool { return c2.State() == StateFailed }, time.Second)
		require.ErrorIs(t, c2.Err(), ErrOpenTimeout, "resource-exhausted NACKs are retried until the limit")
		require.GreaterOrEqual(t, h.b.Stats().ConnRejected, uint64(3))
	})
}

func TestLostConnAcceptAndThirdLeg(t *testing.T) {
	h := newHarness(t, nil)
	drops := 0
	h.pb.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeConnAccept && drops < 2 {
			drops++
			return 0
		}
		return 1
	}
	// Also drop a's first two ACKs (the third leg): b resends ConnAccept.
	acks := 0
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeAck && acks < 2 {
			acks++
			return 0
		}
		return 1
	}
	ca, cb := h.connect()
	require.NotNil(t, cb)
	require.Equal(t, StateEstablished, ca.State())
	require.Equal(t, 1, h.b.Conns(), "repeated ConnOpens map to one connection")
	require.NotZero(t, h.b.Stats().ConnDupOpen)
}

func TestRetryExhaustionFailsWithReason(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.RetryLimit = 3; a.MaxRTO = 10 * time.Millisecond })
	ca, _ := h.connect()
	h.pa.tap = func(*wire.Frame) int { return 0 } // the peer goes silent
	_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData}, payload(1, 10))
	require.NoError(t, err)
	h.run(func() bool { return ca.State() == StateFailed }, 10*time.Second)
	require.ErrorIs(t, ca.Err(), ErrRetryExhausted)
	s := h.a.Stats()
	require.Equal(t, uint64(1), s.ResyncSent, "a resync was tried first")
	require.Equal(t, uint64(1), s.TimeoutAsks, "the first timeout asked")
	require.Equal(t, uint64(6), s.TxRetransmit, "the ask and 2 resends of the packet, then the resync and its 3 resends")
	f := eventsOf(h.evA, EventFailed)
	require.Len(t, f, 1)
	require.ErrorIs(t, f[0].Err, ErrRetryExhausted)
	require.Equal(t, 0, h.a.Outstanding())
	h.a.Stop(h.clk.Now())
	h.b.Stop(h.clk.Now())
	require.Equal(t, 0, h.pool.InUse())
}

func TestResyncAbandonsAndContinues(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.RetryLimit = 2 })
	ca, _ := h.connect()
	// Drop every transmission of PSN p but let its resync through.
	var target uint32
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushRequest && f.Header.PSN == target {
			return 0
		}
		return 1
	}
	target = h.sendAll(ca, wire.TypePushRequest, 0, 1, 10)[0]
	h.sendAll(ca, wire.TypePushRequest, 1, 5, 10)
	h.run(func() bool { return len(eventsOf(h.evA, EventAbandoned)) == 1 && h.quiet() }, time.Second)
	ev := eventsOf(h.evA, EventAbandoned)[0]
	require.Equal(t, target, ev.PSN)
	require.Equal(t, wire.WindowRequest, ev.Window)
	require.Len(t, h.gotB, 5, "the other packets arrive; the abandoned one never")
	require.Equal(t, uint64(1), h.b.Stats().RxResync)
	require.Equal(t, StateEstablished, ca.State())
	// The connection keeps working.
	h.pa.tap = nil
	h.sendAll(ca, wire.TypePushRequest, 100, 3, 10)
	h.run(func() bool { return len(h.gotB) == 8 && h.quiet() }, time.Second)
}

func TestDuplicatesDeliveredOnce(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	h.pa.tap = func(f *wire.Frame) int { return 3 } // everything thrice
	h.pb.tap = func(f *wire.Frame) int { return 2 } // ACKs twice
	h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 200, 30)
	h.sendAll(cb, wire.TypePushGrant, 500, 50, 30)
	h.run(func() bool { return len(h.gotB) == 200 && len(h.gotA) == 50 && h.quiet() }, time.Second)
	for i, d := range h.gotB {
		require.Equal(t, uint64(i), d.seq)
	}
	sb := h.b.Stats()
	require.GreaterOrEqual(t, sb.RxDuplicate+sb.RxStalePSN, uint64(400), "copies arrive after the original moved the window: stale or duplicate")
}

func TestPSNWrapAround(t *testing.T) {
	start := ^uint32(0) - 40
	h := newHarness(t, func(a, b *Options) {
		for _, o := range []*Options{a, b} {
			o.FixedInitialPSN, o.InitialPSN = true, start
			o.WindowSize = 64
		}
	})
	ca, cb := h.connect()
	drop := 0
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePullRequest && drop < 20 && f.Header.PSN%7 == 0 && !f.Header.Flags.Has(wire.FlagRetransmission) {
			drop++
			return 0
		}
		return 1
	}
	psns := h.sendAll(ca, wire.TypePullRequest, 0, 300, 16)
	h.sendAll(cb, wire.TypePullData, 1000, 100, 16)
	require.Equal(t, start, psns[0])
	require.Equal(t, uint32(258), psns[299], "PSNs wrap through 0")
	h.run(func() bool { return len(h.gotB) == 300 && len(h.gotA) == 100 && h.quiet() }, time.Second)
	seen := map[uint32]bool{}
	for _, d := range h.gotB {
		require.False(t, seen[d.psn])
		seen[d.psn] = true
	}
	require.Len(t, seen, 300)
}

func TestDeliverRefusalNacksAndResends(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	refused := map[uint32]int{}
	setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		if refused[hd.PSN] < 2 {
			refused[hd.PSN]++
			if hd.PSN%2 == 0 {
				return NotReady
			}
			return NoResources
		}
		h.gotB = append(h.gotB, record(c, hd, p))
		return Accept
	})
	h.sendAll(ca, wire.TypePushRequest, 0, 10, 8)
	h.run(func() bool { return len(h.gotB) == 10 && h.quiet() }, time.Second)
	require.Equal(t, uint64(20), h.b.Stats().RxRefused)
	require.GreaterOrEqual(t, h.b.Stats().TxNack, uint64(2))
	require.Equal(t, h.b.Stats().TxNack, h.a.Stats().RxNack)
	require.Equal(t, StateEstablished, ca.State())
}

func TestSendRefusals(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.CAMCapacity = 5; a.MaxOutstanding = 64; a.WindowSize = 64 })
	ca, _ := h.connect()
	for i := range 5 {
		_, err := ca.Send(SendHeader{Type: wire.TypePushRequest}, payload(uint64(i), 8))
		require.NoError(t, err)
	}
	_, err := ca.Send(SendHeader{Type: wire.TypePushRequest}, nil)
	require.ErrorIs(t, err, ErrCAMFull)
	require.ErrorIs(t, err, ErrBusy)
	require.False(t, ca.CanSend(wire.TypePushRequest))
	require.Equal(t, 5, ca.Outstanding(wire.WindowRequest))
	require.NoError(t, h.a.CheckInvariants())

	_, err = ca.Send(SendHeader{Type: wire.TypeAck}, nil)
	require.ErrorIs(t, err, ErrBadType)
	_, err = ca.Send(SendHeader{Type: wire.TypeConnClose}, nil)
	require.ErrorIs(t, err, ErrBadType)
	_, err = ca.Send(SendHeader{Type: wire.TypePullData}, make([]byte, 3000))
	require.ErrorIs(t, err, ErrTooLarge)

	h.run(h.quiet, time.Second)
	require.True(t, ca.CanSend(wire.TypePushRequest))

	h2 := newHarness(t, func(a, b *Options) { a.MaxOutstanding = 3 })
	c2, _ := h2.connect()
	for range 3 {
		_, err := c2.Send(SendHeader{Type: wire.TypePullData}, nil)
		require.NoError(t, err)
	}
	_, err = c2.Send(SendHeader{Type: wire.TypePullData}, nil)
	require.ErrorIs(t, err, ErrWindowFull)
	_, err = c2.Send(SendHeader{Type: wire.TypePullRequest}, nil)
	require.NoError(t, err, "the request window is separate")

	c3, err := h2.a.Open(PeerAddr{MAC: macOf(h2.pb), IP: ipB})
	require.NoError(t, err)
	_, err = c3.Send(SendHeader{Type: wire.TypePullData}, nil)
	require.ErrorIs(t, err, ErrNotEstablished)
	require.ErrorIs(t, err, ErrBusy)
	_, err = h2.a.Open(PeerAddr{IP: netipV6})
	require.ErrorIs(t, err, ErrBadPeer)
}

func TestIncrementalChecksumMatchesFull(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	var bad int
	h.pa.tap = func(f *wire.Frame) int { return 1 } // decode succeeds → checksum fine
	for i := range 50 {
		_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Flags: wire.FlagLastOfMessage}, payload(uint64(i), i*13))
		require.NoError(t, err)
	}
	h.run(func() bool { return len(h.gotB) == 50 && h.quiet() }, time.Second)
	require.Zero(t, h.b.Stats().RxBadChecksum+h.b.Stats().RxMalformed)
	require.Zero(t, bad)
	// The update rule itself is core/wire's (TestRefreshMatchesFreshEncode).
}

func TestSendDeliverAckRoundTripAllocs(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	h.check = false
	delivered := 0
	setDeliver(h.b, func(*Conn, *wire.Header, []byte) Verdict { delivered++; return Accept })
	setEvents(h.a, nil)
	setEvents(h.b, nil)
	p := payload(7, 100)
	round := func() {
		if _, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData}, p); err != nil {
			panic(err)
		}
		for range 4 {
			h.clk.Advance(time.Microsecond)
			h.poll()
		}
		h.clk.Advance(20 * time.Microsecond) // the delayed ACK
		for range 3 {
			h.poll()
		}
	}
	for range 50 {
		round()
	}
	allocs := testing.AllocsPerRun(200, round)
	require.Zero(t, allocs, "send + deliver + ack round trip must not allocate")
	require.Equal(t, 50+201, delivered, "AllocsPerRun runs the function once more to warm up")
	require.Equal(t, 0, h.a.Outstanding())
}

func TestForgedAndMalformedFramesChangeNothing(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.MaxConns = 6 }) // slot indexes 6 and 7 do not exist
	ca, cb := h.connect()
	h.sendAll(ca, wire.TypePushRequest, 0, 10, 8)
	h.run(func() bool { return len(h.gotB) == 10 && h.quiet() }, time.Second)
	h.sendAll(ca, wire.TypePushRequest, 10, 3, 8) // leave three outstanding at a
	before := snapshotConn(ca)

	inject := func(build func(hd *wire.Header, a *wire.Addrs) []byte) {
		hd := wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: wire.TypeAck}
		addrs := wire.Addrs{SrcMAC: macOf(h.pb), DstMAC: macOf(h.pa), SrcIP: ipB, DstIP: ipA}
		frame := build(&hd, &addrs)
		if frame == nil {
			h.sealForA(&hd, 0)
			buf := make([]byte, 256)
			n, err := wire.EncodeFrame(buf, &addrs, &hd, nil)
			require.NoError(t, err)
			frame = buf[:n]
		}
		hs := make([]mbufHandle, 1)
		require.Equal(t, 1, h.pool.AllocBulk(hs))
		copy(h.pool.Append(hs[0], len(frame)), frame)
		require.Equal(t, 1, h.pb.Port.TxBurst(0, hs))
		h.a.Poll(h.clk.Now())
		require.NoError(t, h.a.CheckInvariants())
	}
	s0 := h.a.Stats()
	inject(func(hd *wire.Header, a *wire.Addrs) []byte { hd.DestCID = 0xfffff7; return nil })
	inject(func(hd *wire.Header, a *wire.Addrs) []byte { hd.DestCID = ca.LocalCID() ^ 0x800000; return nil })
	inject(func(hd *wire.Header, a *wire.Addrs) []byte {
		hd.ReqEBSN, hd.DataEBSN = before.tx[0].nsn+5, before.tx[1].bsn
		return nil
	}) // ACK beyond NSN
	inject(func(hd *wire.Header, a *wire.Addrs) []byte {
		hd.Type = wire.TypeExtendedAck
		hd.ReqEBSN, hd.DataEBSN = before.tx[0].bsn, before.tx[1].bsn
		hd.Ack.ReqBitmap.Set(100) // never sent
		return nil
	})
	inject(func(hd *wire.Header, a *wire.Addrs) []byte {
		buf := make([]byte, 256)
		n, _ := wire.EncodeFrame(buf, a, hd, nil)
		buf[n-10] ^= 0x40 // corrupt: bad checksum
		return buf[:n]
	})
	inject(func(hd *wire.Header, a *wire.Addrs) []byte { return []byte{1, 2, 3} })
	inject(func(hd *wire.Header, a *wire.Addrs) []byte { a.DstPort = 9; return nil })
	inject(func(hd *wire.Header, a *wire.Addrs) []byte {
		hd.Type = wire.TypePushRequest
		hd.PSN = before.rx[0].bsn + 5000 // far past the receive window
		hd.ReqEBSN, hd.DataEBSN = before.tx[0].bsn, before.tx[1].bsn
		return nil
	})
	s := h.a.Stats()
	require.Equal(t, s0.RxUnknownCID+1, s.RxUnknownCID)
	require.Equal(t, s0.RxStaleCID+1, s.RxStaleCID)
	require.Equal(t, s0.AckForged+2, s.AckForged)
	require.Equal(t, s0.RxBadChecksum+1, s.RxBadChecksum)
	require.Equal(t, s0.RxNotTransport+1, s.RxNotTransport)
	require.Equal(t, s0.RxNotForUs+1, s.RxNotForUs)
	require.Equal(t, s0.RxOutOfWindow+1, s.RxOutOfWindow)
	after := snapshotConn(ca)
	require.Equal(t, before.tx, after.tx, "transmit windows untouched")
	require.Equal(t, before.rx, after.rx, "receive windows untouched")
	require.Equal(t, 3, h.a.Outstanding())
	h.run(h.quiet, time.Second)
	require.Equal(t, StateEstablished, cb.State())
}

type connSnapshot struct {
	tx [2]struct{ bsn, nsn, outstanding uint32 }
	rx [2]struct{ bsn uint32 }
}

func snapshotConn(h *Conn) connSnapshot {
	var s connSnapshot
	c := h.live()
	for k := range 2 {
		s.tx[k].bsn, s.tx[k].nsn, s.tx[k].outstanding = c.tx[k].bsn, c.tx[k].nsn, c.tx[k].outstanding
		s.rx[k].bsn = c.rx[k].bsn
	}
	return s
}

func TestStaleCIDAfterSlotReuse(t *testing.T) {
	h := newHarness(t, func(a, b *Options) {
		a.MaxConns, b.MaxConns = 1, 1
		a.CloseLinger = time.Millisecond
		b.CloseLinger = time.Millisecond
	})
	ca, _ := h.connect()
	old := ca.LocalCID()
	require.NoError(t, ca.Close())
	h.run(func() bool { return h.a.Conns() == 0 && h.b.Conns() == 0 }, time.Second)
	h.evB = nil
	ca2, _ := h.connect()
	require.NotEqual(t, old, ca2.LocalCID(), "the slot comes back under a new generation")
	require.Equal(t, h.a.layout.index(old), h.a.layout.index(ca2.LocalCID()))
	_, err := ca.Send(SendHeader{Type: wire.TypePushRequest}, nil)
	require.ErrorIs(t, err, ErrClosed, "the old handle does not reach the new connection")
	require.Equal(t, StateClosed, ca.State())
}

func TestStopReleasesEverything(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	h.pa.tap = func(*wire.Frame) int { return 0 }
	h.sendAll(ca, wire.TypePushRequest, 0, 50, 100)
	h.poll()
	require.NotZero(t, h.a.Outstanding())
	h.a.Stop(h.clk.Now())
	h.b.Stop(h.clk.Now())
	require.Equal(t, StateFailed, ca.State())
	require.True(t, errors.Is(ca.Err(), ErrStopped))
	require.Equal(t, 0, h.pool.InUse())
	require.Zero(t, h.a.Poll(h.clk.Now()+clock.Time(time.Second)))
}

// stingyPort accepts at most one frame per TxBurst.
type stingyPort struct{ *tapPort }

func (p stingyPort) TxBurst(q int, hs []mbufHandle) int {
	return p.tapPort.TxBurst(q, hs[:min(len(hs), 1)])
}

func TestRefusedFramesAreRetriedNotLost(t *testing.T) {
	h := newHarness(t, func(a, b *Options) {
		a.Port = stingyPort{a.Port.(*tapPort)}
	})
	ca, _ := h.connect()
	psns := h.sendAll(ca, wire.TypePushRequest, 0, 100, 32)
	h.run(func() bool { return len(h.gotB) == 100 && h.quiet() }, time.Second)
	require.Len(t, psns, 100)
	for i, d := range h.gotB {
		require.Equal(t, uint64(i), d.seq)
	}
	s := h.a.Stats()
	require.NotZero(t, s.TxRefused)
	require.Zero(t, s.TxRetransmit+s.TxEarlyRetransmit, "refused frames wait in the endpoint, they are not lost")
}

func TestIPv6AndNoUDPChecksum(t *testing.T) {
	t.Run("ipv6", func(t *testing.T) {
		a6, b6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
		h := newHarness(t, func(a, b *Options) { a.LocalIP, b.LocalIP = a6, b6 })
		ca, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: b6})
		require.NoError(t, err)
		h.run(func() bool { return ca.State() == StateEstablished && h.b.Conns() == 1 }, time.Second)
		h.pa.tap = func(f *wire.Frame) int {
			if f.Header.PSN%5 == 0 && f.Header.Retry == 0 && f.Header.Type == wire.TypePullRequest {
				return 0
			}
			return 1
		}
		h.sendAll(ca, wire.TypePullRequest, 0, 100, 300)
		h.run(func() bool { return len(h.gotB) == 100 && h.quiet() }, time.Second)
		require.Zero(t, h.b.Stats().RxBadChecksum)
		require.NotZero(t, h.a.Stats().TxRetransmit+h.a.Stats().TxEarlyRetransmit, "patched resends carry valid IPv6 checksums")
	})
	t.Run("ipv4 without checksum", func(t *testing.T) {
		h := newHarness(t, func(a, b *Options) { a.NoUDPChecksum, b.NoUDPChecksum = true, true })
		ca, _ := h.connect()
		h.sendAll(ca, wire.TypePullRequest, 0, 50, 100)
		h.run(func() bool { return len(h.gotB) == 50 && h.quiet() }, time.Second)
		require.Zero(t, h.b.Stats().RxBadChecksum)
	})
}

func TestAbort(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	h.pa.tap = func(*wire.Frame) int { return 0 }
	h.sendAll(ca, wire.TypePushRequest, 0, 5, 10)
	h.poll()
	ca.Abort()
	require.Equal(t, StateFailed, ca.State())
	require.ErrorIs(t, ca.Err(), ErrAborted)
	require.Equal(t, 0, h.a.Outstanding())
	require.Equal(t, 0, h.a.Conns())
	ca.Abort()
	require.Equal(t, StateEstablished, cb.State(), "the peer is not told")
}

func TestStablePayloadResentByReference(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	var got [][]byte
	setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		got = append(got, append([]byte(nil), p...))
		return Accept
	})
	firsts := map[uint32]bool{}
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type != wire.TypePushUnsolicitedData || firsts[f.Header.PSN] {
			return 1
		}
		firsts[f.Header.PSN] = true
		if f.Header.PSN%3 == 0 {
			return 0 // every third packet only arrives resent
		}
		return 1
	}
	// Sizes below and above the minimum frame's padding, odd and even.
	sizes := []int{1, 7, 8, 17, 30, 64, 333, 1000, 1401}
	var want [][]byte
	for i := range 45 {
		p := payload(uint64(i), sizes[i%len(sizes)])[:sizes[i%len(sizes)]]
		want = append(want, p)
		for {
			_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i), PayloadStable: true}, p)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, ErrBusy)
			h.poll()
		}
	}
	h.run(func() bool { return len(got) == len(want) && h.quiet() }, time.Second)
	require.ElementsMatch(t, want, got, "every payload arrives byte for byte, resent ones included")
	require.NotZero(t, h.a.Stats().TxRetransmit+h.a.Stats().TxEarlyRetransmit)
	require.Zero(t, h.b.Stats().RxBadChecksum)
}
