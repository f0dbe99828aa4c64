package report

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// ratioLine matches Ratio.Line's output.
var ratioLine = regexp.MustCompile(`^RATIO (\S+) (\S+) goal (<=|>=) (\S+) (PASS|FAIL)$`)

// Parse reads a scenario's output back into its ratios (with the detail
// line that follows each), ignoring every other line.
func Parse(r io.Reader) []Ratio {
	var out []Ratio
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := ratioLine.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			t, _ := strconv.ParseFloat(m[4], 64)
			out = append(out, Ratio{Name: m[1], Value: v, Op: Op(m[3]), Target: t})
			continue
		}
		if d, ok := strings.CutPrefix(line, "  # "); ok && len(out) > 0 && out[len(out)-1].Detail == "" {
			out[len(out)-1].Detail = d
		}
	}
	return out
}

// WriteMarkdown writes dir/README.md for one scenario's run — a table of
// its ratios with their verdicts and raw figures — and one PNG per ratio
// beside it, plotting peregrine's figure against its baseline measured in
// the same run (the baseline at 1, peregrine at the ratio, the goal as a
// line). It returns the Markdown file's path.
func WriteMarkdown(dir, scenario string, ratios []Ratio, at time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# peregrine bench %s\n\n", scenario)
	fmt.Fprintf(&b, "Run %s. Each ratio is peregrine's figure over its baseline's, both measured in this run on this machine; the plot shows the baseline at 1 and peregrine beside it, with the goal as a dashed line.\n\n", at.UTC().Format(time.RFC3339))
	b.WriteString("| ratio | value | goal | verdict | figures |\n|---|---|---|---|---|\n")
	pass := 0
	for _, r := range ratios {
		verdict := "FAIL"
		if r.Pass() {
			verdict = "PASS"
			pass++
		}
		fmt.Fprintf(&b, "| %s | %.3f | %s %g | %s | %s |\n", r.Name, r.Value, r.Op, r.Target, verdict, strings.ReplaceAll(r.Detail, "|", "\\|"))
	}
	fmt.Fprintf(&b, "\n%d of %d ratios pass.\n\n", pass, len(ratios))
	for _, r := range ratios {
		png := sanitize(r.Name) + ".png"
		if err := plotRatio(filepath.Join(dir, png), scenario, r); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "## %s\n\n![%s](%s)\n\n", r.Name, r.Name, png)
		if r.Detail != "" {
			fmt.Fprintf(&b, "%s\n\n", r.Detail)
		}
	}
	path := filepath.Join(dir, "README.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return path, nil
}

// plotRatio draws the baseline (1) and peregrine (the ratio) as two bars
// and the goal as a dashed line.
func plotRatio(path, scenario string, r Ratio) error {
	p := plot.New()
	p.Title.Text = r.Name
	better := "higher is better"
	if r.Op == AtMost {
		better = "lower is better"
	}
	p.Y.Label.Text = "relative to the baseline (" + better + ")"
	v := r.Value
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	w := vg.Points(40)
	bars, err := plotter.NewBarChart(plotter.Values{1, v}, w)
	if err != nil {
		return fmt.Errorf("report: %s: %w", r.Name, err)
	}
	bars.Color = color.RGBA{R: 70, G: 110, B: 200, A: 255}
	p.Add(bars)
	goal, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: r.Target}, {X: 1.5, Y: r.Target}})
	if err != nil {
		return fmt.Errorf("report: %s: %w", r.Name, err)
	}
	goal.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	goal.Color = color.RGBA{R: 200, G: 60, B: 60, A: 255}
	p.Add(goal)
	p.Legend.Add(fmt.Sprintf("goal %s %g", r.Op, r.Target), goal)
	p.Legend.Top = true
	p.NominalX("baseline", "peregrine")
	p.Y.Min = 0
	p.Y.Max = math.Max(math.Max(1, v), r.Target) * 1.2
	if err := p.Save(4*vg.Inch, 3*vg.Inch, path); err != nil {
		return fmt.Errorf("report: %s: %w", r.Name, err)
	}
	return nil
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
}
