package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// captureChecks are the checks of a run's capture files: every pcap: input
// replayed whole (no record too large for a frame skipped, no damage
// cutting it short) and every capture written whole (no write error).
// lines name each file with its frame count, for the summary. Read them
// after the ports are closed, so the last flush is in.
func captureChecks(ports []port.Port) (lines []string, checks []check) {
	for _, p := range ports {
		if r, ok := p.(interface{ Loss() pcap.Loss }); ok {
			l := r.Loss()
			name := p.Info().Name
			lines = append(lines, fmt.Sprintf("input %s: %d records replayed", name, p.Stats().RxPackets))
			var why []string
			if l.Oversize > 0 {
				why = append(why, fmt.Sprintf("%d records larger than a pool frame's room of %d B skipped (the largest %d B)", l.Oversize, l.Room, l.Largest))
			}
			if l.Malformed > 0 {
				why = append(why, fmt.Sprintf("%d records too short for their link header skipped", l.Malformed))
			}
			if l.Damaged != "" {
				why = append(why, "the file is "+l.Damaged)
			}
			what := name + " replayed whole"
			if len(why) > 0 {
				what += ": " + strings.Join(why, "; ")
			}
			checks = append(checks, check{len(why) == 0, what})
		}
		if w, ok := p.(interface{ Report() pcap.Report }); ok {
			r := w.Report()
			lines = append(lines, captureLine(r))
			if r.Err != nil {
				checks = append(checks, check{false, fmt.Sprintf("capture %s written whole: %v (the file is incomplete)", r.File, r.Err)})
			} else {
				checks = append(checks, check{true, fmt.Sprintf("capture %s written whole (%d frames)", r.File, r.Frames)})
			}
		}
	}
	return lines, checks
}

// captureLine names a capture and what it holds.
func captureLine(r pcap.Report) string {
	s := fmt.Sprintf("capture %s: %d frames, %s", r.File, r.Frames, formatSize(r.Bytes))
	if r.OverMax > 0 {
		s += fmt.Sprintf("; %d more not written, the file reached max=%s", r.OverMax, formatSize(r.Max))
	}
	return s
}

// formatSize prints a byte count in the unit that keeps it short.
func formatSize(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 10<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// captureReport prints the capture lines and checks of ports (closed) at
// the end of a summary, with the verdict when there are any checks; it
// reports whether they all passed.
func captureReport(out io.Writer, ports []port.Port, interrupted bool) bool {
	lines, checks := captureChecks(ports)
	for _, l := range lines {
		fmt.Fprintf(out, "  %s\n", l)
	}
	if len(checks) == 0 {
		return true
	}
	return report(out, checks, interrupted)
}
