package ioi

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	cioi "github.com/peregrine-net/peregrine/core/ioi"
)

func TestSimulateOneMiB(t *testing.T) {
	o := Options{}
	o.defaults()
	res := map[cioi.Mode]Result{}
	for _, m := range []cioi.Mode{cioi.ModeInOrder, cioi.ModeSprayed, cioi.ModeIOI} {
		r, err := Simulate(SimOptions{Profile: Profile(o.PathRate, o.Delay, 0), Mode: m, Size: 1 << 20, Window: o.Window, Seed: 1})
		require.NoError(t, err)
		res[m] = r
		t.Logf("%v %v retransmits %d ioi %+v", m, r.Completion, r.Retransmits, r.IOI)
	}
	require.Less(t, res[cioi.ModeIOI].Completion, res[cioi.ModeInOrder].Completion)
}

// The scenario runs end to end and prints its summary.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole scenario takes seconds; -short skips it")
	}
	var out bytes.Buffer
	_, _, err := Run(context.Background(), Options{Out: &out, CostPackets: 1 << 12})
	require.NoError(t, err)
	t.Log(out.String())
	require.Contains(t, out.String(), "BENCH-SUMMARY pass=")
	require.Equal(t, 8, strings.Count(out.String(), "RATIO "))
}
