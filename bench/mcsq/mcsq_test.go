package mcsq

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

// TestDesignsMove: both designs complete WRs on the real clock (a smoke
// test of the harness, not a measurement).
func TestDesignsMove(t *testing.T) {
	o := Options{Targets: 1000, Hosts: 16, DCSQs: 64}
	o.defaults()
	for _, d := range []design{designMCSQ, designPerTarget} {
		b, err := newBed(&o, d, true, clock.NewReal(), dcIdle)
		require.NoError(t, err)
		ops, err := b.throughput(context.Background(), 2, 8, 200*time.Millisecond, 1)
		st, ps := b.q.Stats(), b.pool.Stats()
		t.Logf("%v: %.0f WR/s, queue %+v, pool binds %d connects %d", d, ops, st, ps.Binds, ps.DCConnects)
		rs := b.n.Init.Transport().Stats()
		t.Logf("init rt: %+v", rs)
		t.Logf("host0 rt: %+v", b.n.Hosts[0].Transport().Stats())
		t.Logf("switch: %+v", b.n.Switch.Stats())
		require.NoError(t, b.n.Close())
		require.NoError(t, err)
		require.Positive(t, ops, "%v completed nothing", d)
	}
}
