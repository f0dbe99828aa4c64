package peregrine

import (
	"errors"
	"runtime"
	"time"

	"github.com/peregrine-net/peregrine/internal/inloop"
)

func init() {
	inloop.Attach = func(ep any, poll func() int) (func(), error) {
		p, ok := ep.(*Endpoint)
		if !ok || p == nil || p.e == nil {
			return nil, &Error{Op: "attach poll", Status: StatusInvalid, Cause: errors.New("not an in-process endpoint")}
		}
		return p.e.addPoller(poll)
	}
	inloop.Bell = func(ep any) (func() bool, func(int) (func(), error), error) {
		p, ok := ep.(*Endpoint)
		if !ok || p == nil || p.e == nil {
			return nil, nil, &Error{Op: "bell", Status: StatusInvalid, Cause: errors.New("not an in-process endpoint")}
		}
		e := p.e
		if e.caller || e.loop == nil {
			return nil, nil, &Error{Op: "bell", Status: StatusInvalid, Cause: errors.New("the endpoint's callers poll (PollCaller): its loop sleeps on no bell")}
		}
		return e.loop.Asleep, e.loop.WakeOn, nil
	}
}

// poller is a function the engine's loop runs after its own poll: the
// sidecar server's, so that the channels and the transport share one
// goroutine and nothing is handed between threads on the way.
type poller struct{ poll func() int }

// addPoller puts poll on the loop; the returned detach takes it off.
func (e *engine) addPoller(poll func() int) (func(), error) {
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	if e.dead.Load() {
		return nil, &Error{Op: "attach poll", Status: StatusClosed, Cause: errors.New("the endpoint is closed")}
	}
	p := &poller{poll: poll}
	var next []*poller
	if old := e.pollers.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, p)
	e.pollers.Store(&next)
	return func() { e.removePoller(p) }, nil
}

// removePoller takes p off the loop and returns once the loop no longer
// runs it.
func (e *engine) removePoller(p *poller) {
	e.pollMu.Lock()
	var next []*poller
	if old := e.pollers.Load(); old != nil {
		for _, q := range *old {
			if q != p {
				next = append(next, q)
			}
		}
	}
	if len(next) == 0 {
		e.pollers.Store(nil)
	} else {
		e.pollers.Store(&next)
	}
	e.pollMu.Unlock()
	// A run that loaded the old list may be under way: the loop's runs
	// are sequential and each ends with a count, so one more count is
	// enough. A loop that has ended runs nothing.
	r := e.loopRuns.Load()
	for e.loopRuns.Load() == r && !e.loopEnded.Load() {
		runtime.Gosched()
		time.Sleep(10 * time.Microsecond)
	}
}

// runPollers runs the attached pollers (on the loop).
func (e *engine) runPollers() int {
	n := 0
	if ps := e.pollers.Load(); ps != nil {
		for _, p := range *ps {
			n += p.poll()
		}
	}
	e.loopRuns.Add(1)
	return n
}
