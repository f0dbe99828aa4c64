package rpc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunSmall runs the whole scenario once with a small count and a 256 KiB
// file, and checks every row's figures, the ratios and the summary (last).
// Without root the veth rows, and the ratios over veth, are reported
// skipped.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every row for a few hundred round trips; -short skips it")
	}
	var out bytes.Buffer
	pass, fail, err := Run(context.Background(), Options{
		Out: &out, Count: 300, FileSize: 256 << 10, Prefix: fmt.Sprintf("pgrpct%d", os.Getpid()),
	})
	text := out.String()
	t.Log(text)
	require.NoError(t, err)
	root := os.Geteuid() == 0
	for _, name := range Rows() {
		if strings.HasPrefix(name, "veth") && !root {
			require.NotContains(t, text, "FIGURE rpc_"+name+"_")
			continue
		}
		require.Contains(t, text, "FIGURE rpc_"+name+"_ops_per_s ")
		require.Regexp(t, regexp.QuoteMeta("  # "+name+": 300 round trips in ")+`.*p50/p99/p99.9 [0-9.]+/[0-9.]+/[0-9.]+ µs`, text)
	}
	ratios := []string{"api_vs_raw_cost_1k", "sidecar_vs_inprocess_cost_1k", "sidecar_allocs_per_op"}
	if root {
		ratios = append(ratios, "rpc_1k_vs_kernel_tcp_ops", "rpc_1k_p99_vs_kernel_tcp", "file_transfer_262144b_vs_kernel_tcp")
		require.Contains(t, text, "FIGURE rpc_veth_sidecar_file_transfer_gbps ")
		require.Contains(t, text, "FIGURE rpc_veth_tcp_file_transfer_gbps ")
	} else {
		require.Contains(t, text, "veth rows skipped: needs root")
	}
	for _, name := range ratios {
		require.Regexp(t, "(?m)^RATIO "+name+` [0-9.]+ goal (<=|>=) [0-9.]+ (PASS|FAIL)$`, text)
	}
	require.Contains(t, text, "FIGURE rpc_mem_sidecar_file_transfer_gbps ")
	require.Equal(t, len(ratios), pass+fail)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Equal(t, fmt.Sprintf("BENCH-SUMMARY pass=%d fail=%d", pass, fail), lines[len(lines)-1])
}

// TestOnlyUnknownDoor: a misspelt door is an error before anything runs.
func TestOnlyUnknownDoor(t *testing.T) {
	var out bytes.Buffer
	_, _, err := Run(context.Background(), Options{Out: &out, Only: []string{"rwa"}})
	require.ErrorContains(t, err, `unknown door "rwa"`)
	require.Empty(t, out.String())
}
