package smallops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunPrintsEveryRow runs the whole scenario once with a short window
// and checks that every row's figures, the ratios and the forwarding
// baseline are printed, summary last. Without root the AF_XDP rows are
// reported skipped.
func TestRunPrintsEveryRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every row for 100ms; -short skips it")
	}
	var out bytes.Buffer
	pass, fail, err := Run(context.Background(), Options{
		Out: &out, Duration: 100 * time.Millisecond, Window: 64, Prefix: fmt.Sprintf("pgsot%d", os.Getpid()),
	})
	require.NoError(t, err, out.String())
	text := out.String()
	t.Log(text)
	for _, name := range Rows() {
		if strings.HasPrefix(name, "afxdp") && os.Geteuid() != 0 {
			require.Contains(t, text, "  # "+name+" skipped: needs root")
			continue
		}
		require.Contains(t, text, "FIGURE smallops_"+name+"_ops_per_s ")
		require.Contains(t, text, "FIGURE smallops_"+name+"_ops_per_cpu_s ")
		require.Regexp(t, "  # "+name+`: \d+ ops in .* \(0 failed\), retransmissions \d+ timeout \+ \d+ early, fabric losses \d+`, text)
	}
	// At 1 % loss over some thousands of packets the fabric dropped some.
	require.NotContains(t, text, "fabric1_push64: 0 ops")
	require.NotRegexp(t, `fabric1_push64: .* fabric losses 0\n`, text)
	for _, name := range []string{"smallops_push64_per_core", "smallops_retransmits_without_loss"} {
		require.Contains(t, text, "RATIO "+name+" ")
	}
	require.Contains(t, text, "FIGURE smallops_push64_vs_mem_forwarding ")
	require.Contains(t, text, "FIGURE smallops_mem_forwarding_mpps ")
	require.Equal(t, 2, pass+fail)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Equal(t, fmt.Sprintf("BENCH-SUMMARY pass=%d fail=%d", pass, fail), lines[len(lines)-1])
}
