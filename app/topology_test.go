package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// TestVethDriverCheck: a veth topology takes afxdp or afpacket only.
func TestVethDriverCheck(t *testing.T) {
	require.NoError(t, app.CheckVethDriver("afxdp"))
	require.NoError(t, app.CheckVethDriver("afpacket"))
	err := app.CheckVethDriver("pcap")
	var fe *app.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "Driver", fe.Option)
	require.ErrorContains(t, err, `"pcap": use afxdp or afpacket`)
}

// TestLcoreIdleOverride: an lcore's own idle policy is checked like the
// pipeline's, and refused with the lcore named.
func TestLcoreIdleOverride(t *testing.T) {
	_, err := app.New(app.Options{Pool: mbuf.Options{Frames: 4096}, Lcores: []app.Lcore{{CPU: -1}, {CPU: -1, Idle: &lcore.IdlePolicy{Mode: lcore.IdleMode(99)}}}})
	var fe *app.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "Lcores[1]", fe.Field())
	p, err := app.New(app.Options{Pool: mbuf.Options{Frames: 4096}, Lcores: []app.Lcore{{CPU: -1, Idle: &lcore.IdlePolicy{Mode: lcore.IdleBusy}}}})
	require.NoError(t, err)
	require.NoError(t, p.Stop())
}
