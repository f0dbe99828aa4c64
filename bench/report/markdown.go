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
var ratioLine = regexp.MustCompile(`^RATIO (\S+) (\S+) goal (<=|>=) (\S+) (PASS|FAIL|SKIP)$`)

// Point is one point of a figure's series: a SERIES line,
//
//	SERIES <figure> <series> <x> <y> [<x label> [<y label>]]
//
// (labels with '_' for spaces), e.g. "SERIES goodput_vs_loss quic-go 1
// 0.31 loss_% goodput_Gbit/s". Points of one figure are plotted together,
// one line per series: peregrine beside its baselines.
type Point struct {
	Figure, Series string
	X, Y           float64
	XLabel, YLabel string
}

// Line formats the SERIES line.
func (p Point) Line() string {
	return fmt.Sprintf("SERIES %s %s %g %g %s %s", p.Figure, p.Series, p.X, p.Y, p.XLabel, p.YLabel)
}

// ParseSeries reads a scenario's SERIES lines back, ignoring every other
// line.
func ParseSeries(r io.Reader) []Point {
	var out []Point
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "SERIES" {
			continue
		}
		x, err1 := strconv.ParseFloat(f[3], 64)
		y, err2 := strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		p := Point{Figure: f[1], Series: f[2], X: x, Y: y}
		if len(f) > 5 {
			p.XLabel = strings.ReplaceAll(f[5], "_", " ")
		}
		if len(f) > 6 {
			p.YLabel = strings.ReplaceAll(f[6], "_", " ")
		}
		out = append(out, p)
	}
	return out
}

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
			out = append(out, Ratio{Name: m[1], Value: v, Op: Op(m[3]), Target: t, Skipped: m[5] == "SKIP"})
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
// Each figure of points (SERIES lines) follows as a line plot, one line
// per series.
func WriteMarkdown(dir, scenario string, ratios []Ratio, points []Point, at time.Time) (string, error) {
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
		switch {
		case r.Skipped:
			verdict = "SKIP"
		case r.Pass():
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
	for _, fig := range Figures(points) {
		png := sanitize(fig[0].Figure) + ".png"
		if err := plotSeries(filepath.Join(dir, png), fig); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "## %s\n\n![%s](%s)\n\n", fig[0].Figure, fig[0].Figure, png)
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

// Figures groups points by figure, in order of first appearance.
func Figures(points []Point) [][]Point {
	var order []string
	by := map[string][]Point{}
	for _, p := range points {
		if _, ok := by[p.Figure]; !ok {
			order = append(order, p.Figure)
		}
		by[p.Figure] = append(by[p.Figure], p)
	}
	out := make([][]Point, len(order))
	for i, f := range order {
		out[i] = by[f]
	}
	return out
}

// plotSeries draws one figure: a line with points per series.
func plotSeries(path string, fig []Point) error {
	p := plot.New()
	p.Title.Text = fig[0].Figure
	p.X.Label.Text, p.Y.Label.Text = fig[0].XLabel, fig[0].YLabel
	var order []string
	by := map[string]plotter.XYs{}
	for _, pt := range fig {
		if _, ok := by[pt.Series]; !ok {
			order = append(order, pt.Series)
		}
		by[pt.Series] = append(by[pt.Series], plotter.XY{X: pt.X, Y: pt.Y})
	}
	palette := []color.RGBA{{R: 70, G: 110, B: 200, A: 255}, {R: 200, G: 60, B: 60, A: 255}, {R: 60, G: 160, B: 80, A: 255}, {R: 150, G: 90, B: 180, A: 255}}
	for i, name := range order {
		l, s, err := plotter.NewLinePoints(by[name])
		if err != nil {
			return fmt.Errorf("report: %s: %w", fig[0].Figure, err)
		}
		c := palette[i%len(palette)]
		l.Color, s.Color = c, c
		p.Add(l, s)
		p.Legend.Add(name, l, s)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	// A figure whose values span more than two decades (message sizes
	// from 64 KiB to 16 MiB, their completion times) is drawn on a log
	// axis, or its small end is a flat line at zero.
	if xs, ys := spans(fig); xs {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.X.Label.Text += " (log)"
		if ys {
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
			p.Y.Label.Text += " (log)"
		}
	}
	if _, ok := p.Y.Scale.(plot.LogScale); !ok {
		p.Y.Min = 0
	}
	if err := p.Save(5*vg.Inch, 3.5*vg.Inch, path); err != nil {
		return fmt.Errorf("report: %s: %w", fig[0].Figure, err)
	}
	return nil
}

// spans reports whether a figure's x and y values are all positive and
// span more than a factor of 100 (a log axis shows them better).
func spans(fig []Point) (x, y bool) {
	wide := func(v func(Point) float64) bool {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range fig {
			lo, hi = math.Min(lo, v(p)), math.Max(hi, v(p))
		}
		return lo > 0 && hi/lo > 100
	}
	return wide(func(p Point) float64 { return p.X }), wide(func(p Point) float64 { return p.Y })
}
