package main

import (
	"bytes"
	"os"
	"path/filepath"
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
