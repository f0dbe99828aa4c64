package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// TestMCSQDemoCompletes: client goroutines post through the DC and RC
// MCSQs; every WR is covered by one CQE, the ordered CQ keeps posting
// order, only the refusing host's identifiers fail (and are blacklisted),
// and every frame returns to the pool.
func TestMCSQDemoCompletes(t *testing.T) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 16384}, Lcores: unpinned(2),
		Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep}, Clock: clock.NewReal()})
	require.NoError(t, err)
	d, err := p.AddMCSQDemo(app.MCSQDemoOptions{Seed: 1})
	require.NoError(t, err)
	require.NoError(t, p.Start())
	ctx := context.Background()
	d.Start(ctx)
	_, _, err = p.Run(ctx, app.RunOptions{Duration: bound, Period: time.Millisecond,
		Done: func() bool { return d.Stats().OK >= 2000 }})
	require.NoError(t, err)
	require.True(t, d.Drain(bound), "every posted WR covered: %+v", d.Stats())
	require.NoError(t, p.Stop())
	s := d.Stats()
	require.Equal(t, s.Posted, s.Covered)
	require.Zero(t, s.OutOfOrder)
	require.Zero(t, s.WrongFailures)
	require.Positive(t, s.Failed, "the refusing host's WRs fail")
	require.Positive(t, d.DC.Stats().BlacklistAdds)
	require.Positive(t, d.DC.Stats().DCConnects)
	require.Zero(t, p.Pool().InUse(), "every frame is back in the pool")
}
