package app_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/qpx"
)

func TestParseRoCEQP(t *testing.T) {
	q, err := app.ParseRoCEQP("qpn=0x11,dest=34,pkey=0x8001,rx-psn=5,tx-psn=6,access=rw")
	require.NoError(t, err)
	require.Equal(t, app.RoCEQP{QPN: 0x11, DestQPN: 34, PKey: 0x8001, ExpectedPSN: 5, NextPSN: 6,
		Access: qpx.AccessRemoteRead | qpx.AccessRemoteWrite}, q)
	q, err = app.ParseRoCEQP("psn=9")
	require.NoError(t, err)
	require.Equal(t, app.RoCEQP{ExpectedPSN: 9, NextPSN: 9, Access: qpx.AccessAll}, q)
	for _, bad := range []string{"qpn", "qpn=x", "qpn=0x1000000", "pkey=0x10000", "access=z", "color=red"} {
		_, err := app.ParseRoCEQP(bad)
		require.Error(t, err, bad)
	}
}

// TestAddRoCEOpensQPs: the QPs the options describe are opened in order
// (retired first, then the rotation's, then bound ones), and a field that
// cannot work is refused by name.
func TestAddRoCEOpensQPs(t *testing.T) {
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: t.Name(), Frames: 2048},
		Ports:  []string{"null:", "null:"},
		Lcores: unpinned(1),
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleSleep},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Stop()) }()
	r, err := p.AddRoCE(app.RoCEOptions{Net: 0, Host: 1, Slots: 4, Retire: 2, Open: 1,
		QPs: []app.RoCEQP{{QPN: 0x100, DestQPN: 0x200}}})
	require.NoError(t, err)
	require.Equal(t, []uint32{qpx.FirstQPN, qpx.FirstQPN + 1}, r.Retired)
	require.Len(t, r.QPs, 2)
	require.Equal(t, uint32(qpx.FirstQPN+2), r.QPs[0].QPN)
	require.Equal(t, r.QPs[0].QPN, r.QPs[0].Ctx.DestQPN, "no peer given: the QP's own number")
	require.Equal(t, uint32(0x100), r.QPs[1].QPN)
	require.Equal(t, uint32(0x200), r.QPs[1].Ctx.DestQPN)
	require.Equal(t, uint16(0xffff), r.QPs[1].Ctx.PKey)

	for _, c := range []struct {
		o     app.RoCEOptions
		field string
	}{
		{app.RoCEOptions{Net: 0, Host: 0}, "Host"},
		{app.RoCEOptions{Net: 0, Host: 5}, "Host"},
		{app.RoCEOptions{Net: 0, Host: 1, Loop: 3}, "Loop"},
		{app.RoCEOptions{Net: 0, Host: 1, Slots: -1}, "Slots"},
		{app.RoCEOptions{Net: 0, Host: 1, Slots: 1, Open: 2}, "Open"},
		{app.RoCEOptions{Net: 0, Host: 1, QPs: []app.RoCEQP{{QPN: 1}}}, "QPs[0]"},
	} {
		_, err := p.AddRoCE(c.o)
		var fe *app.FieldError
		require.True(t, errors.As(err, &fe), "%+v: %v", c.o, err)
		require.Equal(t, c.field, fe.Field(), "%v", err)
	}
}
