package app

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RunOptions say how long Run waits and what it does meanwhile.
type RunOptions struct {
	// Duration ends the run after this long; 0 runs until Done or the
	// context ends. Negative is refused.
	Duration time.Duration
	// Period is how often Tick is called; it must be positive when Tick
	// is set.
	Period time.Duration
	// Tick, when set, is called every Period with the time since Run was
	// called (live figures).
	Tick func(elapsed time.Duration)
	// Done, when set, is polled every DonePoll and ends the run once it
	// reports true (a job that finished: a count sent, a file replayed).
	Done func() bool
}

// DonePoll is how often Run polls RunOptions.Done: a command's pace, not a
// synchronisation, so a finished job is noticed within this.
const DonePoll = 5 * time.Millisecond

// Run waits while the started loops work: until Duration passes, Done
// reports true, or ctx ends (interrupted). It calls Tick from this
// goroutine every Period. Elapsed counts from the call. Run does not stop
// the pipeline: drain what should drain, then Stop.
func (p *Pipeline) Run(ctx context.Context, o RunOptions) (elapsed time.Duration, interrupted bool, err error) {
	if !p.startCalled {
		return 0, false, errors.New("app: Run before Start (start the pipeline first)")
	}
	if o.Duration < 0 {
		return 0, false, fmt.Errorf("app: RunOptions.Duration %v is negative (use a positive duration, or 0 to run until Done or the context ends)", o.Duration)
	}
	if o.Tick != nil && o.Period <= 0 {
		return 0, false, fmt.Errorf("app: RunOptions.Period %v must be positive when Tick is set (e.g. time.Second)", o.Period)
	}
	start := time.Now()
	var deadline <-chan time.Time
	if o.Duration > 0 {
		t := time.NewTimer(o.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var tick <-chan time.Time
	if o.Tick != nil {
		t := time.NewTicker(o.Period)
		defer t.Stop()
		tick = t.C
	}
	var check <-chan time.Time
	if o.Done != nil {
		t := time.NewTicker(DonePoll)
		defer t.Stop()
		check = t.C
	}
	for {
		select {
		case <-tick:
			o.Tick(time.Since(start))
		case <-check:
			if o.Done() {
				return time.Since(start), false, nil
			}
		case <-deadline:
			return time.Since(start), false, nil
		case <-ctx.Done():
			return time.Since(start), true, nil
		}
	}
}

// WaitFor polls cond at a human pace (every millisecond) until it holds or
// timeout passes, and reports whether it held: a controlling goroutine's
// wait for work on the loops to drain (a generator's last frames reaching
// the sink, a load's operations completing) before Stop.
func WaitFor(cond func() bool, timeout time.Duration) bool {
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
