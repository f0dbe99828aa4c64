package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/internal/units"
)

// One look for every subcommand's output: a live line starts with the
// elapsed time in brackets, latencies read "176 ms" / "655 µs" (three
// significant digits and a unit, never a raw Go duration), rates "1.23
// Mpps" / "850 kpps", and a check's text says why it failed.

// liveLine is one live line: "[  1.0s] " and what the command measures.
func liveLine(at time.Duration, body string) string {
	return fmt.Sprintf("[%5.1fs] %s", at.Seconds(), body)
}

// formatDur is units.FormatDuration: "176 ms", "655 µs".
func formatDur(d time.Duration) string { return units.FormatDuration(d) }

// latencies prints a histogram's p50, p99, p999 and max, or "n/a" when it
// holds nothing.
func latencies(h *hist.Histogram) string {
	f := func(ns uint64) string { return units.FormatLatency(ns, h.Count()) }
	return fmt.Sprintf("p50 %s  p99 %s  p999 %s  max %s", f(h.Quantile(0.5)), f(h.Quantile(0.99)), f(h.Quantile(0.999)), f(h.Max()))
}

// formatRate prints frames (or operations) per second as "1.23 Mpps",
// "850 kpps" or "12 pps".
func formatRate(pps float64) string {
	switch {
	case pps >= 999.5e3:
		return units.Sig3(pps/1e6) + " Mpps"
	case pps >= 999.5:
		return units.Sig3(pps/1e3) + " kpps"
	}
	return units.Sig3(pps) + " pps"
}

// formatBits prints bits per second as "9.87 Gbit/s", "655 Mbit/s".
func formatBits(bps float64) string {
	switch {
	case bps >= 999.5e6:
		return units.Sig3(bps/1e9) + " Gbit/s"
	case bps >= 999.5e3:
		return units.Sig3(bps/1e6) + " Mbit/s"
	}
	return units.Sig3(bps/1e3) + " kbit/s"
}

// leakCheck is the check that every frame is back in the pool, naming how
// many are not.
func leakCheck(pool *mbuf.Pool) check { return errCheck("pool back to zero in use", pool.CheckLeaks()) }

// errCheck is a check that err is nil, with the error as the reason when
// it is not.
func errCheck(what string, err error) check { return check{err == nil, what + because(err)} }

// coverCheck is config.CoverCheck as a check of this package's reports.
func coverCheck(prefix string, drained bool, posted, covered uint64, moreDrain string) check {
	c := config.CoverCheck(drained, posted, covered, moreDrain)
	return check{c.OK, prefix + c.What}
}

// progressTag marks a progress check: one that something happened at all
// (operations completed, frames were sent), as opposed to one that
// nothing went wrong. A run interrupted before it could pass one has lost
// nothing: report shows it as not reached, and it does not fail the run.
const progressTag = "\x00progress\x00"

// progress is a progress check (progressTag).
func progress(ok bool, what string) check { return check{ok, progressTag + what} }

// verdict is how report and the JSON summary count c: its text, whether
// it passed, and whether it was waived (a progress check an interrupt
// stopped short of).
func (c check) verdict(interrupted bool) (what string, ok, waived bool) {
	what, isProgress := strings.CutPrefix(c.what, progressTag)
	if isProgress && !c.ok && interrupted {
		return what + " (not reached before the interrupt)", true, true
	}
	return what, c.ok, false
}
