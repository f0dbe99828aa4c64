package lcore

import "errors"

// Group starts, stops and waits for several loops together. Its zero value is
// an empty group. Use a Group from one controlling goroutine.
type Group struct {
	loops []*Loop
}

// Add adds a loop (not yet started) to the group.
func (g *Group) Add(l *Loop) { g.loops = append(g.loops, l) }

// Loops returns the group's loops in the order they were added.
func (g *Group) Loops() []*Loop { return g.loops }

// StartAll starts every loop in order. If one fails to start, StartAll stops
// and waits for the loops it had started and returns the start error joined
// with whatever those loops reported.
func (g *Group) StartAll() error {
	for i, l := range g.loops {
		if err := l.Start(); err != nil {
			errs := []error{err}
			for _, started := range g.loops[:i] {
				started.Stop()
			}
			for _, started := range g.loops[:i] {
				errs = append(errs, started.Wait())
			}
			return errors.Join(errs...)
		}
	}
	return nil
}

// StopAll asks every loop to stop and returns at once.
func (g *Group) StopAll() {
	for _, l := range g.loops {
		l.Stop()
	}
}

// WaitAll waits for every loop and returns their errors joined (nil if all
// ended cleanly).
func (g *Group) WaitAll() error {
	var errs []error
	for _, l := range g.loops {
		errs = append(errs, l.Wait())
	}
	return errors.Join(errs...)
}

// Stats returns the sum of the loops' counters.
func (g *Group) Stats() Stats {
	var sum Stats
	for _, l := range g.loops {
		sum.add(l.Stats())
	}
	return sum
}
