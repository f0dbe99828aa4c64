package rt

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

func qpnHarness(t *testing.T) *harness {
	return newHarness(t, func(a, b *Options) {
		a.QPN = QPNOptions{Enabled: true}
		b.QPN = QPNOptions{Enabled: true, Start: qpx.LastQPN} // b's numbers cross the wrap
	})
}

// inject sends a copy of frame f, re-encoded after edit, from a's port.
func (h *harness) inject(f wire.Frame, edit func(hd *wire.Header)) {
	h.t.Helper()
	edit(&f.Header)
	hs := make([]mbuf.Handle, 1)
	require.Equal(h.t, 1, h.pool.AllocBulk(hs))
	b := h.pool.Append(hs[0], 1024)
	n, err := wire.EncodeFrame(b, &f.Addrs, &f.Header, f.Payload)
	require.NoError(h.t, err)
	require.True(h.t, h.pool.SetLen(hs[0], n))
	require.Equal(h.t, 1, h.pa.Port.TxBurst(0, hs))
}

// TestQPNSetupAndTraffic: both ends learn each other's global number in
// the setup, every reliable packet carries both, the host finds the
// connection by its number through the CAM, and closing retires it.
func TestQPNSetupAndTraffic(t *testing.T) {
	h := qpnHarness(t)
	var seen []wire.Ext
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type.Window() != wire.WindowNone || f.Header.Type == wire.TypeConnOpen {
			seen = append(seen, f.Header.Ext)
		}
		return 1
	}
	ca, cb := h.connect()
	require.NotZero(t, ca.QPN())
	require.Equal(t, uint32(qpx.LastQPN), cb.QPN(), "b's rotation starts where its options say")
	require.Equal(t, cb.QPN(), ca.PeerQPN())
	require.Equal(t, ca.QPN(), cb.PeerQPN())
	require.Same(t, ca, h.a.ConnByQPN(ca.QPN()))
	require.Same(t, cb, h.b.ConnByQPN(cb.QPN()))
	require.Nil(t, h.a.ConnByQPN(cb.QPN()))

	h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 20, 100)
	h.run(func() bool { return len(h.gotB) == 20 && h.quiet() }, time.Second)
	require.NotEmpty(t, seen)
	require.Equal(t, wire.ExtQPN, seen[0].Present&wire.ExtQPN, "ConnOpen carries our number")
	require.Equal(t, ca.QPN(), seen[0].SrcQPN)
	for _, x := range seen[1:] {
		x.Present, x.Seal = x.Present&^wire.ExtSeal, 0 // the integrity tag: seal.go's tests
		require.Equal(t, wire.Ext{Present: wire.ExtQPN, DstQPN: cb.QPN(), SrcQPN: ca.QPN()}, x)
	}
	s := h.b.QPNStats()
	require.Zero(t, s.Dropped(), "%v", s)
	require.GreaterOrEqual(t, s.CAM.Translated, uint64(20))

	qa, qb := ca.QPN(), cb.QPN()
	require.NoError(t, ca.Close())
	h.run(func() bool { return ca.State() == StateClosed && cb.State() == StateClosed }, time.Second)
	h.idle(time.Second) // the slots linger, then free
	require.Equal(t, qa, ca.QPN(), "a closed connection remembers its retired number")
	require.Nil(t, h.a.ConnByQPN(qa))
	require.Nil(t, h.b.ConnByQPN(qb))
	ca2, cb2 := h.connect()
	require.NotEqual(t, qa, ca2.QPN(), "a new connection never gets a retired number")
	require.NotEqual(t, qb, cb2.QPN())
	require.Equal(t, uint32(qpx.FirstQPN), cb2.QPN(), "b's rotation wrapped from LastQPN to FirstQPN")
	require.Equal(t, uint64(2), h.b.QPNStats().CAM.Opened)
}

// TestQPNDropsStaleAndMisroutedPackets: a packet whose CID names a live
// connection but whose destination QPN is retired (as after a generation
// wrap), names another connection, is unknown, comes from another source
// QP, or carries no QPN is dropped and counted, never delivered.
func TestQPNDropsStaleAndMisroutedPackets(t *testing.T) {
	h := qpnHarness(t)
	var data []wire.Frame
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushUnsolicitedData {
			cp := *f
			cp.Payload = append([]byte(nil), f.Payload...)
			data = append(data, cp)
		}
		return 1
	}
	ca, cb := h.connect()
	h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 1, 64)
	h.run(func() bool { return len(h.gotB) == 1 && h.quiet() }, time.Second)
	old := cb.QPN()
	require.NoError(t, ca.Close())
	h.run(func() bool { return ca.State() == StateClosed && cb.State() == StateClosed }, time.Second)
	h.idle(time.Second)

	ca2, cb2 := h.connect()
	ca3, cb3 := h.connect()
	require.Len(t, data, 1)
	stale := data[0]
	delivered := len(h.gotB)
	for _, c := range []struct {
		name string
		edit func(hd *wire.Header)
	}{
		{"retired", func(hd *wire.Header) { hd.DestCID = cb2.LocalCID(); hd.Ext.DstQPN = old }},
		{"misrouted", func(hd *wire.Header) { hd.DestCID = cb2.LocalCID(); hd.Ext.DstQPN = cb3.QPN() }},
		{"unknown", func(hd *wire.Header) { hd.DestCID = cb2.LocalCID(); hd.Ext.DstQPN = 0x123456 }},
		{"source", func(hd *wire.Header) {
			hd.DestCID = cb2.LocalCID()
			hd.Ext.DstQPN, hd.Ext.SrcQPN = cb2.QPN(), ca3.QPN()
		}},
		{"missing", func(hd *wire.Header) { hd.DestCID = cb2.LocalCID(); hd.Ext.Present &^= wire.ExtQPN }},
	} {
		h.inject(stale, c.edit)
		h.idle(time.Millisecond)
		require.Equal(t, delivered, len(h.gotB), "%s: a bad QPN must never be delivered", c.name)
	}
	s := h.b.QPNStats()
	require.Equal(t, QPNStats{CAM: s.CAM, DropRetired: 1, DropUnknown: 1, DropMisrouted: 1, DropSource: 1, DropMissing: 1}, s)
	require.Equal(t, StateEstablished, ca2.State(), "the live connections are untouched")
	require.Equal(t, StateEstablished, cb3.State())
}

// TestQPNNeedsBothEnds: an initiator with QPNs cannot set up with a target
// without them (the ConnAccept carries no number): the open times out and
// the missing number is counted.
func TestQPNNeedsBothEnds(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.QPN = QPNOptions{Enabled: true} })
	ca, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(t, err)
	h.run(func() bool { return ca.State() == StateFailed }, time.Minute)
	require.ErrorIs(t, ca.Err(), ErrOpenTimeout)
	require.NotZero(t, h.a.QPNStats().DropMissing)
	require.Zero(t, h.b.QPNStats(), "b has no QPN machinery")
}

// TestQPNPropertyChurn opens and closes connections at random with data
// in flight, and replays old data frames to live connections as if their
// CID had wrapped around to a live one (the one case the CID generation
// cannot catch): no replayed frame is ever delivered, each is counted
// once, as retired (its connection is gone) or misrouted (its number is
// another live connection's), and the counters are exactly that.
// PEREGRINE_SEEDS sets the seeds (default 200, 40 under -short).
func TestQPNPropertyChurn(t *testing.T) {
	if seed, ok := testenv.Replay(t); ok {
		qpnChurn(t, seed)
		return
	}
	n := testenv.Seeds{Full: 200, Short: 40}.N(t)
	var retired, misrouted uint64
	for seed := range n {
		if !t.Run(strconv.Itoa(seed), func(t *testing.T) {
			r, m := qpnChurn(t, uint64(seed))
			retired += r
			misrouted += m
		}) {
			t.Fatalf("seed %d failed (go test ./core/rt -run TestQPNPropertyChurn -seed=%d replays it)", seed, seed)
		}
	}
	t.Logf("%d seeds: %d replayed frames for retired QPNs, %d for other live QPNs, all dropped", n, retired, misrouted)
	require.NotZero(t, retired, "the suite must exercise retired numbers")
	require.NotZero(t, misrouted, "the suite must exercise misrouted numbers")
}

func qpnChurn(t *testing.T, seed uint64) (retired, misrouted uint64) {
	r := rand.New(rand.NewPCG(seed, 0x9b9))
	startB := uint32(0)
	if r.IntN(2) == 0 {
		startB = qpx.LastQPN - uint32(r.IntN(8))
	}
	h := newHarness(t, func(a, b *Options) {
		a.QPN = QPNOptions{Enabled: true}
		b.QPN = QPNOptions{Enabled: true, Start: startB}
		a.MaxConns, b.MaxConns = 4, 4
		a.CloseLinger, b.CloseLinger = time.Millisecond, time.Millisecond
		a.Seed, b.Seed = seed, seed+1
	})
	h.check = false
	type sent struct {
		f   wire.Frame
		dst uint32 // the QPN it was sent to
	}
	var captured []sent
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushUnsolicitedData {
			cp := *f
			cp.Payload = append([]byte(nil), f.Payload...)
			captured = append(captured, sent{cp, f.Header.Ext.DstQPN})
		}
		return 1
	}
	type pairConn struct{ a, b *Conn }
	var live []pairConn
	var wantRetired, wantMisrouted uint64
	for range 12 + r.IntN(12) {
		switch op := r.IntN(4); {
		case op == 0 && len(live) < 3:
			ca, cb := h.connect()
			live = append(live, pairConn{ca, cb})
		case op == 1 && len(live) > 0:
			i := r.IntN(len(live))
			c := live[i]
			live = append(live[:i], live[i+1:]...)
			require.NoError(t, c.a.Close())
			h.run(func() bool { return c.a.State() == StateClosed && c.b.State() == StateClosed }, time.Second)
			h.idle(10 * time.Millisecond) // the slots linger, then free
		case op == 2 && len(live) > 0:
			c := live[r.IntN(len(live))]
			before := len(h.gotB)
			h.sendAll(c.a, wire.TypePushUnsolicitedData, uint64(len(captured)), 1+r.IntN(3), 64)
			h.run(func() bool { return len(h.gotB) > before && h.quiet() }, time.Second)
		case op == 3 && len(live) > 0 && len(captured) > 0:
			old := captured[r.IntN(len(captured))]
			c := live[r.IntN(len(live))]
			if old.dst == c.b.QPN() {
				continue // its own connection: an ordinary duplicate
			}
			if h.b.ConnByQPN(old.dst) != nil {
				wantMisrouted++
			} else {
				wantRetired++
			}
			delivered := len(h.gotB)
			h.inject(old.f, func(hd *wire.Header) { hd.DestCID = c.b.LocalCID() })
			h.idle(time.Millisecond)
			require.Equal(t, delivered, len(h.gotB), "seed %d: a replayed frame for QPN %#x reached QP %#x", seed, old.dst, c.b.QPN())
		}
	}
	s := h.b.QPNStats()
	require.Equal(t, wantRetired, s.DropRetired, "seed %d: %v", seed, s)
	require.Equal(t, wantMisrouted, s.DropMisrouted, "seed %d: %v", seed, s)
	require.Zero(t, s.DropUnknown+s.DropSource+s.DropMissing, "seed %d: %v", seed, s)
	require.Zero(t, h.a.QPNStats().Dropped(), "seed %d", seed)
	return wantRetired, wantMisrouted
}
