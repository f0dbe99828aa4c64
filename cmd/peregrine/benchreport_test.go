package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	benchreport "github.com/peregrine-net/peregrine/bench/report"
)

// TestBenchReportFlag: bench SCENARIO --report DIR writes the Markdown
// report and a plot per ratio beside the scenario's usual output, in one
// command (a stand-in scenario prints the ratios, as every real one does
// through bench/report).
func TestBenchReportFlag(t *testing.T) {
	bench := &cobra.Command{Use: "bench"}
	bench.AddCommand(&cobra.Command{Use: "fake", RunE: func(cmd *cobra.Command, _ []string) error {
		rep := benchreport.New(cmd.OutOrStdout())
		rep.Add(benchreport.Ratio{Name: "goodput_vs_quic", Value: 1.7, Op: benchreport.AtLeast, Target: 1, Detail: "peregrine 1.7 Gbit/s, quic-go 1.0 Gbit/s"})
		rep.Add(benchreport.Ratio{Name: "cam_vs_map", Value: 0.6, Op: benchreport.AtMost, Target: 1})
		rep.Summary()
		return nil
	}})
	addReportFlag(bench)
	dir := filepath.Join(t.TempDir(), "report")
	var out bytes.Buffer
	bench.SetOut(&out)
	bench.SetArgs([]string{"fake", "--report", dir})
	require.NoError(t, bench.Execute())
	require.Contains(t, out.String(), "RATIO goodput_vs_quic 1.700 goal >= 1 PASS")
	require.Contains(t, out.String(), "report: "+filepath.Join(dir, "README.md")+" (2 ratios, a plot each; 0 figures)")
	md, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "![goodput_vs_quic](goodput_vs_quic.png)")
	for _, png := range []string{"goodput_vs_quic.png", "cam_vs_map.png"} {
		st, err := os.Stat(filepath.Join(dir, png))
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(1000))
	}
}

// TestBenchIOIReport: `bench ioi --report DIR` writes the Markdown report
// with a plot per ratio and the figure of completion time against message
// size (in order, sprayed, IOI), from one run of the real scenario (its
// simulated part is exact and quick; the real-clock cost ratio is
// reported, not judged here).
func TestBenchIOIReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the ioi scenario (seconds); -short skips it")
	}
	dir := filepath.Join(t.TempDir(), "ioi")
	out, _ := runCLI(t, "bench", "ioi", "--report", dir)
	require.Contains(t, out, "SERIES ioi_completion_vs_message_size ioi 16384 ")
	require.Contains(t, out, "report: "+filepath.Join(dir, "README.md")+" (14 ratios, a plot each; 1 figures)")
	md, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "![ioi_completion_vs_message_size](ioi_completion_vs_message_size.png)")
	require.Contains(t, string(md), "| ioi_vs_inorder_speedup_16MiB |")
	for _, png := range []string{"ioi_completion_vs_message_size.png", "ioi_vs_inorder_speedup_16MiB.png", "below_threshold_unchanged_64KiB.png"} {
		st, err := os.Stat(filepath.Join(dir, png))
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(1000))
	}
	points := benchreport.ParseSeries(strings.NewReader(out))
	require.Len(t, points, 9, "three policies at three sizes")
}
