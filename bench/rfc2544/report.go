package rfc2544

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Report is a whole run: every DUT's result and the parameters that made
// them, as the JSON result records it.
type Report struct {
	Parameters map[string]any `json:"parameters"`
	Results    []*Result      `json:"results"`
	Ratios     []RatioLine    `json:"ratios,omitempty"`
}

// RatioLine is one of the run's RATIO lines.
type RatioLine struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Pass  bool    `json:"pass"`
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// barWidth is the longest bar of a Markdown plot, in characters.
const barWidth = 40

func bar(v, full float64) string {
	if !(full > 0) || v <= 0 {
		return ""
	}
	return strings.Repeat("█", max(1, int(v/full*barWidth+0.5)))
}

// WriteMarkdown writes the report: parameters, a throughput table across
// DUTs and sizes with a bar plot, then per DUT and size the latency,
// frame-loss and back-to-back tables with plots in text.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# RFC 2544 benchmark\n\n## Parameters\n\n| parameter | value |\n|---|---|\n")
	for _, k := range sortedKeys(r.Parameters) {
		fmt.Fprintf(&b, "| %s | %v |\n", k, r.Parameters[k])
	}
	fmt.Fprintf(&b, "\n## Throughput (NDR and PDR, frames/s offered)\n\n| DUT | size | NDR | PDR | NDR Gbit/s (L1) | repeatability | trials |\n|---|---|---:|---:|---:|---:|---:|\n")
	var peak float64
	for _, res := range r.Results {
		for _, s := range res.Sizes {
			peak = max(peak, s.NDR)
			trials := 0
			for _, x := range s.Searches {
				trials += len(x.Trials)
			}
			rep := "—"
			if s.Repeatability > 0 {
				rep = fmt.Sprintf("%.3f", s.Repeatability)
			}
			// Layer 1: the frame plus preamble and inter-frame gap (20 B).
			gbps := s.NDR * (s.Size.MeanBytes() + 20) * 8 / 1e9
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.3f | %s | %d |\n", res.DUT, s.Size, s.NDRText(), s.PDR, gbps, rep, trials)
		}
	}
	fmt.Fprintf(&b, "\n```\n")
	for _, res := range r.Results {
		for _, s := range res.Sizes {
			fmt.Fprintf(&b, "%-24s %-6s %12.0f %s\n", res.DUT, s.Size, s.NDR, bar(s.NDR, peak))
		}
	}
	fmt.Fprintf(&b, "```\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "\n## %s\n", res.DUT)
		for _, s := range res.Sizes {
			fmt.Fprintf(&b, "\n### %s (offered up to %.0f frames/s)\n", s.Size, s.MaxRate)
			if s.Ceiling > 0 {
				fmt.Fprintf(&b, "\nThe generator's ceiling at this size: %.0f frames/s offered and received with no DUT in the way.\n", s.Ceiling)
			}
			if len(s.Latency) > 0 {
				fmt.Fprintf(&b, "\nLatency (ns) at fractions of NDR %.0f frames/s:\n\n| load | rate | min | avg | p50 | p99 | p99.9 | max |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n", s.NDR)
				var top float64
				for _, p := range s.Latency {
					top = max(top, float64(p.P99))
				}
				for _, p := range s.Latency {
					fmt.Fprintf(&b, "| %.0f %% | %.0f | %d | %.0f | %d | %d | %d | %d |\n", 100*p.Load, p.Rate, p.Min, p.Avg, p.P50, p.P99, p.P999, p.Max)
				}
				fmt.Fprintf(&b, "\n```\np99 by load\n")
				for _, p := range s.Latency {
					fmt.Fprintf(&b, "%4.0f %% %10d ns %s\n", 100*p.Load, p.P99, bar(float64(p.P99), top))
				}
				fmt.Fprintf(&b, "```\n")
			}
			if len(s.FrameLoss) > 0 {
				fmt.Fprintf(&b, "\nFrame loss rate by offered load:\n\n```\n")
				for _, p := range s.FrameLoss {
					fmt.Fprintf(&b, "%4.0f %% %10.0f fps  loss %7.4f %% %s\n", 100*p.Load, p.Rate, 100*p.Loss, bar(p.Loss, 1))
				}
				fmt.Fprintf(&b, "```\n")
			}
			if bb := s.BackToBack; bb != nil {
				at := ""
				if bb.AtMax {
					at = fmt.Sprintf(" (the longest burst tried, %d, passed)", bb.Longest)
				}
				fmt.Fprintf(&b, "\nBack-to-back at %.0f frames/s: %.0f frames on average, bursts %v%s.\n", bb.Rate, bb.Mean, bb.Bursts, at)
			}
		}
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintf(&b, "\n## Ratios\n\n| ratio | value | goal | verdict |\n|---|---:|---|---|\n")
		for _, x := range r.Ratios {
			v := "FAIL"
			if x.Pass {
				v = "PASS"
			}
			fmt.Fprintf(&b, "| %s | %.3f | %s | %s |\n", x.Name, x.Value, x.Goal, v)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
