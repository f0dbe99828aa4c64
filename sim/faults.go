package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// Fault is one scripted event of a cluster's timeline: Do happens at the
// first Poll at or after Start+At, before anything else moves at that
// instant. Faults of the same instant happen in the order given.
type Fault struct {
	At time.Duration
	Do FaultAction
}

func (f Fault) String() string { return fmt.Sprintf("+%v %v", f.At, f.Do) }

// FaultAction is what a Fault does: SetProfile, LinkDown, LinkUp,
// PathDown, PathUp, Kill,
// Revive, Restart, Replay, Inject or Call.
type FaultAction interface {
	apply(c *Cluster) error
	String() string
}

// SetProfile gives one direction of node Node's link a new profile
// (fabric.AtoB: node→switch, BtoA: switch→node, Both).
type SetProfile struct {
	Node    int
	Dir     fabric.Dir
	Profile fabric.Profile
}

func (a SetProfile) apply(c *Cluster) error { return c.Nodes[a.Node].Link.SetProfile(a.Dir, a.Profile) }
func (a SetProfile) String() string {
	return fmt.Sprintf("node %d link %v profile {%v}", a.Node, a.Dir, a.Profile)
}

// LinkDown takes one direction (or Both) of node Node's link down.
type LinkDown struct {
	Node int
	Dir  fabric.Dir
}

func (a LinkDown) apply(c *Cluster) error {
	c.Nodes[a.Node].Link.SetLinkDown(a.Dir, true)
	return nil
}
func (a LinkDown) String() string { return fmt.Sprintf("node %d link %v down", a.Node, a.Dir) }

// LinkUp brings it back up.
type LinkUp struct {
	Node int
	Dir  fabric.Dir
}

func (a LinkUp) apply(c *Cluster) error {
	c.Nodes[a.Node].Link.SetLinkDown(a.Dir, false)
	return nil
}
func (a LinkUp) String() string { return fmt.Sprintf("node %d link %v up", a.Node, a.Dir) }

// PathDown takes path Path (from 0) of one direction (or Both) of node
// Node's link down: a black hole its spraying does not see
// (fabric.Fabric.SetPathDown). PathUp brings it back.
type PathDown struct {
	Node, Path int
	Dir        fabric.Dir
}

func (a PathDown) apply(c *Cluster) error {
	return c.Nodes[a.Node].Link.SetPathDown(a.Dir, a.Path, true)
}
func (a PathDown) String() string {
	return fmt.Sprintf("node %d link %v path %d down", a.Node, a.Dir, a.Path)
}

// PathUp brings a path of node Node's link back up.
type PathUp struct {
	Node, Path int
	Dir        fabric.Dir
}

func (a PathUp) apply(c *Cluster) error {
	return c.Nodes[a.Node].Link.SetPathDown(a.Dir, a.Path, false)
}
func (a PathUp) String() string {
	return fmt.Sprintf("node %d link %v path %d up", a.Node, a.Dir, a.Path)
}

// Kill stops node Node answering (Cluster.Kill): with Discard its state is
// gone, without it is kept for Revive.
type Kill struct {
	Node    int
	Discard bool
}

func (a Kill) apply(c *Cluster) error { return c.Kill(a.Node, a.Discard) }
func (a Kill) String() string {
	if a.Discard {
		return fmt.Sprintf("kill node %d, state discarded", a.Node)
	}
	return fmt.Sprintf("kill node %d, state kept", a.Node)
}

// Revive resumes a node killed with its state kept.
type Revive struct{ Node int }

func (a Revive) apply(c *Cluster) error { return c.Revive(a.Node) }
func (a Revive) String() string         { return fmt.Sprintf("revive node %d", a.Node) }

// Restart replaces node Node's incarnation by a fresh one on the same
// address: with the seed it had unless NewSeed, then with Seed.
type Restart struct {
	Node    int
	NewSeed bool
	Seed    uint64
}

func (a Restart) apply(c *Cluster) error {
	seed := c.Nodes[a.Node].Seed
	if a.NewSeed {
		seed = a.Seed
	}
	return c.Restart(a.Node, seed)
}
func (a Restart) String() string {
	if a.NewSeed {
		return fmt.Sprintf("restart node %d with seed %d", a.Node, a.Seed)
	}
	return fmt.Sprintf("restart node %d with the same seed", a.Node)
}

// Replay sends copies of frames a Recording captured to node To, through
// the switch and To's link, as if the network had kept them: Pick chooses
// them (nil: all), given their index and decoded frame (nil when it does
// not decode).
type Replay struct {
	From *Recording
	Pick func(i int, f *wire.Frame) bool
	To   int
}

func (a Replay) apply(c *Cluster) error {
	for i := range a.From.Frames {
		cf := &a.From.Frames[i]
		var fp *wire.Frame
		if cf.OK {
			fp = &cf.Frame
		}
		if a.Pick != nil && !a.Pick(i, fp) {
			continue
		}
		if !c.Switch.Inject(a.To, cf.Raw) {
			return fmt.Errorf("sim: Replay to node %d: pool empty or port full", a.To)
		}
		a.From.Replayed++
	}
	return nil
}
func (a Replay) String() string {
	return fmt.Sprintf("replay %d recorded frames to node %d", len(a.From.Frames), a.To)
}

// Inject sends a frame built at the fault's time (from the cluster's live
// state: a forgery naming a live connection) to node To, through the
// switch and To's link. Frame may return nil to send nothing.
type Inject struct {
	To    int
	Name  string
	Frame func(c *Cluster) ([]byte, error)
}

func (a Inject) apply(c *Cluster) error {
	raw, err := a.Frame(c)
	if err != nil || raw == nil {
		return err
	}
	if !c.Switch.Inject(a.To, raw) {
		return fmt.Errorf("sim: Inject %s to node %d: pool empty or port full", a.Name, a.To)
	}
	return nil
}
func (a Inject) String() string { return fmt.Sprintf("inject %s to node %d", a.Name, a.To) }

// Call runs Fn: a fault of the test's own (close a connection, change a
// receiver's verdict).
type Call struct {
	Name string
	Fn   func(c *Cluster) error
}

func (a Call) apply(c *Cluster) error { return a.Fn(c) }
func (a Call) String() string         { return a.Name }

// Captured is one frame a Recording kept.
type Captured struct {
	At       clock.Time
	From, To int // switch ports (node indexes)
	Raw      []byte
	Frame    wire.Frame // decoded from Raw when OK
	OK       bool
}

// Recording captures frames the switch forwards (Cluster.Record), to be
// replayed later.
type Recording struct {
	Frames   []Captured
	Replayed int
	filter   func(from, to int, f *wire.Frame) bool
	max      int
}

// Record starts capturing the frames the switch forwards that filter
// accepts (filter sees the decoded frame, nil when it does not decode; nil
// filter: all), up to max frames (0: no bound). Capturing copies each frame:
// it is a test tool, not a fast path.
func (c *Cluster) Record(max int, filter func(from, to int, f *wire.Frame) bool) *Recording {
	r := &Recording{filter: filter, max: max}
	c.recordings = append(c.recordings, r)
	c.Switch.Observe = c.observe
	return r
}

// observe is the switch's Observe: OnForward, then the recordings.
func (c *Cluster) observe(from, to int, raw []byte) {
	if c.OnForward != nil {
		c.OnForward(from, to, raw)
	}
	if len(c.recordings) == 0 {
		return
	}
	var f wire.Frame
	ok := f.Decode(raw) == nil
	fp := &f
	if !ok {
		fp = nil
	}
	for _, r := range c.recordings {
		if (r.max > 0 && len(r.Frames) >= r.max) || (r.filter != nil && !r.filter(from, to, fp)) {
			continue
		}
		cp := append([]byte(nil), raw...)
		cf := Captured{At: c.Clock.Now(), From: from, To: to, Raw: cp, OK: ok}
		if ok {
			// Decode again from the copy, so the frame's slices alias it.
			_ = cf.Frame.Decode(cp)
		}
		r.Frames = append(r.Frames, cf)
	}
}

// timeline applies a cluster's faults at their times.
type timeline struct {
	c      *Cluster
	faults []Fault
	next   int
	start  clock.Time
	// Applied lists the faults applied so far, with their times.
	applied []string
}

func newTimeline(c *Cluster, faults []Fault) (*timeline, error) {
	fs := slices.Clone(faults)
	for i, f := range fs {
		if f.Do == nil {
			return nil, fmt.Errorf("sim: fault %d at +%v has no action", i, f.At)
		}
		if f.At < 0 {
			return nil, fmt.Errorf("sim: fault %d (%v) at a negative time", i, f.Do)
		}
	}
	slices.SortStableFunc(fs, func(a, b Fault) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return &timeline{c: c, faults: fs, start: c.Clock.Now()}, nil
}

func (t *timeline) poll(now clock.Time) (int, error) {
	work := 0
	for t.next < len(t.faults) && t.start.Add(t.faults[t.next].At) <= now {
		f := t.faults[t.next]
		t.next++
		if err := f.Do.apply(t.c); err != nil {
			return work, fmt.Errorf("fault %v: %w", f, err)
		}
		t.applied = append(t.applied, fmt.Sprintf("%v: %v", now, f.Do))
		work++
	}
	return work, nil
}

func (t *timeline) nextDeadline() (clock.Time, bool) {
	if t.next < len(t.faults) {
		return t.start.Add(t.faults[t.next].At), true
	}
	return 0, false
}

// FaultsApplied lists the faults applied so far, each with its time.
func (c *Cluster) FaultsApplied() []string { return c.timeline.applied }

// FaultsDone reports whether every fault of the timeline has happened.
func (c *Cluster) FaultsDone() bool { return c.timeline.next == len(c.timeline.faults) }
