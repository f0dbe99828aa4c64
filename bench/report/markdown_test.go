package report_test

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/bench/report"
)

// TestMarkdownWithPlots: a scenario's output read back becomes a Markdown
// report with one readable PNG per ratio.
func TestMarkdownWithPlots(t *testing.T) {
	var out bytes.Buffer
	rep := report.New(&out)
	rep.Note("a note, not a ratio")
	rep.Add(report.Ratio{Name: "io_fwd_vs_testpmd", Value: 0.8, Op: report.AtLeast, Target: 1, Detail: "peregrine 1.2 Mpps, testpmd 1.5 Mpps"})
	rep.Add(report.Ratio{Name: "ring/mpmc_vs_dpdk", Value: 1.4, Op: report.AtMost, Target: 1})
	rep.Add(report.Ratio{Name: "nothing_measured", Value: math.NaN(), Op: report.AtLeast, Target: 1})
	rep.Summary()

	ratios := report.Parse(&out)
	require.Len(t, ratios, 3)
	require.Equal(t, "peregrine 1.2 Mpps, testpmd 1.5 Mpps", ratios[0].Detail)
	require.Equal(t, report.AtMost, ratios[1].Op)

	dir := t.TempDir()
	points := report.ParseSeries(strings.NewReader("SERIES goodput_vs_loss peregrine 0 1.2 loss_% Gbit/s\nSERIES goodput_vs_loss peregrine 1 1.18\nSERIES goodput_vs_loss quic-go 0 0.65\nSERIES goodput_vs_loss quic-go 1 0.31\nnot a series\n"))
	require.Len(t, points, 4)
	require.Equal(t, "loss %", points[0].XLabel)
	path, err := report.WriteMarkdown(dir, "example", ratios, points, time.Unix(0, 0))
	require.NoError(t, err)
	md, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(md), "| io_fwd_vs_testpmd | 0.800 | >= 1 | FAIL | peregrine 1.2 Mpps, testpmd 1.5 Mpps |")
	require.Contains(t, string(md), "![ring/mpmc_vs_dpdk](ring_mpmc_vs_dpdk.png)")
	require.Contains(t, string(md), "![goodput_vs_loss](goodput_vs_loss.png)")
	for _, name := range []string{"io_fwd_vs_testpmd", "ring_mpmc_vs_dpdk", "nothing_measured", "goodput_vs_loss"} {
		f, err := os.Open(filepath.Join(dir, name+".png"))
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, name)
		require.Greater(t, img.Bounds().Dx(), 100)
	}
	require.True(t, strings.HasSuffix(path, "README.md"))
}
