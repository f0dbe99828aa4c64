package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
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
