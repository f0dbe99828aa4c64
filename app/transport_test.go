package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
)

// TestTransportInitiatorToTarget: a target and an initiator on the two
// ends of a mem pair, each on its own loop, complete a counted workload of
// pushes and pulls with the right bytes, and after Stop every frame is
// back in the pool.
// TestTransportInitiatorToTarget: an initiator's workload against a target
// over mem ports completes byte-exact; with GlobalQPNs on both ends
// (docs/qp-translation.md) every packet also goes through each endpoint's
// QP-translation CAM and nothing is dropped for a stale or foreign QPN.
func TestTransportInitiatorToTarget(t *testing.T) {
	for _, qpns := range []bool{false, true} {
		t.Run(fmt.Sprintf("global-qpns=%v", qpns), func(t *testing.T) { testInitiatorToTarget(t, qpns) })
	}
}

func testInitiatorToTarget(t *testing.T, qpns bool) {
	const count = 2000
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: t.Name(), Frames: 8192},
		Ports:  []string{"mem:tt/0", "mem:tt/1"},
		Lcores: unpinned(2),
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep},
		Clock:  clock.NewReal(),
	})
	require.NoError(t, err)
	sizes := []int{64, 4096}
	targetIP, initIP := netip.MustParseAddr("198.18.0.6"), netip.MustParseAddr("198.18.0.5")
	tgt, err := p.AddTransport(app.TransportOptions{Role: "target", Port: 1, Loop: 1, LocalIP: targetIP, Window: 16, Sizes: sizes, Seed: 1, GlobalQPNs: qpns})
	require.NoError(t, err)
	require.Nil(t, tgt.Load)
	require.NotZero(t, tgt.Region.Len, "the target registered its region")
	ini, err := p.AddTransport(app.TransportOptions{Role: "initiator", Port: 0, Loop: 0, LocalIP: initIP, Window: 16, Sizes: sizes,
		RegionKey: tgt.Region.Key, Peer: rt.PeerAddr{MAC: [6]byte(p.Port(1).Info().MAC), IP: targetIP}, Conns: 2, PullEvery: 4, Count: count, Seed: 2, GlobalQPNs: qpns})
	require.NoError(t, err)
	require.NotNil(t, ini.Load)
	require.NoError(t, p.Start())
	done := func() bool { s := ini.Load.Stats(); return s.Completed+s.Failed >= count }
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Period: time.Millisecond, Done: done})
	require.NoError(t, err)
	require.True(t, ini.Drain(), "every outstanding operation completed")
	require.True(t, tgt.Drain(), "a target has nothing to drain")
	require.NoError(t, p.Stop())
	ls := ini.Load.Stats()
	require.Equal(t, uint64(count), ls.Completed, "every operation completed")
	require.Zero(t, ls.Failed+ls.BadData)
	pushes, wrong := tgt.Pushes()
	require.NotZero(t, pushes, "the target checked pushes")
	require.Zero(t, wrong)
	for name, q := range map[string]rt.QPNStats{"initiator": ini.Endpoint.QPNStats(), "target": tgt.Endpoint.QPNStats()} {
		if qpns {
			require.NotZero(t, q.CAM.Translated, "%s: packets went through the CAM", name)
		} else {
			require.Zero(t, q.CAM.Translated, "%s: no CAM without GlobalQPNs", name)
		}
		require.Zero(t, q.DropRetired+q.DropUnknown+q.DropMisrouted+q.DropSource+q.DropMissing, "%s: %+v", name, q)
	}
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}

// TestAddTransportRefusesBadOptions: a bad role, window or port is refused
// naming the option, and so is a pipeline without a clock.
func TestAddTransportRefusesBadOptions(t *testing.T) {
	ok := app.TransportOptions{Role: "target", Window: 4, Sizes: []int{64}, LocalIP: netip.MustParseAddr("198.18.0.6")}
	for _, tc := range []struct {
		field   string
		noClock bool
		edit    func(o *app.TransportOptions)
	}{
		{"Role", false, func(o *app.TransportOptions) { o.Role = "server" }},
		{"Window", false, func(o *app.TransportOptions) { o.Window = 0 }},
		{"Port", false, func(o *app.TransportOptions) { o.Port = 3 }},
		{"Sizes", false, func(o *app.TransportOptions) { o.Sizes = nil }},
		{"Clock", true, func(*app.TransportOptions) {}},
	} {
		opts := app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Ports: []string{"null:"}, Lcores: unpinned(1)}
		if !tc.noClock {
			opts.Clock = clock.NewReal()
		}
		p, err := app.New(opts)
		require.NoError(t, err)
		o := ok
		tc.edit(&o)
		_, err = p.AddTransport(o)
		var fe *app.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", tc.field, err)
		require.Equal(t, tc.field, fe.Field())
		require.NoError(t, p.Stop())
	}
}

// TestInitiatorSizedToItsWindow: an initiator's endpoint holds twice its
// window and Sends in progress (at least app.InitiatorMinOps), not txn's
// default of 4096: its reorder engine's table stays as small as the work
// it has. The post after that is refused for now (txn.ErrBusy).
func TestInitiatorSizedToItsWindow(t *testing.T) {
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: t.Name(), Frames: 4096},
		Ports:  []string{"mem:iw/0", "mem:iw/1"},
		Lcores: unpinned(1),
		Clock:  clock.NewReal(),
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Stop()) }()
	const window, sends = 40, 8
	ini, err := p.AddTransport(app.TransportOptions{Role: "initiator", LocalIP: netip.MustParseAddr("198.18.0.5"), Window: window, Sends: sends, Sizes: []int{64},
		RegionKey: 1, Peer: rt.PeerAddr{MAC: [6]byte{2, 0, 0, 0, 0, 9}, IP: netip.MustParseAddr("198.18.0.6")}, Conns: 1})
	require.NoError(t, err)
	local, err := ini.Endpoint.Register(make([]byte, 64), 0)
	require.NoError(t, err)
	c := ini.Load.Conns()[0]
	// Nothing runs: every post waits for the connection, holding its
	// transaction.
	op := txn.Op{Local: local, Len: 64, Remote: wire.RegionRef{Key: 1}}
	for i := range 2 * (window + sends) {
		_, err := c.Push(op)
		require.NoError(t, err, "post %d", i)
	}
	_, err = c.Push(op)
	require.ErrorIs(t, err, txn.ErrBusy)
}
