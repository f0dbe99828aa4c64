package app

import (
	"errors"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
)

// Stop ends the pipeline in order (StopLoops, then Close; see "Stopping"
// in the package doc) and returns the loops' errors joined with Close's.
// Stop is idempotent: a second call, or one after StopLoops or Close,
// does only what is left and reports only that.
func (p *Pipeline) Stop() error {
	return errors.Join(p.StopLoops(), p.Close())
}

// Halt asks every loop to stop after its current iteration and returns at
// once (lcore.Loop.Stop): the end of a measured window, when what follows
// (StopLoops) may take a while. It is idempotent.
func (p *Pipeline) Halt() {
	for _, l := range p.started {
		l.Stop()
	}
}

// StopLoops asks every loop to stop (Halt), waits for all of them and returns why
// any ended abnormally (a stage panic, a pinning error; nil after a clean
// stop). Each loop calls Stop on its lcore.Stopper stages as it exits;
// stages whose loop never started are stopped here, from this goroutine.
// Ports and the pool stay open: read their final counters, then Close.
// A second call returns nil.
func (p *Pipeline) StopLoops() error {
	if p.loopsStopped {
		return nil
	}
	p.loopsStopped = true
	p.Halt()
	var errs []error
	for _, l := range p.started {
		errs = append(errs, l.Wait())
	}
	// A loop that never ran never called its stages' Stop hooks; no
	// goroutine polls them, so this one may.
	var now clock.Time
	if p.opts.Clock != nil {
		now = p.opts.Clock.Now()
	} else {
		now = clock.NewReal().Now()
	}
	for _, s := range p.stages {
		if p.ran[s.Loop] {
			continue
		}
		if st, ok := s.Stage.(lcore.Stopper); ok {
			st.Stop(now)
		}
	}
	return errors.Join(errs...)
}

// Close releases everything the pipeline owns, after StopLoops if that was
// not called: the loops' caches, what was given to Own (last first), the
// ports in order; then it checks that no frame of the pool is in use and
// closes the pool. A frame still in use makes the error wrap mbuf.ErrLeak
// (mbuf.Pool.CheckLeaks: it names the pool and the count, and the handles
// with Options.Pool.Debug), and the pool stays open. Close is idempotent:
// later calls return nil.
func (p *Pipeline) Close() error {
	if p.closed {
		return nil
	}
	err := p.StopLoops()
	p.closed = true
	// The loops are done with their caches; the ports return what they
	// hold through their own.
	for i, c := range p.caches {
		if c != nil {
			c.Close()
			p.caches[i] = nil
		}
	}
	for i := len(p.owned) - 1; i >= 0; i-- {
		err = errors.Join(err, p.owned[i].Close())
	}
	for _, pt := range p.ports {
		err = errors.Join(err, pt.Close())
	}
	if leak := p.pool.CheckLeaks(); leak != nil {
		return errors.Join(err, leak)
	}
	return errors.Join(err, p.pool.Close())
}
