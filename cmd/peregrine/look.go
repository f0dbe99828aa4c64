package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// One look for every subcommand's output: a live line starts with the
// elapsed time in brackets, latencies read "176 ms" / "655 µs" (three
// significant digits and a unit, never a raw Go duration), rates "1.23
// Mpps" / "850 kpps", and a check's text says why it failed.

// liveLine is one live line: "[  1.0s] " and what the command measures.
func liveLine(at time.Duration, body string) string {
	return fmt.Sprintf("[%5.1fs] %s", at.Seconds(), body)
}

// formatDur prints a duration with three significant digits and a unit
// (ns, µs, ms, s), as "176 ms" or "2.05 s".
func formatDur(d time.Duration) string {
	if d < 0 {
		return "-" + formatDur(-d)
	}
	v, unit := float64(d), "ns"
	for _, u := range []struct {
		scale float64
		name  string
	}{{1e3, "µs"}, {1e6, "ms"}, {1e9, "s"}} {
		if float64(d) >= u.scale*0.9995 {
			v, unit = float64(d)/u.scale, u.name
		}
	}
	return sig3(v) + " " + unit
}

// formatLatency is formatDur of a histogram's nanoseconds, or "n/a" when
// nothing was measured (count 0).
func formatLatency(ns uint64, count uint64) string {
	if count == 0 {
		return "n/a"
	}
	return formatDur(time.Duration(ns))
}

// formatRate prints frames (or operations) per second as "1.23 Mpps",
// "850 kpps" or "12 pps".
func formatRate(pps float64) string {
	switch {
	case pps >= 999.5e3:
		return sig3(pps/1e6) + " Mpps"
	case pps >= 999.5:
		return sig3(pps/1e3) + " kpps"
	}
	return sig3(pps) + " pps"
}

// sig3 prints v with three significant digits (at least the integer
// part): 1.23, 12.3, 123, 1234.
func sig3(v float64) string {
	switch {
	case v >= 99.95:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 9.995:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// leakCheck is the check that every frame is back in the pool, naming how
// many are not.
func leakCheck(pool *mbuf.Pool) check {
	if err := pool.CheckLeaks(); err != nil {
		return check{false, fmt.Sprintf("pool back to zero in use: %v", err)}
	}
	return check{true, "pool back to zero in use"}
}

// errCheck is a check that err is nil, with the error as the reason when
// it is not.
func errCheck(what string, err error) check {
	if err != nil {
		return check{false, fmt.Sprintf("%s: %v", what, err)}
	}
	return check{true, what}
}

// coverCheck is the MCSQ check that every posted WR was covered by one
// CQE; a drain cut short is its own reason, apart from the counts.
func coverCheck(prefix string, drained bool, posted, covered uint64) check {
	what := fmt.Sprintf("%severy posted WR covered by exactly one CQE (%d posted, %d covered)", prefix, posted, covered)
	switch {
	case covered != posted:
		what += fmt.Sprintf(": %d not covered", int64(posted)-int64(covered))
	case !drained:
		what += ": the drain was cut short before the queues were seen empty"
	}
	return check{drained && covered == posted, what}
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
