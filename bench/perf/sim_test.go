package perf

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSimPacketsPerSecondRuns(t *testing.T) {
	pps, err := SimPacketsPerSecond(1, 2000)
	require.NoError(t, err)
	require.Greater(t, pps, 0.0)
	_, err = SimPacketsPerSecond(1, 1)
	require.ErrorContains(t, err, "packets 1 is too few")
}
