package foundation

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunPrintsEveryRatioAndTheSummary runs the whole scenario with short
// measurements. Verdicts depend on the machine; the shape must not: six
// RATIO lines in the agreed format, each with its figures, and the summary
// last with counts that add up. Without DPDK installed the anchor ratios
// are NaN and fail, and the run still completes.
func TestRunPrintsEveryRatioAndTheSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs DPDK's tools and peregrine's measurements (~30 s); skipped with -short")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pass, fail, err := Run(ctx, Options{Out: &out, CPUs: []int{0, 1}, FwdDuration: 300 * time.Millisecond, RingElems: 1 << 20})
	require.NoError(t, err, out.String())
	require.Equal(t, 6, pass+fail, out.String())

	ratio := regexp.MustCompile(`^RATIO [a-z0-9_]+ (-?[0-9.]+|NaN) goal (<=|>=) [0-9.e-]+ (PASS|FAIL)$`)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var ratios int
	for _, l := range lines {
		if strings.HasPrefix(l, "RATIO ") {
			require.Regexp(t, ratio, l)
			ratios++
		}
	}
	require.Equal(t, 6, ratios)
	require.Regexp(t, `^BENCH-SUMMARY pass=\d+ fail=\d+$`, lines[len(lines)-1])
	require.Contains(t, out.String(), "iofwd_mem_1core_vs_testpmd")
}

// TestIOForwardRunsAndReturnsEveryFrame runs both io-forwarding
// measurements briefly on an unpinned loop: each moves packets, and its
// pipeline's stop finds every frame back in the pool (a leak would be the
// measurement's error).
func TestIOForwardRunsAndReturnsEveryFrame(t *testing.T) {
	for name, measure := range map[string]func(int, time.Duration) (float64, float64, error){
		"null": ioForwardNull, "mem": MemIOForward,
	} {
		t.Run(name, func(t *testing.T) {
			mpps, _, err := measure(-1, 50*time.Millisecond)
			require.NoError(t, err)
			require.Greater(t, mpps, 0.0)
		})
	}
}
