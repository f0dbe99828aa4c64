package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/txnload"
)

func TestFailureCheckNamesTheCauses(t *testing.T) {
	c := failureCheck(txnload.Stats{}, " (hint)")
	require.True(t, c.ok)

	c = failureCheck(txnload.Stats{Failed: 5, RefusedTooSmall: 3, Abandoned: 2}, " (use --region-size 4096)")
	require.False(t, c.ok)
	require.Equal(t, "no operation failed (5: 3 refused: the region is too small for the span (use --region-size 4096); 2 a packet ran out of retries)", c.what)

	c = failureCheck(txnload.Stats{Failed: 1, RefusedUnregistered: 1}, " (hint)")
	require.Contains(t, c.what, "1 refused: no region under the key (--region-key must be the target's READY key)")
	require.NotContains(t, c.what, "hint", "the too-small hint goes with too-small refusals only")
}
