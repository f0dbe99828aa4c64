package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
)

// defaultMaxSteps bounds Run when the configuration does not.
const defaultMaxSteps = 50_000_000

// world is the set of stages a loop runs: the two endpoints and their
// network (Sim), or the nodes, their links, the switch and the fault
// timeline (Cluster).
type world interface {
	// pollStages polls every stage once at now, the loop's added stages
	// among them (pollAdded), in the world's order.
	pollStages(now clock.Time) (int, error)
	// deadlines offers every stage's next deadline to e.
	deadlines(e *earliest)
	// check checks the transports' invariants: the windows, and with deep
	// the CAM cross-check too.
	check(deep bool) error
}

// loop is the run loop Sim and Cluster share: poll every stage at one
// instant until none moves, then jump the virtual clock to the earliest
// deadline of any of them. It never spins through idle virtual time, so a
// run is fully determined by the world's stages and the clock's start.
type loop struct {
	clk      *clock.Virtual
	w        world
	checkLvl int // 0 none, 1 windows after every poll, 2 also deep every 64th
	maxSteps int
	added    []lcore.Stage
	polls    uint64
}

func newLoop(clk *clock.Virtual, w world, check, maxSteps int) loop {
	if maxSteps == 0 {
		maxSteps = defaultMaxSteps
	}
	return loop{clk: clk, w: w, checkLvl: check, maxSteps: maxSteps}
}

// waker is a stage that knows when it next has work (a paced workload).
type waker interface {
	NextDeadline() (clock.Time, bool)
}

// earliest collects the earliest of the deadlines offered to it.
type earliest struct {
	t  clock.Time
	ok bool
}

func (e *earliest) consider(at clock.Time, has bool) {
	if has && (!e.ok || at < e.t) {
		e.t, e.ok = at, true
	}
}

func (l *loop) add(st lcore.Stage) { l.added = append(l.added, st) }

// pollAdded polls the stages added with add.
func (l *loop) pollAdded(now clock.Time) int {
	work := 0
	for _, st := range l.added {
		work += st.Poll(now)
	}
	return work
}

// poll polls every stage once at the current time and checks the
// invariants; it returns the work done.
func (l *loop) poll() (int, error) {
	work, err := l.w.pollStages(l.clk.Now())
	if err != nil {
		return work, err
	}
	l.polls++
	if l.checkLvl > 0 {
		if err := l.w.check(l.checkLvl > 1 && l.polls%64 == 0); err != nil {
			return work, err
		}
	}
	return work, nil
}

// next returns the earliest deadline of any stage.
func (l *loop) next() (clock.Time, bool) {
	var e earliest
	l.w.deadlines(&e)
	for _, st := range l.added {
		if w, ok := st.(waker); ok {
			e.consider(w.NextDeadline())
		}
	}
	return e.t, e.ok
}

// step polls at the current instant; when nothing moved it advances the
// clock to the next deadline. It returns false when no stage has anything
// left to do.
func (l *loop) step() (bool, error) {
	work, err := l.poll()
	if err != nil || work > 0 {
		return true, err
	}
	t, ok := l.next()
	if !ok {
		return false, nil
	}
	if now := l.clk.Now(); t <= now {
		// Something is pending but could not move (a full pool or ring):
		// let time pass.
		t = now.Add(time.Microsecond)
	}
	return true, l.clk.Set(t)
}

// ErrStuck is returned by Run when the condition cannot be reached: the
// stages ran out of work, or the virtual time or step budget ran out.
var ErrStuck = errors.New("sim: simulation stuck")

// run steps until cond holds, for at most limit of virtual time.
func (l *loop) run(cond func() bool, limit time.Duration) error {
	end := l.clk.Now().Add(limit)
	for steps := 0; !cond(); steps++ {
		if steps >= l.maxSteps {
			return fmt.Errorf("%w: %d steps without reaching the goal (now %v)", ErrStuck, steps, l.clk.Now())
		}
		more, err := l.step()
		if err != nil {
			return err
		}
		if !more {
			if cond() {
				return nil
			}
			return fmt.Errorf("%w: nothing left to do at %v", ErrStuck, l.clk.Now())
		}
		if l.clk.Now() > end {
			return fmt.Errorf("%w: goal not reached within %v of virtual time", ErrStuck, limit)
		}
	}
	return nil
}

// idle runs for d of virtual time (or until nothing is left to do).
func (l *loop) idle(d time.Duration) error {
	end := l.clk.Now().Add(d)
	for l.clk.Now() < end {
		t, ok := l.next()
		if work, err := l.poll(); err != nil {
			return err
		} else if work > 0 {
			continue
		}
		if !ok || t > end {
			return l.clk.Set(end)
		}
		if t <= l.clk.Now() {
			t = l.clk.Now().Add(time.Microsecond)
		}
		if err := l.clk.Set(t); err != nil {
			return err
		}
	}
	return nil
}

// checkTransport checks one transport's invariants: its windows, and with
// deep its CAM against them too.
func checkTransport(e *rt.Endpoint, deep bool) error {
	if deep {
		return e.CheckInvariants()
	}
	return e.CheckWindows()
}

// ownPool returns pool, or when it is nil a new one of frames frames
// (default DefaultFrames) that the caller owns: it checks it for leaks and
// closes it at the end (closeOwnedPool).
func ownPool(name string, pool *mbuf.Pool, frames int) (p *mbuf.Pool, owned bool, err error) {
	if pool != nil {
		return pool, false, nil
	}
	if frames == 0 {
		frames = DefaultFrames
	}
	p, err = mbuf.New(mbuf.Options{Name: name, Frames: frames, CacheSize: 128})
	return p, err == nil, err
}

// closeOwnedPool checks an owned pool for leaks and closes it.
func closeOwnedPool(p *mbuf.Pool, owned bool) error {
	if !owned {
		return nil
	}
	return errors.Join(p.CheckLeaks(), p.Close())
}
