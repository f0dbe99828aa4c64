package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A stage that leaves min_cwnd out gets DefaultMinCwnd, not Swift's 0.01
// (which paced the shipped trio to a packet per hundred round trips); a
// floor set explicitly, Swift's own included, is kept.
func TestTransportSwiftFloor(t *testing.T) {
	require.Equal(t, DefaultMinCwnd, transportSwift(TransportOptions{}).MinCwnd)
	require.Equal(t, 0.01, transportSwift(TransportOptions{MinCwnd: 0.01}).MinCwnd)
	sp := transportSwift(TransportOptions{MinCwnd: 64})
	require.Equal(t, 64.0, sp.MinCwnd)
	require.GreaterOrEqual(t, sp.InitialCwnd, sp.MinCwnd)
	require.NoError(t, sp.Validate())
}
