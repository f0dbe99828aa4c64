package main

import (
	"fmt"
	"io"
	"time"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/lcore"
)

// Lines a run prints at its end when the figures suggest the user asked
// for something the run could not do, so a surprising number comes with
// its likely cause.

// rateShortfall is how far below --rate a generator may fall before the
// run says so: rate limiters start each second with a partial burst.
const rateShortfall = 0.9

// warnRate prints a warning when queues generators, asked for requested
// frames per second each, sent fewer than rateShortfall of that over
// elapsed. requested 0 (as fast as possible) never warns; neither does a
// run too short to measure.
func warnRate(out io.Writer, requested float64, typed string, sent uint64, queues int, elapsed time.Duration) {
	if requested <= 0 || queues < 1 || elapsed < 100*time.Millisecond {
		return
	}
	achieved := float64(sent) / float64(queues) / elapsed.Seconds()
	if achieved >= rateShortfall*requested {
		return
	}
	fmt.Fprintf(out, "  warning: achieved %.0f frames/s per queue, %.0f%% of the requested --rate %s (%.0f frames/s): the port or the CPU could not keep up (try more queues and --lcores, a larger --burst, or --idle busy)\n",
		achieved, 100*achieved/requested, typed, requested)
}

// hintForeign explains frames the receiver could not attribute: from a
// flow beyond its --flows (the sender used more) or without a stamp. Those
// are not counted as received, so with --expect they show as lost.
func hintForeign(out io.Writer, foreign uint64, flows int) {
	if foreign == 0 {
		return
	}
	fmt.Fprintf(out, "  hint: %d frames were not counted: from flows beyond this receiver's --flows %d, or without a stamp. If the sender ran with more --flows, give gen --rx the same --flows, or its other flows count as lost\n",
		foreign, flows)
}

// warnRateOfStages is warnRate for the generators among stages (fwd
// --mode txonly).
func warnRateOfStages(out io.Writer, requested float64, typed string, stages []lcore.Stage, elapsed time.Duration) {
	var sent uint64
	gens := 0
	for _, st := range stages {
		if g, ok := st.(*traffic.Generator); ok {
			sent += g.Stats().Sent
			gens++
		}
	}
	warnRate(out, requested, typed, sent, gens, elapsed)
}
