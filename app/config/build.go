package config

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// Appliance is a configuration built into a pipeline: the pool, the ports
// opened, every stage added to its lcore, not yet started.
type Appliance struct {
	cfg *Config
	// Pipeline is the built pipeline; the Appliance starts and stops it.
	Pipeline *app.Pipeline
	// Stages are the built stages, in the file's order.
	Stages []Built
}

// Built is one built stage.
type Built struct {
	Placed
	Running Running
}

// Build opens what cfg declares — the pool, the ports, in order — and adds
// every stage to its lcore's loop (stages of a lower Kind.Phase first, in
// file order within a phase). On error everything opened is closed again
// (ports, pool) and the error names the field to blame.
func Build(cfg *Config, clk clock.Clock) (*Appliance, error) {
	f := &cfg.File
	if clk == nil {
		clk = clock.NewReal()
	}
	idle, _ := lcore.ParseIdleMode(f.Idle) // validated
	lcs := make([]app.Lcore, len(f.Lcores))
	for i, lc := range f.Lcores {
		lcs[i] = app.Lcore{Name: lc.Name, CPU: -1}
		if lc.CPU != nil {
			lcs[i].CPU = *lc.CPU
		}
		if lc.Idle != "" {
			m, _ := lcore.ParseIdleMode(lc.Idle)
			lcs[i].Idle = &lcore.IdlePolicy{Mode: m}
		}
	}
	specs := make([]string, len(f.Ports))
	for i, p := range f.Ports {
		specs[i] = p.Spec
	}
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "peregrine", Frames: f.Pool.Frames, FrameSize: f.Pool.FrameSize},
		Ports:  specs,
		Lcores: lcs,
		Idle:   lcore.IdlePolicy{Mode: idle},
		Clock:  clk,
	})
	if err != nil {
		return nil, fieldPath(err)
	}
	a := &Appliance{cfg: cfg, Pipeline: p}
	built := map[string]Running{}
	for _, st := range buildOrder(cfg.Stages) {
		r, err := st.Spec.Build(&Builder{Pipeline: p, Loop: st.Lcore, Clock: clk, cfg: cfg, built: built})
		if err != nil {
			err = &Error{st.Path, fieldCause(err)}
			if serr := p.Stop(); serr != nil {
				err = fmt.Errorf("%w (and while closing what was opened: %v)", err, serr)
			}
			return nil, err
		}
		built[st.Name] = r
	}
	for _, st := range cfg.Stages {
		a.Stages = append(a.Stages, Built{Placed: st, Running: built[st.Name]})
	}
	return a, nil
}

// buildOrder puts every stage after the stages it needs (Needer), in file
// order otherwise. Validate made sure what is needed exists; a cycle
// leaves its stages last, in file order, and their Build reports it.
func buildOrder(stages []Placed) []Placed {
	var order []Placed
	done := map[string]bool{}
	left := slices.Clone(stages)
	for len(left) > 0 {
		var next []Placed
		for _, st := range left {
			ready := true
			if n, ok := st.Spec.(Needer); ok {
				for _, name := range n.Needs() {
					ready = ready && done[name]
				}
			}
			if ready {
				order = append(order, st)
				done[st.Name] = true
			} else {
				next = append(next, st)
			}
		}
		if len(next) == len(left) {
			return append(order, next...)
		}
		left = next
	}
	return order
}

// fieldPath names the file's field behind an option app.New refused.
func fieldPath(err error) error {
	var fe *app.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	switch fe.Option {
	case "Pool":
		return &Error{"pool", fe.Err}
	case "Ports":
		return &Error{fmt.Sprintf("ports[%d].spec", fe.Index), fe.Err}
	case "Lcores":
		return &Error{fmt.Sprintf("lcores[%d]", fe.Index), fe.Err}
	case "Idle":
		return &Error{"idle", fe.Err}
	}
	return err
}

func fieldCause(err error) error {
	var fe *app.FieldError
	if errors.As(err, &fe) {
		return fmt.Errorf("%s: %w", fe.Field(), fe.Err)
	}
	return err
}

// Readies returns the READY lines of the transport targets (key, length,
// MAC and IP an initiator in another process needs), known before Start.
func (a *Appliance) Readies() []string {
	var out []string
	for _, b := range a.Stages {
		if t, ok := b.Running.(*transportRun); ok {
			if line := t.Ready(); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

// starter is a Running with goroutines of its own (the MCSQ initiator's
// posters) that start once the loops run.
type starter interface {
	Start(ctx context.Context)
}

// RunOptions say how the appliance runs.
type RunOptions struct {
	// Duration overrides run.duration when DurationSet (0: until every
	// stage with an end has finished, or ctx ends).
	Duration    time.Duration
	DurationSet bool
	// Tick is called every run.stats_period with the time since the start.
	Tick func(elapsed time.Duration)
	// Started is called once the loops run.
	Started func()
	// Stopping is called when the run ends (its time is up, every stage
	// finished, or ctx ended), before the drain.
	// finished says every stage with an end had finished.
	Stopping func(interrupted, finished bool)
}

// Result is how a run ended.
type Result struct {
	Elapsed     time.Duration
	Interrupted bool
	// Lost names what the drain or the stop left behind: operations still
	// outstanding, frames not delivered, frames not back in the pool.
	// Empty after a clean stop.
	Lost []string
	// Reports are each stage's summary lines and checks, in file order.
	Reports []StageReport
	// PoolInUse is the frames still allocated after stop (0 after a clean
	// stop).
	PoolInUse int
	// Err is why the loops or the stop failed (nil after a clean stop).
	Err error
}

// StageReport is one stage's summary.
type StageReport struct {
	Name, Kind string
	Lines      []string
	Checks     []Check
}

// OK reports whether the run stopped cleanly and every check passed.
func (r *Result) OK() bool {
	if r.Err != nil || len(r.Lost) > 0 {
		return false
	}
	for _, s := range r.Reports {
		for _, c := range s.Checks {
			if !c.OK {
				return false
			}
		}
	}
	return true
}

// Run starts the pipeline and runs it until the duration passes, every
// stage with an end has finished, or ctx ends (a signal). Then it stops
// every stage posting or sending and drains in-flight work for up to
// run.drain — less if hurry ends (a second signal) — stops the loops,
// closes the ports and checks that every frame is back in the pool. It
// always stops the pipeline; what was lost is in Result.Lost.
func (a *Appliance) Run(ctx, hurry context.Context, o RunOptions) Result {
	f := &a.cfg.File
	var res Result
	if err := a.Pipeline.Start(); err != nil {
		res.Err = errors.Join(fieldPath(err), a.Pipeline.Stop())
		return res
	}
	for _, b := range a.Stages {
		if s, ok := b.Running.(starter); ok {
			s.Start(ctx)
		}
	}
	if o.Started != nil {
		o.Started()
	}
	duration := f.Run.Duration.D()
	if o.DurationSet {
		duration = o.Duration
	}
	var done func() bool
	if slices.ContainsFunc(a.Stages, func(b Built) bool { return b.Running.Finite() }) {
		done = func() bool {
			for _, b := range a.Stages {
				if b.Running.Finite() && !b.Running.Done() {
					return false
				}
			}
			return true
		}
	}
	ro := app.RunOptions{Duration: duration, Done: done}
	if o.Tick != nil {
		ro.Period, ro.Tick = f.Run.StatsPeriod.D(), o.Tick
	}
	elapsed, interrupted, err := a.Pipeline.Run(ctx, ro)
	res.Elapsed, res.Interrupted = elapsed, interrupted
	if o.Stopping != nil {
		o.Stopping(interrupted, !interrupted && done != nil && done())
	}
	drainCtx, cancel := context.WithTimeout(hurry, f.Run.Drain.D())
	for _, b := range a.Stages {
		if lost := b.Running.Drain(drainCtx); lost != "" {
			res.Lost = append(res.Lost, fmt.Sprintf("%s: %s", b.Name, lost))
		}
	}
	cancel()
	loopErr := a.Pipeline.StopLoops()
	for _, b := range a.Stages {
		lines, checks := b.Running.Report()
		res.Reports = append(res.Reports, StageReport{Name: b.Name, Kind: b.Kind, Lines: lines, Checks: checks})
	}
	pool := a.Pipeline.Pool()
	closeErr := a.Pipeline.Close()
	res.PoolInUse = pool.InUse()
	if res.PoolInUse != 0 {
		res.Lost = append(res.Lost, fmt.Sprintf("pool: %d frame(s) not back in the pool", res.PoolInUse))
	}
	if !errors.Is(closeErr, mbuf.ErrLeak) {
		res.Err = closeErr
	}
	res.Err = errors.Join(err, loopErr, res.Err)
	return res
}
