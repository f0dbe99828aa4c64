package fabric

import (
	"fmt"
	"slices"

	"github.com/peregrine-net/peregrine/core/clock"
)

// Dir names one direction of a fabric.
type Dir uint8

// Directions, and Both for a change that applies to the two.
const (
	AtoB Dir = iota // frames from port A to port B
	BtoA            // frames from port B to port A
	Both            // both directions (Schedule and SetLinkDown only)
)

func (d Dir) String() string {
	switch d {
	case AtoB:
		return "a→b"
	case BtoA:
		return "b→a"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Dir(%d)", uint8(d))
}

// dirs returns the directions d names.
func (f *Fabric) dirsOf(d Dir) []*direction {
	switch d {
	case AtoB:
		return f.dirs[:1]
	case BtoA:
		return f.dirs[1:]
	}
	return f.dirs[:]
}

// SetProfile replaces direction d's profile (AtoB or BtoA; Both sets the
// two). It applies to every frame taken from the input from the next Poll
// on; frames already held keep the release time they were given, and each
// impairment's random stream goes on where it was, so a run with a change
// at a given Poll is as reproducible as one without. It allocates only
// when p resizes the delay line (Limit) or the rate limiter's queue, and
// never per frame. Call it on the polling goroutine, between Polls; an
// invalid profile changes nothing.
func (f *Fabric) SetProfile(d Dir, p Profile) error {
	if d > Both {
		return badOptions("SetProfile: direction %v (use AtoB, BtoA or Both)", d)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("fabric %s: SetProfile %v: %w", f.name, d, err)
	}
	for _, dir := range f.dirsOf(d) {
		dir.apply(p)
	}
	return nil
}

// SetLinkDown takes direction d (or Both) down or brings it back up. While
// a direction is down, every frame it takes from its input is dropped
// (LinkDown), and so is every held frame whose release time comes while it
// is down (LinkCut: it was on the wire); both are fates of the
// conservation law (DirStats). A held frame due after the link is back up
// is delivered: a down time shorter than the delay cuts only what was due
// within it. Frames the output port already refused
// stay queued for it. Call it on the polling goroutine, between Polls; it
// does not allocate.
func (f *Fabric) SetLinkDown(d Dir, down bool) {
	for _, dir := range f.dirsOf(d) {
		dir.down = down
	}
}

// LinkDown reports whether direction d is down (Both: either of them).
// Call it on the polling goroutine.
func (f *Fabric) LinkDown(d Dir) bool {
	for _, dir := range f.dirsOf(d) {
		if dir.down {
			return true
		}
	}
	return false
}

// SetPathDown takes path (from 0) of direction d (or Both) down or brings
// it back up: while it is down, every frame sprayed or hashed onto it
// takes its place on the path's own link and is then lost
// (PathDownDrops), a black hole the fabric's spraying does not see.
// Frames already past the path's link are delivered. A later SetProfile
// replaces the set of down paths by its PathDown. Call it on the polling
// goroutine, between Polls; it does not allocate.
func (f *Fabric) SetPathDown(d Dir, path int, down bool) error {
	if d > Both {
		return badOptions("SetPathDown: direction %v (use AtoB, BtoA or Both)", d)
	}
	if path < 0 || path >= MaxPaths {
		return badOptions("SetPathDown: path %d (paths are numbered 0..%d)", path, MaxPaths-1)
	}
	for _, dir := range f.dirsOf(d) {
		dir.pathDown[path] = down
		dir.notePathDown()
	}
	return nil
}

// PathDown reports whether path of direction d (Both: of either) is down.
// Call it on the polling goroutine.
func (f *Fabric) PathDown(d Dir, path int) bool {
	if path < 0 || path >= MaxPaths {
		return false
	}
	for _, dir := range f.dirsOf(d) {
		if dir.pathDown[path] {
			return true
		}
	}
	return false
}

// Change is one scripted change of a fabric, applied by the first Poll
// whose now is at or after At: a new Profile for Dir (when Profile is not
// nil), then the link of Dir taken Down or brought Up, then path Path of
// Dir taken down (PathDown) or brought back up (PathUp).
type Change struct {
	At               clock.Time
	Dir              Dir
	Profile          *Profile
	Down, Up         bool
	Path             int
	PathDown, PathUp bool
}

func (c Change) String() string {
	s := fmt.Sprintf("at %v %v:", c.At, c.Dir)
	if c.Profile != nil {
		s += fmt.Sprintf(" profile {%v}", *c.Profile)
	}
	if c.Down {
		s += " down"
	}
	if c.Up {
		s += " up"
	}
	if c.PathDown {
		s += fmt.Sprintf(" path %d down", c.Path)
	}
	if c.PathUp {
		s += fmt.Sprintf(" path %d up", c.Path)
	}
	return s
}

// Schedule adds changes to the fabric's timeline: each is applied by the
// first Poll at or after its At (before that Poll moves any frame), in
// time order, and changes of the same instant in the order given.
// NextDeadline reports the next one, so a simulation's virtual clock stops
// there. It validates every change first and schedules none when one is
// wrong. Call it on the polling goroutine; it allocates, Poll does not.
func (f *Fabric) Schedule(changes ...Change) error {
	for i, c := range changes {
		if c.Dir > Both {
			return badOptions("Schedule: change %d: direction %v (use AtoB, BtoA or Both)", i, c.Dir)
		}
		if c.Down && c.Up || c.PathDown && c.PathUp {
			return badOptions("Schedule: change %d: Down and Up both set (schedule two changes)", i)
		}
		if (c.PathDown || c.PathUp) && (c.Path < 0 || c.Path >= MaxPaths) {
			return badOptions("Schedule: change %d: path %d (paths are numbered 0..%d)", i, c.Path, MaxPaths-1)
		}
		if c.Profile != nil {
			if err := c.Profile.Validate(); err != nil {
				return fmt.Errorf("fabric %s: Schedule: change %d: %w", f.name, i, err)
			}
			if c.Dir == Both {
				// Both directions may share the value; keep a copy of it.
				p := *c.Profile
				changes[i].Profile = &p
			}
		}
	}
	f.plan = append(f.plan, changes...)
	slices.SortStableFunc(f.plan[f.planNext:], func(a, b Change) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return nil
}

// runPlan applies the scheduled changes due at now.
func (f *Fabric) runPlan(now clock.Time) {
	for f.planNext < len(f.plan) && f.plan[f.planNext].At <= now {
		c := &f.plan[f.planNext]
		f.planNext++
		if c.Profile != nil {
			for _, dir := range f.dirsOf(c.Dir) {
				dir.apply(*c.Profile)
			}
		}
		if c.Down || c.Up {
			f.SetLinkDown(c.Dir, c.Down)
		}
		if c.PathDown || c.PathUp {
			_ = f.SetPathDown(c.Dir, c.Path, c.PathDown) // checked by Schedule
		}
	}
	if f.planNext == len(f.plan) && f.planNext > 0 {
		f.plan, f.planNext = f.plan[:0], 0
	}
}
