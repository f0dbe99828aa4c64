package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// TestAddForwardersMovesFrames: each mode over two null: ports (which
// hand out frames on receive and accept every send) places one stage per
// queue, moves frames, and leaves every frame back in the pool after Stop.
func TestAddForwardersMovesFrames(t *testing.T) {
	for _, mode := range []string{"io", "macswap", "rxonly", "txonly"} {
		t.Run(mode, func(t *testing.T) {
			p, err := app.New(app.Options{
				Pool:   mbuf.Options{Name: t.Name(), Frames: 4096},
				Ports:  []string{"null:", "null:"},
				Lcores: unpinned(2),
				Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep},
			})
			require.NoError(t, err)
			fw, err := p.AddForwarders(app.ForwarderOptions{Mode: mode, Burst: 32, Sizes: traffic.FixedSize(64), Flows: 1})
			require.NoError(t, err)
			require.Len(t, fw.Stages, 2, "one stage per queue of each port")
			require.NoError(t, p.Start())
			moved := func() bool {
				var n uint64
				for _, st := range fw.Stages {
					switch s := st.(type) {
					case *fwd.Forwarder:
						n += s.Stats().Rx
					case *traffic.Generator:
						n += s.Stats().Sent
					}
				}
				return n >= 10000
			}
			_, _, err = p.Run(context.Background(), app.RunOptions{Duration: bound, Period: time.Millisecond, Done: moved})
			require.NoError(t, err)
			require.NoError(t, p.Stop())
			require.True(t, moved(), "frames moved")
			require.Zero(t, fw.Dropped(), "null: refuses nothing")
			require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
		})
	}
}

// TestAddForwardersRefusesBadMode: a mode that is none of testpmd's is
// refused naming the option, before any port opens.
func TestAddForwardersRefusesBadMode(t *testing.T) {
	err := app.ValidateForwarders(app.ForwarderOptions{Mode: "bogus"})
	var fe *app.FieldError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "Mode", fe.Field())
	require.ErrorContains(t, err, "txonly", "the error lists every mode")

	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 1024}, Ports: []string{"null:"}, Lcores: unpinned(1)})
	require.NoError(t, err)
	_, err = p.AddForwarders(app.ForwarderOptions{Mode: "bogus", Burst: 32})
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "Mode", fe.Field())
	require.NoError(t, p.Stop())
}
