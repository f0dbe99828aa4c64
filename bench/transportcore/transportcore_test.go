package transportcore

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunPrintsEveryRatio runs the scenario small: the verdicts depend on
// the machine, the report's shape does not.
func TestRunPrintsEveryRatio(t *testing.T) {
	var out bytes.Buffer
	pass, fail, err := Run(context.Background(), Options{Out: &out, Ops: 1 << 14, SimPackets: 1 << 12, RxPackets: 1 << 12, FwdDuration: 200 * time.Millisecond})
	require.NoError(t, err, out.String())
	require.Equal(t, 6, pass+fail, out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	ratio := regexp.MustCompile(`^RATIO [a-z0-9_]+ [0-9.]+ goal (<=|>=) [0-9.]+ (PASS|FAIL)$`)
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "RATIO ") {
			require.Regexp(t, ratio, l)
			n++
		}
	}
	require.Equal(t, 6, n)
	require.Regexp(t, `^BENCH-SUMMARY pass=\d+ fail=\d+$`, lines[len(lines)-1])
	// The receive ratio says it is taken with checksums and is followed by
	// the figure without them.
	require.Regexp(t, `(?m)^RATIO rx_cost_vs_mem_forwarding .*\n  # transport RX path [0-9.]+ ns/packet with UDP checksums .*\n  # without UDP checksums .*RX path [0-9.]+ ns/packet.*\n  # floor: .* [0-9.]+ ns/packet`, out.String())
}
