package fabric

import (
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// Defaults and limits of Options.
const (
	DefaultBurst = 32
	MaxBurst     = 256
)

// ErrInvalidOptions is wrapped by every error New and Link return for bad
// Options (profile errors wrap ErrBadProfile as well).
var ErrInvalidOptions = errors.New("fabric: invalid options")

// Options configures a Fabric.
type Options struct {
	// Name names the stage (default "fabric") and, in Link, its mem pairs.
	Name string
	// A and B are the two ports the fabric joins; it reads queue QueueA of
	// A and writes queue QueueB of B for the A→B direction, and the reverse
	// for B→A. The fabric drives those queues; the caller keeps the ports
	// (New's fabric never closes them; Link's closes the ones it made).
	A, B           port.Port
	QueueA, QueueB int
	// Pool is the pool the ports' frames live in. Duplicates are allocated
	// from it and dropped frames returned to it (through a per-fabric cache).
	Pool *mbuf.Pool
	// AtoB and BtoA are the impairments of each direction.
	AtoB, BtoA Profile
	// Seed seeds the random streams. Every direction and impairment draws
	// from its own PCG stream derived from it.
	Seed uint64
	// Burst is the most frames one Poll takes from each input and hands to
	// each output, 1..MaxBurst (0 → DefaultBurst).
	Burst int
	// Classify, when set, is called for every frame that survives loss in
	// a direction with more than one path, and returns its flow hash and
	// whether it must stay in order (keep its flow's path). A frame whose
	// Meta.FlowHash is nonzero keeps that hash whatever Classify says. When
	// nil, every frame is in order and its hash is Meta.FlowHash, or
	// FlowHash(frame) when that is 0. Classify runs on the Poll goroutine,
	// must not allocate (to keep Poll allocation-free) and must not keep
	// frame.
	Classify func(frame []byte) (flowHash uint32, inOrder bool)
	// LinkRing is the ring size of the mem pairs Link makes (a power of
	// two; 0 → DefaultLinkRing). New ignores it.
	LinkRing int
}

// Fabric is a two-port middlebox: frames from A go to B and frames from B
// go to A, each direction through its own Profile of impairments. It is an
// lcore.Stage and lcore.Stopper. Poll, NextDeadline, Stop and Close belong to
// the goroutine that polls it (Close may follow once that loop has ended);
// Stats may be called from any goroutine.
type Fabric struct {
	name   string
	cache  *mbuf.Cache
	dirs   [2]*direction
	owned  []port.Port // closed by Close (the fabric's ends of Link's pairs)
	now    clock.Time  // the latest time given to Poll or Stop
	closed bool
	// plan holds the scheduled changes, in time order, from planNext on.
	plan     []Change
	planNext int
}

var (
	_ lcore.Stage   = (*Fabric)(nil)
	_ lcore.Stopper = (*Fabric)(nil)
)

func badOptions(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

// New validates opts and returns a fabric between opts.A and opts.B. All
// its memory (delay lines, queues, burst arrays) is allocated here.
func New(opts Options) (*Fabric, error) {
	if opts.A == nil || opts.B == nil {
		return nil, badOptions("Options.A and Options.B are required (the two ports to join; fabric.Link makes a pair of mem links for you)")
	}
	if opts.Pool == nil {
		return nil, badOptions("Options.Pool is nil (pass the pool the ports' frames live in)")
	}
	if opts.Burst == 0 {
		opts.Burst = DefaultBurst
	}
	if opts.Burst < 1 || opts.Burst > MaxBurst {
		return nil, badOptions("Options.Burst %d is out of range (use 1..%d, or 0 for %d)", opts.Burst, MaxBurst, DefaultBurst)
	}
	for _, q := range []struct {
		field string
		p     port.Port
		q     int
	}{{"QueueA", opts.A, opts.QueueA}, {"QueueB", opts.B, opts.QueueB}} {
		if n := q.p.Info().Queues; q.q < 0 || q.q >= n {
			return nil, badOptions("Options.%s %d is out of range: port %s has %d queues (use 0..%d)", q.field, q.q, q.p.Info().Name, n, n-1)
		}
	}
	if opts.A == opts.B && opts.QueueA == opts.QueueB {
		return nil, badOptions("Options.A and Options.B are the same port and queue (%s queue %d): the two directions would read one queue", opts.A.Info().Name, opts.QueueA)
	}
	if err := opts.AtoB.Validate(); err != nil {
		return nil, fmt.Errorf("%w: Options.AtoB: %w", ErrInvalidOptions, err)
	}
	if err := opts.BtoA.Validate(); err != nil {
		return nil, fmt.Errorf("%w: Options.BtoA: %w", ErrInvalidOptions, err)
	}
	f := &Fabric{name: opts.Name, cache: opts.Pool.NewCache()}
	if f.name == "" {
		f.name = "fabric"
	}
	ends := [2]struct {
		in, out   port.Port
		inQ, outQ int
		profile   Profile
	}{
		{opts.A, opts.B, opts.QueueA, opts.QueueB, opts.AtoB},
		{opts.B, opts.A, opts.QueueB, opts.QueueA, opts.BtoA},
	}
	for i, e := range ends {
		d := newDirection(e.profile, opts.Seed, i, opts.Burst)
		d.in, d.out, d.inQ, d.outQ = e.in, e.out, e.inQ, e.outQ
		d.pool, d.cache, d.classify = opts.Pool, f.cache, opts.Classify
		f.dirs[i] = d
	}
	return f, nil
}

// Name implements lcore.Stage.
func (f *Fabric) Name() string { return f.name }

// Poll implements lcore.Stage: for each direction it takes one burst from
// the input port, decides each frame's fate (drop, copy, corrupt, path,
// release time), and hands the output port up to one burst of frames whose
// release time is at or before now. It returns the number of frames taken
// plus the number released; 0 means nothing moved.
//
// now is read from whatever clock the caller's loop uses (real or
// virtual); arrival times are the now of the Poll that took the frame. A
// now earlier than a previous one is treated as the previous one.
func (f *Fabric) Poll(now clock.Time) int {
	if f.closed {
		return 0
	}
	now = max(now, f.now)
	f.now = now
	if f.planNext < len(f.plan) {
		f.runPlan(now)
	}
	return f.dirs[0].poll(now) + f.dirs[1].poll(now)
}

// WakeFDs implements lcore.Waker: the input queues of both directions,
// where their ports have descriptors.
func (f *Fabric) WakeFDs(fds []int) []int {
	for _, d := range f.dirs {
		fds = append(fds, port.RxWaitFD(d.in, d.inQ))
	}
	return fds
}

// NextDeadline returns the earliest time at which a frame the fabric holds is
// due, so that a simulation can move its virtual clock straight there and
// Poll, or the next scheduled Change (Schedule). ok is false when the
// fabric holds nothing and has nothing scheduled. The time may be earlier
// than the last Poll's now: more than a burst was due, or the output port
// refused frames; poll again at once. Frames still waiting in the input
// ports are not known to the fabric and do not count. Call it from the
// polling goroutine.
func (f *Fabric) NextDeadline() (t clock.Time, ok bool) {
	for _, d := range f.dirs {
		if at, has := d.nextDeadline(f.now); has && (!ok || at < t) {
			t, ok = at, true
		}
	}
	if f.planNext < len(f.plan) {
		if at := f.plan[f.planNext].At; !ok || at < t {
			t, ok = at, true
		}
	}
	return t, ok
}

// Stop implements lcore.Stopper: it frees every frame the fabric holds
// (counted as Flushed) and flushes its mbuf cache, so that the pool sees
// them free. The fabric may be polled again afterwards.
func (f *Fabric) Stop(now clock.Time) {
	if f.closed {
		return
	}
	f.now = max(now, f.now)
	for _, d := range f.dirs {
		d.flush()
	}
	f.cache.Flush()
}

// Close frees every frame the fabric holds, releases its cache, and closes
// the ports the fabric made itself (Link's; ports given to New stay open).
// Call it once the loop polling the fabric has stopped. It is idempotent.
func (f *Fabric) Close() error {
	if f.closed {
		return nil
	}
	f.Stop(f.now)
	f.closed = true
	f.cache.Close()
	var errs []error
	for _, p := range f.owned {
		if err := p.Close(); err != nil {
			errs = append(errs, fmt.Errorf("fabric %s: closing port %s: %w", f.name, p.Info().Name, err))
		}
	}
	return errors.Join(errs...)
}

// Stats returns the counters as last published: once per Poll that moved
// frames, and by Stop. It may be called from any goroutine.
func (f *Fabric) Stats() Stats {
	return Stats{AtoB: f.dirs[0].snapshot(), BtoA: f.dirs[1].snapshot()}
}
