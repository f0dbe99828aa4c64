package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/fabric"
)

// TestAddFabricMovesFrames: a fabric between two null: ports carries
// frames both ways, and after Stop (which closes the fabric, freeing what
// it delays) every frame is back in the pool.
func TestAddFabricMovesFrames(t *testing.T) {
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: t.Name(), Frames: 8192},
		Ports:  []string{"null:", "null:"},
		Lcores: unpinned(1),
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep},
	})
	require.NoError(t, err)
	prof, err := fabric.ParseProfile("loss=1%,delay=50us")
	require.NoError(t, err)
	fab, err := p.AddFabric(app.FabricOptions{A: 0, B: 1, AtoB: prof, BtoA: prof, Seed: 1, TransportPort: 5140})
	require.NoError(t, err)
	require.NoError(t, p.Start())
	moved := func() bool { st := fab.Stats(); return st.AtoB.Sent > 10000 && st.BtoA.Sent > 10000 }
	_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Period: time.Millisecond, Done: moved})
	require.NoError(t, err)
	require.NoError(t, p.Stop())
	require.True(t, moved(), "frames crossed both ways")
	require.NotZero(t, fab.Stats().AtoB.LossRandom, "the profile applied")
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}

// TestAddFabricRefusesBadOptions: a port or loop that is not the
// pipeline's is refused naming the option.
func TestAddFabricRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		field string
		o     app.FabricOptions
	}{
		{"A", app.FabricOptions{A: 2, B: 1}},
		{"B", app.FabricOptions{A: 0, B: -1}},
		{"Loop", app.FabricOptions{A: 0, B: 1, Loop: 1}},
	} {
		p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Ports: []string{"null:", "null:"}, Lcores: unpinned(1)})
		require.NoError(t, err)
		_, err = p.AddFabric(tc.o)
		var fe *app.FieldError
		require.True(t, errors.As(err, &fe), "%v", err)
		require.Equal(t, tc.field, fe.Field())
		require.NoError(t, p.Stop())
	}
}
