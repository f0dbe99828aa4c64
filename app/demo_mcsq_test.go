package app_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
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

// TestMCSQInitiatorToTarget: `transport initiator --targets` against a
// plain target on a mem pair: a counted run, every WR covered in order.
func TestMCSQInitiatorToTarget(t *testing.T) {
	const count = 3000
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: t.Name(), Frames: 8192}, Ports: []string{"mem:mq/0", "mem:mq/1"},
		Lcores: unpinned(2), Idle: lcore.IdlePolicy{Mode: lcore.IdleSleep}, Clock: clock.NewReal()})
	require.NoError(t, err)
	targetIP, initIP := netip.MustParseAddr("198.18.0.6"), netip.MustParseAddr("198.18.0.5")
	tgt, err := p.AddTransport(app.TransportOptions{Role: "target", Port: 1, Loop: 1, LocalIP: targetIP, Window: 16, Sizes: []int{512}, Seed: 1})
	require.NoError(t, err)
	m, err := p.AddMCSQInitiator(app.MCSQInitiatorOptions{Port: 0, Loop: 0, LocalIP: initIP,
		Peer: rt.PeerAddr{MAC: [6]byte(p.Port(1).Info().MAC), IP: targetIP}, RegionKey: tgt.Region.Key, RegionLen: tgt.Region.Len,
		Targets: 500, DCSQs: 16, Count: count, Seed: 2})
	require.NoError(t, err)
	require.NoError(t, p.Start())
	ctx := context.Background()
	m.Start(ctx)
	_, _, err = p.Run(ctx, app.RunOptions{Duration: bound, Period: time.Millisecond, Done: m.Done})
	require.NoError(t, err)
	require.True(t, m.Drain(bound))
	require.NoError(t, p.Stop())
	s := m.Stats()
	require.Equal(t, uint64(count), s.Posted)
	require.Equal(t, uint64(count), s.OK)
	require.Zero(t, s.OutOfOrder)
	require.Positive(t, m.Pool.Stats().Binds)
	require.Zero(t, p.Pool().InUse())
}
