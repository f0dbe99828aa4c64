package sim

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// Scenario tests in the style of Falcon's own: each scripts the network
// with a Tap hook to provoke one mechanism and checks its effect.

type del struct {
	psn uint32
	win wire.Window
	seq uint64
	at  clock.Time
}

type scen struct {
	t      *testing.T
	s      *Sim
	ca, cb *rt.Conn
	gotA   []del
	gotB   []del
	evA    []rt.Event
	evB    []rt.Event
}

func newScen(t *testing.T, tweak func(*Config)) *scen {
	t.Helper()
	cfg := Config{Seed: 1, Scripted: true, TapDelay: 5 * time.Microsecond, Check: 2, Start: 1_000_000, Frames: 4096}
	cfg.A = rt.Options{MaxConns: 4}
	cfg.B = rt.Options{MaxConns: 4}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	x := &scen{t: t, s: s}
	t.Cleanup(func() {
		require.NoError(t, s.Close())
	})
	rec := func(got *[]del) func(*rt.Conn, *wire.Header, []byte) rt.Verdict {
		return func(c *rt.Conn, h *wire.Header, p []byte) rt.Verdict {
			d := del{psn: h.PSN, win: h.Window(), at: s.Clock.Now()}
			if len(p) >= 8 {
				d.seq = binary.BigEndian.Uint64(p)
			}
			*got = append(*got, d)
			return rt.Accept
		}
	}
	s.A.SetULP(&testULP{deliver: rec(&x.gotA), event: func(ev rt.Event) { x.evA = append(x.evA, ev) }})
	s.B.SetULP(&testULP{deliver: rec(&x.gotB), event: func(ev rt.Event) { x.evB = append(x.evB, ev) }})
	return x
}

// testULP is a ULP of functions: packets to deliver, events to event.
type testULP struct {
	deliver func(*rt.Conn, *wire.Header, []byte) rt.Verdict
	event   func(rt.Event)
}

func (u *testULP) Deliver(c *rt.Conn, h *wire.Header, p []byte) rt.Verdict { return u.deliver(c, h, p) }
func (u *testULP) Acked(*rt.Conn, wire.Window, uint32, uint64)             {}
func (u *testULP) Event(ev rt.Event)                                       { u.event(ev) }

func (x *scen) run(cond func() bool, limit time.Duration) {
	x.t.Helper()
	require.NoError(x.t, x.s.Run(cond, limit))
}

func (x *scen) connect() {
	x.t.Helper()
	ca, err := x.s.A.Open(x.s.PeerB())
	require.NoError(x.t, err)
	x.ca = ca
	x.run(func() bool {
		for _, ev := range x.evB {
			if ev.Kind == rt.EventEstablished {
				x.cb = ev.Conn
			}
		}
		return ca.State() == rt.StateEstablished && x.cb != nil
	}, time.Second)
}

func seqPayload(seq uint64) []byte {
	p := make([]byte, 32)
	binary.BigEndian.PutUint64(p, seq)
	return p
}

// send sends n packets of type typ on c (stepping the simulation while
// busy) and returns their PSNs.
func (x *scen) send(c *rt.Conn, typ wire.Type, first uint64, n int) []uint32 {
	x.t.Helper()
	var psns []uint32
	for i := range n {
		for {
			psn, err := c.Send(rt.SendHeader{Type: typ}, seqPayload(first+uint64(i)))
			if err == nil {
				psns = append(psns, psn)
				break
			}
			require.ErrorIs(x.t, err, rt.ErrBusy)
			more, err := x.s.Step()
			require.NoError(x.t, err)
			require.True(x.t, more)
		}
	}
	return psns
}

func (x *scen) quiet() bool { return x.s.A.Outstanding() == 0 && x.s.B.Outstanding() == 0 }

// exactlyOnce checks that got holds each of psns exactly once.
func exactlyOnce(t *testing.T, got []del, psns []uint32) {
	t.Helper()
	count := map[uint32]int{}
	for _, d := range got {
		count[d.psn]++
	}
	for _, p := range psns {
		require.Equal(t, 1, count[p], "PSN %d delivered %d times", p, count[p])
	}
	require.Len(t, got, len(psns))
}

func isData(f *wire.Frame, typ wire.Type) bool { return f != nil && f.Header.Type == typ }

func TestScenarioPSNWrapAround(t *testing.T) {
	start := ^uint32(0) - 20
	x := newScen(t, func(c *Config) {
		for _, o := range []*rt.Options{&c.A, &c.B} {
			o.FixedInitialPSN, o.InitialPSN = true, start
		}
	})
	x.connect()
	// Lose the first transmission of the PSNs on both sides of the wrap.
	lost := map[uint32]bool{^uint32(0) - 1: true, ^uint32(0): true, 0: true, 1: true}
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		if dir == AtoB && isData(f, wire.TypePushRequest) && lost[f.Header.PSN] && f.Header.Retry == 0 {
			return Action{Drop: true}
		}
		return Action{}
	}
	psns := x.send(x.ca, wire.TypePushRequest, 0, 60)
	require.Equal(t, start, psns[0])
	require.Equal(t, uint32(38), psns[59])
	x.run(func() bool { return len(x.gotB) == 60 && x.quiet() }, time.Second)
	exactlyOnce(t, x.gotB, psns)
	ws := x.ca.Window(wire.WindowRequest)
	require.Equal(t, uint32(39), ws.TxBSN)
	require.Equal(t, uint32(39), ws.TxNSN)
	require.Equal(t, uint32(39), x.cb.Window(wire.WindowRequest).RxBSN)
}

func TestScenarioReceiveWindowShift(t *testing.T) {
	x := newScen(t, func(c *Config) { c.A.WindowSize, c.B.WindowSize = 64, 64 })
	x.connect()
	// Hold the base PSN back until the other 63 arrived: the receiver's BSN
	// then jumps across the whole window at once.
	base := x.ca.Window(wire.WindowData).TxNSN
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		if dir == AtoB && isData(f, wire.TypePullData) && f.Header.PSN == base && f.Header.Retry == 0 {
			return Action{Delay: 50 * time.Microsecond}
		}
		return Action{}
	}
	psns := x.send(x.ca, wire.TypePullData, 0, 64)
	x.run(func() bool { return x.cb.Window(wire.WindowData).RxAhead == 63 }, time.Second)
	require.Equal(t, base, x.cb.Window(wire.WindowData).RxBSN, "the base is missing: BSN stays")
	x.run(func() bool { return x.cb.Window(wire.WindowData).RxBSN == base+64 }, time.Second)
	require.Zero(t, x.cb.Window(wire.WindowData).RxAhead, "the window shifted by 64 and cleared its bitmap")
	x.run(x.quiet, time.Second)
	exactlyOnce(t, x.gotB, psns)
	require.Equal(t, base, x.gotB[63].psn, "the held base is delivered last")
}

func TestScenarioDuplicateAndStaleAcks(t *testing.T) {
	x := newScen(t, nil)
	x.connect()
	acks := 0
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		if dir != BtoA || f == nil || (f.Header.Type != wire.TypeAck && f.Header.Type != wire.TypeExtendedAck) {
			return Action{}
		}
		acks++
		switch acks % 3 {
		case 0:
			return Action{Copies: 2} // duplicate ACKs
		case 1:
			return Action{Delay: 40 * time.Microsecond} // overtaken: arrives stale
		}
		return Action{}
	}
	psns := x.send(x.ca, wire.TypePushUnsolicitedData, 0, 300)
	x.run(func() bool { return len(x.gotB) == 300 && x.quiet() }, time.Second)
	exactlyOnce(t, x.gotB, psns)
	st := x.s.A.Stats()
	require.NotZero(t, st.AckStale, "late ACKs are recognized as stale")
	require.Zero(t, st.AckForged)
	require.NoError(t, x.s.A.CheckInvariants())
}

func TestScenarioAckLoss(t *testing.T) {
	x := newScen(t, nil)
	x.connect()
	dropAcks := true
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		if dropAcks && dir == BtoA && f != nil && (f.Header.Type == wire.TypeAck || f.Header.Type == wire.TypeExtendedAck) {
			return Action{Drop: true}
		}
		return Action{}
	}
	psns := x.send(x.ca, wire.TypePushRequest, 0, 20)
	x.run(func() bool { return len(x.gotB) == 20 }, time.Second)
	require.Equal(t, 20, x.ca.Outstanding(wire.WindowRequest), "every ACK was lost")
	// The sender times out and resends; the receiver answers the duplicates
	// at once, and those ACKs get through.
	x.run(func() bool { return x.s.A.Stats().TxRetransmit > 0 }, time.Second)
	dropAcks = false
	x.run(x.quiet, time.Second)
	exactlyOnce(t, x.gotB, psns)
	require.NotZero(t, x.s.B.Stats().RxDuplicate+x.s.B.Stats().RxStalePSN)
}

func TestScenarioRetransmitOfRetransmit(t *testing.T) {
	x := newScen(t, func(c *Config) { c.A.EarlyRetransmitDistance = -1 })
	x.connect()
	var target uint32
	var seen []wire.Header
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		if dir == AtoB && isData(f, wire.TypePullRequest) && f.Header.PSN == target {
			seen = append(seen, f.Header)
			if len(seen) <= 2 {
				return Action{Drop: true}
			}
		}
		return Action{}
	}
	target = x.ca.Window(wire.WindowRequest).TxNSN
	psns := x.send(x.ca, wire.TypePullRequest, 0, 1)
	x.run(func() bool { return len(x.gotB) == 1 && x.quiet() }, time.Second)
	exactlyOnce(t, x.gotB, psns)
	require.Len(t, seen, 3)
	for i, h := range seen {
		require.Equal(t, target, h.PSN, "same PSN every time")
		require.Equal(t, uint8(i), h.Retry)
		require.Equal(t, i > 0, h.Flags.Has(wire.FlagRetransmission))
	}
	// The second resend waited twice as long as the first (backoff).
	require.Equal(t, uint64(2), x.s.A.Stats().TxRetransmit)
}

func TestScenarioEarlyRetransmit(t *testing.T) {
	x := newScen(t, func(c *Config) {
		c.A.EarlyRetransmitDistance = 3
		c.A.MinRTO, c.A.InitialRTO = 5*time.Millisecond, 5*time.Millisecond
		c.B.AckEvery = 1
	})
	x.connect()
	var target uint32
	var lostAt, resentAt clock.Time
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		if dir == AtoB && isData(f, wire.TypePushRequest) && f.Header.PSN == target {
			if f.Header.Retry == 0 {
				lostAt = x.s.Clock.Now()
				return Action{Drop: true}
			}
			resentAt = x.s.Clock.Now()
		}
		return Action{}
	}
	target = x.ca.Window(wire.WindowRequest).TxNSN
	// Warm the RTT estimate a little, then lose one and keep sending.
	psns := x.send(x.ca, wire.TypePushRequest, 0, 10)
	x.run(func() bool { return len(x.gotB) == 9 }, time.Second)
	x.run(func() bool { return resentAt != 0 }, time.Second)
	x.run(func() bool { return len(x.gotB) == 10 && x.quiet() }, time.Second)
	exactlyOnce(t, x.gotB, psns)
	st := x.s.A.Stats()
	require.Equal(t, uint64(1), st.TxEarlyRetransmit)
	require.Zero(t, st.TxRetransmit, "no timer had to fire")
	require.Less(t, resentAt.Sub(lostAt), 5*time.Millisecond, "resent well before the 5ms RTO")
}

func TestScenarioRetryExhaustion(t *testing.T) {
	x := newScen(t, func(c *Config) { c.A.RetryLimit = 4; c.A.MaxRTO = 5 * time.Millisecond })
	x.connect()
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		return Action{Drop: dir == AtoB} // the peer hears nothing more
	}
	x.send(x.ca, wire.TypePushRequest, 0, 5)
	x.run(func() bool { return x.ca.State() == rt.StateFailed }, 10*time.Second)
	require.ErrorIs(t, x.ca.Err(), rt.ErrRetryExhausted)
	var failed []rt.Event
	for _, ev := range x.evA {
		if ev.Kind == rt.EventFailed {
			failed = append(failed, ev)
		}
	}
	require.Len(t, failed, 1)
	require.True(t, errors.Is(failed[0].Err, rt.ErrRetryExhausted))
	st := x.s.A.Stats()
	require.NotZero(t, st.ResyncSent, "a resync was tried before giving up")
	require.Equal(t, 0, x.s.A.Outstanding())
	require.Equal(t, 0, x.s.A.Conns())
}

func TestScenarioOutOfWindowDrops(t *testing.T) {
	x := newScen(t, func(c *Config) {
		c.A.WindowSize, c.A.MaxOutstanding = 256, 256
		c.B.WindowSize = 64
	})
	x.connect()
	base := x.ca.Window(wire.WindowRequest).TxNSN
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		if dir == AtoB && isData(f, wire.TypePushRequest) && f.Header.PSN == base && f.Header.Retry == 0 {
			return Action{Drop: true} // b's window cannot move past the hole
		}
		return Action{}
	}
	psns := x.send(x.ca, wire.TypePushRequest, 0, 200)
	x.run(func() bool { return len(x.gotB) == 200 && x.quiet() }, 5*time.Second)
	exactlyOnce(t, x.gotB, psns)
	st := x.s.B.Stats()
	require.NotZero(t, st.RxOutOfWindow, "PSNs past b's 64-wide window were dropped")
	require.NotZero(t, st.TxExtendedAck)
}

// forge builds a frame from b to a on the connection.
func (x *scen) forge(mut func(h *wire.Header, a *wire.Addrs)) []byte {
	h := wire.Header{Version: wire.Version, DestCID: x.ca.LocalCID(), Type: wire.TypeAck}
	rq, dt := x.ca.Window(wire.WindowRequest), x.ca.Window(wire.WindowData)
	h.ReqEBSN, h.DataEBSN = rq.TxBSN, dt.TxBSN
	a := wire.Addrs{SrcMAC: x.s.PeerB().MAC, DstMAC: x.s.PeerA().MAC, SrcIP: IPB(), DstIP: IPA()}
	mut(&h, &a)
	buf := make([]byte, 512)
	n, err := wire.EncodeFrame(buf, &a, &h, nil)
	require.NoError(x.t, err)
	return buf[:n]
}

// TestScenarioForgedPackets plays a forger who gets past the seal (the
// connection is unsealed, as if the forger held the key): the transport's
// own checks must each catch their packet. Sealed, every one of these is
// dropped before them (core/rt's seal tests).
func TestScenarioForgedPackets(t *testing.T) {
	x := newScen(t, func(c *Config) { c.A.MaxConns = 3; c.A.NoSeal, c.B.NoSeal = true, true })
	x.connect()
	// Leave packets outstanding: b hears nothing for now.
	block := true
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action { return Action{Drop: block && dir == AtoB} }
	x.send(x.ca, wire.TypePushRequest, 0, 5)
	x.s.Poll()
	before := []rt.WindowState{x.ca.Window(wire.WindowRequest), x.ca.Window(wire.WindowData)}
	s0 := x.s.A.Stats()

	inject := func(raw []byte) {
		x.s.Tap.Inject(BtoA, raw)
		require.NoError(t, x.s.Idle(20*time.Microsecond)) // the tap's delay
	}
	inject(x.forge(func(h *wire.Header, a *wire.Addrs) { h.DestCID = 3 | 0x100<<2 }))               // no such slot
	inject(x.forge(func(h *wire.Header, a *wire.Addrs) { h.DestCID = x.ca.LocalCID() ^ 0x400000 })) // stale generation
	inject(x.forge(func(h *wire.Header, a *wire.Addrs) { h.ReqEBSN = before[0].TxNSN + 1 }))        // ACK beyond NSN
	inject(x.forge(func(h *wire.Header, a *wire.Addrs) {
		h.Type = wire.TypeExtendedAck
		h.Ack.DataBitmap.Set(3) // nothing was sent in the data window
	}))
	inject(x.forge(func(h *wire.Header, a *wire.Addrs) { // PSN far out of the receive window
		h.Type = wire.TypePullData
		h.PSN = x.ca.Window(wire.WindowData).RxBSN + 1<<20
	}))
	inject(x.forge(func(h *wire.Header, a *wire.Addrs) { // stale PSN: before the window
		h.Type = wire.TypePullData
		h.PSN = x.ca.Window(wire.WindowData).RxBSN - 1
	}))
	bad := x.forge(func(h *wire.Header, a *wire.Addrs) {})
	bad[len(bad)-1] ^= 1 // corrupted: checksum
	inject(bad)

	st := x.s.A.Stats()
	require.Equal(t, s0.RxUnknownCID+1, st.RxUnknownCID)
	require.Equal(t, s0.RxStaleCID+1, st.RxStaleCID)
	require.Equal(t, s0.AckForged+2, st.AckForged)
	require.Equal(t, s0.RxOutOfWindow+1, st.RxOutOfWindow)
	require.Equal(t, s0.RxStalePSN+1, st.RxStalePSN)
	require.Equal(t, s0.RxBadChecksum+1, st.RxBadChecksum)
	require.Equal(t, s0.RxDelivered, st.RxDelivered, "nothing forged was delivered")
	require.Empty(t, x.gotA)
	after := []rt.WindowState{x.ca.Window(wire.WindowRequest), x.ca.Window(wire.WindowData)}
	require.Equal(t, before, after, "no window changed")
	require.NoError(t, x.s.A.CheckInvariants())

	block = false
	x.run(func() bool { return len(x.gotB) == 5 && x.quiet() }, time.Second)
}

func TestScenarioGracefulCloseUnderLoss(t *testing.T) {
	x := newScen(t, func(c *Config) { c.A.CloseLinger, c.B.CloseLinger = 2*time.Millisecond, 2*time.Millisecond })
	x.connect()
	n := 0
	x.s.Tap.Hook = func(dir Direction, f *wire.Frame, _ []byte) Action {
		n++
		return Action{Drop: n%4 == 0}
	}
	pa := x.send(x.ca, wire.TypePushRequest, 0, 50)
	pb := x.send(x.cb, wire.TypePullData, 100, 50)
	require.NoError(t, x.ca.Close())
	x.run(func() bool { return x.ca.State() == rt.StateClosed && x.cb.State() == rt.StateClosed }, 5*time.Second)
	exactlyOnce(t, x.gotB, pa)
	exactlyOnce(t, x.gotA, pb)
	require.NoError(t, x.s.Idle(10*time.Millisecond))
	require.Zero(t, x.s.A.Conns())
	require.Zero(t, x.s.B.Conns())
}

// The sender's Swift target follows the forward path's length: the fabric
// lowers the TTL by 3 routers towards b and by 1 back, b infers 3 hops from
// each data packet's TTL and echoes them in its ACKs, and a's controller
// takes 3, not the 1 its ACKs themselves crossed.
func TestScenarioHopCountFromTTL(t *testing.T) {
	x := newScen(t, func(c *Config) {
		c.Scripted = false
		c.AtoB = fabric.Profile{Hops: 3, Delay: 5 * time.Microsecond}
		c.BtoA = fabric.Profile{Hops: 1, Delay: 5 * time.Microsecond}
		c.A.Congestion = func() rt.CongestionControl {
			ctl := new(swift.Controller)
			require.NoError(t, ctl.Init(swift.DefaultParams()))
			return ctl
		}
	})
	x.connect()
	ctl := x.ca.Congestion().(*swift.Controller)
	require.Zero(t, ctl.Hops(), "Params.Hops until measured")
	psns := x.send(x.ca, wire.TypePushUnsolicitedData, 0, 64)
	x.run(x.quiet, time.Second)
	exactlyOnce(t, x.gotB, psns)
	require.Equal(t, 3, ctl.Hops())
	p := swift.DefaultParams()
	require.GreaterOrEqual(t, ctl.TargetDelay(), p.BaseTarget+3*p.PerHopTarget)
	require.EqualValues(t, 3, x.ca.Stats().PathHops)
	require.NotZero(t, ctl.Stats().RTTSamples)
}
