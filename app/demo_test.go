package app_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/fabric"
)

// TestForwardDemoDelivers: the forward demo on two loops sends frames,
// drains, and the sink receives every one in order; after Stop every
// frame is back in the pool.
func TestForwardDemoDelivers(t *testing.T) {
	p := newPipeline(t, 2, app.ForwardDemoPorts()...)
	d, err := p.AddForwardDemo(app.ForwardDemoOptions{Burst: 32, Sizes: traffic.FixedSize(64), Rate: 1e6})
	require.NoError(t, err)
	require.NoError(t, p.Start())
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Period: time.Millisecond,
		Done: func() bool { return d.Sink.Frames() >= 10000 }})
	require.NoError(t, err)
	require.True(t, d.Drain(bound), "every frame sent reached the sink")
	require.NoError(t, p.Stop())
	sent, st := d.Gen.Stats().Sent, d.Sink.Stats()
	require.Equal(t, sent, st.Received)
	require.Equal(t, sent, st.InOrder)
	require.Equal(t, sent, d.Fwd.Stats().Tx)
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}

// TestForwardDemoNeedsFourPorts: fewer than four ports is refused naming
// the option.
func TestForwardDemoNeedsFourPorts(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Ports: []string{"null:", "null:"}, Lcores: unpinned(1)})
	require.NoError(t, err)
	_, err = p.AddForwardDemo(app.ForwardDemoOptions{Burst: 32, Sizes: traffic.FixedSize(64)})
	var fe *app.FieldError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "Ports", fe.Field())
	require.NoError(t, p.Stop())
}

// TestTransportDemoCompletes: the transport demo over fabric.Link's mem
// pairs with a lossy fabric completes operations with the right bytes,
// drains, and after Stop every frame is back in the pool.
func TestTransportDemoCompletes(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 16384}, Lcores: unpinned(2),
		Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep}, Clock: clock.NewReal()})
	require.NoError(t, err)
	prof, err := fabric.ParseProfile("loss=1%")
	require.NoError(t, err)
	d, err := p.AddTransportDemo(app.TransportDemoOptions{Profile: prof, Seed: 1, Window: 8,
		InitiatorIP: netip.MustParseAddr("198.18.0.1"), TargetIP: netip.MustParseAddr("198.18.0.6"),
		CongestionTarget: time.Millisecond, MinRTO: 10 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, p.Start())
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Period: time.Millisecond,
		Done: func() bool { return d.Load.Stats().Completed >= 500 }})
	require.NoError(t, err)
	require.True(t, d.Drain(bound), "every outstanding operation completed")
	require.NoError(t, p.Stop())
	ls := d.Load.Stats()
	require.Zero(t, ls.Failed+ls.BadData+ls.OutOfOrder)
	require.Equal(t, ls.Posted, ls.Completed)
	require.NotZero(t, ls.Checked, "the target checked pushes")
	ss := d.Sends.Stats()
	require.NotZero(t, ss.Completed, "Sends completed")
	require.Zero(t, ss.Failed+ss.RecvFailed+ss.BadData, "every Send landed byte-exact in its WQE")
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}

// TestTransportDemoRefusesBadPorts: two ports (neither four nor none) is
// refused naming the option.
func TestTransportDemoRefusesBadPorts(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Ports: []string{"null:", "null:"}, Lcores: unpinned(1), Clock: clock.NewReal()})
	require.NoError(t, err)
	_, err = p.AddTransportDemo(app.TransportDemoOptions{Window: 4})
	var fe *app.FieldError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "Ports", fe.Field())
	require.NoError(t, p.Stop())
}
