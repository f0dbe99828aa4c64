package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestBenchRFC2544WritesTheReportAndJSON runs the command as root with
// tiny trials against peregrine fwd and the Linux bridge: it must print
// the ratio lines, end with BENCH-SUMMARY, and write a Markdown report and
// a JSON result that records the parameters and every trial.
func TestBenchRFC2544WritesTheReportAndJSON(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces, veth, a bridge and AF_XDP sockets")
	}
	dir := t.TempDir()
	md, js := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.json")
	cmd := newBenchRFC2544Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--duts", "kernel,fwd", "--sizes", "64", "--measures", "throughput", "--duration", "20ms",
		"--max-rate", "20kpps", "--repeats", "2", "--width", "0.05", "--markdown", md, "--json", js,
		"--netns-prefix", fmt.Sprintf("pgc%d", os.Getpid()%100000)})
	require.NoError(t, cmd.Execute(), out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY "), out.String())
	require.Contains(t, out.String(), "RATIO ndr_64b_fwd_vs_kernel_bridge ")
	require.Contains(t, out.String(), "RATIO search_repeatability ")

	text, err := os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(text), "| fwd | 64B |")
	require.Contains(t, string(text), "| kernel | 64B |")
	var res struct {
		Parameters map[string]any `json:"parameters"`
		Results    []struct {
			DUT   string `json:"dut"`
			Sizes []struct {
				NDR      float64 `json:"ndr_fps"`
				Searches []struct {
					Trials []json.RawMessage `json:"trials"`
				} `json:"searches"`
			} `json:"sizes"`
		} `json:"results"`
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, "20kpps", res.Parameters["max_rate"])
	require.Equal(t, "20ms", res.Parameters["trial_duration"])
	require.Equal(t, 0.05, res.Parameters["width"])
	require.Len(t, res.Results, 2)
	require.NotEmpty(t, res.Results[1].Sizes[0].Searches[0].Trials)
}

func TestBenchRFC2544RefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--sizes", "32"}, {"--sizes", "64,jumbo"}, {"--duts", "vpp"}, {"--measures", "latency"},
		{"--width", "0"}, {"--exceed-ratio", "1"}, {"--max-rate", "0pps"}, {"--max-rate", "10pps"}, {"--duration", "1s", "--initial-duration", "2s"},
		{"--repeats", "0"}, {"--markdown", ""},
	} {
		cmd := newBenchRFC2544Command()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		cmd.RunE = func(*cobra.Command, []string) error { return nil }
		err := cmd.Execute()
		require.Error(t, err, "%v", args)
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v: a usage error (exit 2)", args)
	}
}
