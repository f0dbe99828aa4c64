// Package report prints benchmark comparisons in the one format every
// peregrine bench scenario shares:
//
//	RATIO <name> <value> goal <op> <target> <PASS|FAIL|SKIP>
//	...
//	BENCH-SUMMARY pass=<n> fail=<m> [skip=<k>]
//
// A SKIP ratio could not be measured here (e.g. it needs root): its value
// is NaN, its detail line says why, and it counts as neither pass nor
// fail (skip=<k> appears only when k > 0).
//
// A ratio compares peregrine with a baseline measured in the same run, so the
// figures stay meaningful on a shared, noisy machine.
package report

import (
	"fmt"
	"io"
	"math"
)

// Op is the comparison a goal uses.
type Op string

const (
	AtMost  Op = "<="
	AtLeast Op = ">="
)

// Ratio is one comparison.
type Ratio struct {
	Name   string
	Value  float64
	Op     Op
	Target float64
	// Detail is printed on a comment line after the ratio: the raw figures
	// behind it.
	Detail string
	// Skipped marks a ratio that was not measured; Detail says why.
	Skipped bool
}

// Pass reports whether the goal is met. A NaN value (no measurement) fails.
func (r Ratio) Pass() bool {
	if math.IsNaN(r.Value) {
		return false
	}
	if r.Op == AtMost {
		return r.Value <= r.Target
	}
	return r.Value >= r.Target
}

// Line formats the RATIO line.
func (r Ratio) Line() string {
	verdict := "FAIL"
	switch {
	case r.Skipped:
		return fmt.Sprintf("RATIO %s NaN goal %s %g SKIP", r.Name, r.Op, r.Target)
	case r.Pass():
		verdict = "PASS"
	}
	return fmt.Sprintf("RATIO %s %.3f goal %s %g %s", r.Name, r.Value, r.Op, r.Target, verdict)
}

// Report collects ratios and writes them as they come.
type Report struct {
	w                io.Writer
	pass, fail, skip int
}

// New writes to w.
func New(w io.Writer) *Report { return &Report{w: w} }

// Add prints r (and its detail) and counts it.
func (rep *Report) Add(r Ratio) {
	fmt.Fprintln(rep.w, r.Line())
	if r.Detail != "" {
		fmt.Fprintf(rep.w, "  # %s\n", r.Detail)
	}
	switch {
	case r.Skipped:
		rep.skip++
	case r.Pass():
		rep.pass++
	default:
		rep.fail++
	}
}

// Note prints a comment line that is not a ratio.
func (rep *Report) Note(format string, args ...any) {
	fmt.Fprintf(rep.w, "  # "+format+"\n", args...)
}

// Summary prints the closing line and returns the counts.
func (rep *Report) Summary() (pass, fail int) {
	skip := ""
	if rep.skip > 0 {
		skip = fmt.Sprintf(" skip=%d", rep.skip)
	}
	fmt.Fprintf(rep.w, "BENCH-SUMMARY pass=%d fail=%d%s\n", rep.pass, rep.fail, skip)
	return rep.pass, rep.fail
}
