package dix

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	coredix "github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

func TestWrapCheckEveryKind(t *testing.T) {
	n := uint64(200_000)
	if testing.Short() || testenv.Race {
		n = 20_000
	}
	for _, cfg := range []coredix.Config{
		{Kind: coredix.Relative, Width: 8},
		{Kind: coredix.FreeRunning, Width: 8},
		{Kind: coredix.Absolute, Width: 8, Depth: 128},
		{Kind: coredix.Relative, Width: 16},
		{Kind: coredix.FreeRunning, Width: 32},
	} {
		res, err := WrapCheck(cfg, n, 3)
		require.NoError(t, err)
		require.Zero(t, res.Misplaced, "%+v: %+v", cfg, res)
		require.Equal(t, n, res.Transactions)
		require.NotZero(t, res.Reordered)
	}
}

func TestSimulateIndexBeatsBaseline(t *testing.T) {
	sends := 300
	if testing.Short() || testenv.Race {
		sends = 60
	}
	d, err := Simulate(coredix.Config{Kind: coredix.FreeRunning, Width: 16}, "loss=1%,paths=4,spread=40us,delay=10us", sends, DefaultWindow, 5)
	require.NoError(t, err)
	bl, err := Simulate(coredix.Config{}, "loss=1%,paths=4,spread=40us,delay=10us", sends, DefaultWindow, 5)
	require.NoError(t, err)
	for _, r := range []*SimResult{d, bl} {
		require.Zero(t, r.Mismatches)
		require.Zero(t, r.CompletionErr)
	}
	require.Zero(t, d.PeakHeld)
	require.Equal(t, 1.0, d.CopiesPerByte())
	require.NotZero(t, bl.PeakHeld)
	require.Greater(t, bl.CopiesPerByte(), 1.0)
	t.Logf("index p99 %v, baseline p99 %v, baseline peak held %d", d.P99, bl.P99, bl.PeakHeld)
}

func TestRunSmall(t *testing.T) {
	if testing.Short() || testenv.Race {
		t.Skip("the whole scenario, scaled down; -short and -race skip it (the other tests cover its parts)")
	}
	var out strings.Builder
	_, _, err := Run(context.Background(), Options{Out: &out, Sends: 200, WrapTxns: 20_000, FullWrapSends: 2000, RxPackets: 2000})
	require.NoError(t, err)
	require.Contains(t, out.String(), "BENCH-SUMMARY")
	require.Contains(t, out.String(), "SERIES dix_p99_completion_vs_loss buffered 1 ") // --report's figure
	t.Log(out.String())
}

func TestStackWrapThroughTheStack(t *testing.T) {
	n := 30_000
	if testing.Short() || testenv.Race {
		n = 3_000
	}
	res, err := StackWrap(coredix.Config{Kind: coredix.Relative, Width: 8}, n, 4)
	require.NoError(t, err)
	require.Zero(t, res.Misplaced, "%+v", res)
	require.Equal(t, n, res.Sends)
	require.NotZero(t, res.Elements, "the fabric reorders: some Sends bind through elements")
}

// The open-loop and FIFO drivers of the from-posting matrix place every
// Send byte-exact too.
func TestOpenLoopAndFIFOWorkloads(t *testing.T) {
	for _, w := range []Workload{
		{Window: 16, Load: 0.5, LineRate: 10e9},
		{Window: 16, Load: 0.5, LineRate: 10e9, FIFO: true, Mice: 0.9},
	} {
		w.Profile, w.Sends, w.Min, w.Max, w.Seed = "loss=1%,rate=10gbit,paths=4,spread=30us,delay=10us", 100, minSend, maxSend, 6
		w.Index = coredix.Config{Kind: coredix.FreeRunning, Width: 16}
		r, err := SimulateWorkload(w)
		require.NoError(t, err)
		require.Zero(t, r.Mismatches+r.CompletionErr, "%+v", w)
		require.LessOrEqual(t, r.P99, r.PostP99)
	}
}
