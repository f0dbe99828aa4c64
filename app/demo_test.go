package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/mbuf"
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
