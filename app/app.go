package app

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// Options declares a pipeline: its pool, its ports and its poll loops.
// The stages come later (Add), because they are built from the pool and
// the ports New makes.
type Options struct {
	// Pool configures the one packet pool every port and stage uses
	// (Frames is required; see mbuf.Options; Name defaults to
	// "peregrine"). Set Pool.Debug to have the leak check at Stop name the
	// leaked handles.
	Pool mbuf.Options
	// Ports are port specs ("afxdp:veth0?queue=0", "mem:a/0", "null:")
	// opened in order with pmd.Open from one pmd.Env, so that the two ends
	// of a mem pair find each other. May be empty (AddPort).
	Ports []string
	// Lcores are the poll loops, at least one. Stages name a loop by its
	// index here. A loop no stage was given to is not created.
	Lcores []Lcore
	// Idle is what every loop does when its stages find nothing to do.
	Idle lcore.IdlePolicy
	// Isolate keeps the process's other threads off each pinned loop's CPU
	// while it runs (lcore.Options.Isolate).
	Isolate bool
	// Clock is read by every loop once per iteration and given to the
	// ports' drivers (pmd.Env.Clock); nil selects one real clock.
	Clock clock.Clock
	// PortOwnCaches leaves every port on its own mbuf caches instead of the
	// caches of the loops that drive its queues (A/B experiments; see
	// "One cache per loop" in the package doc).
	PortOwnCaches bool
}

// Lcore is one poll loop.
type Lcore struct {
	// Name identifies the loop in errors; "" selects "lcore-CPU" (or
	// "lcore-uN" for the N-th lcore when unpinned).
	Name string
	// CPU is the CPU the loop's thread is pinned to, or -1 for none. It
	// must be in the process's allowed CPU set.
	CPU int
	// Idle, when set, is what this loop does when its stages find nothing
	// to do, instead of Options.Idle.
	Idle *lcore.IdlePolicy
}

// OnCPUs returns one unnamed Lcore per CPU, in order.
func OnCPUs(cpus ...int) []Lcore {
	out := make([]Lcore, len(cpus))
	for i, c := range cpus {
		out[i] = Lcore{CPU: c}
	}
	return out
}

// Queue names one queue of one of the pipeline's ports.
type Queue struct {
	Port  port.Port
	Queue int
}

// Stage places an lcore.Stage on a loop.
type Stage struct {
	// Stage is polled by the loop. If it implements lcore.Stopper, its
	// Stop is called once when the loop ends (or by StopLoops when the
	// loop never started).
	Stage lcore.Stage
	// Loop is the index in Options.Lcores of the loop that polls Stage.
	Loop int
	// Rx and Tx are the port queue halves Stage receives from and
	// transmits on. Start gives each of them the loop's cache (Cache(Loop))
	// when its port implements CacheUser; leave them empty when Stage does
	// not use the loop's cache for its frames.
	Rx, Tx []Queue
}

// CacheUser is implemented by ports that can take frames from, and free
// them to, the cache of the loop driving a queue half (afxdp, afpacket):
// rx serves the receive half, tx the transmit half, nil keeps the port's
// own.
type CacheUser interface {
	UseCaches(queue int, rx, tx *mbuf.Cache) error
}

// FieldError is the error New returns when one part of Options is
// refused: Option names the field ("Pool", "Ports", "Lcores", "Idle"),
// Index the element of a list (-1 for none), Err the cause. A command maps
// Option back to the flag that set it.
type FieldError struct {
	Option string
	Index  int
	Err    error
}

// Field returns the field as written in Options, e.g. "Ports[1]".
func (e *FieldError) Field() string {
	if e.Index < 0 {
		return e.Option
	}
	return fmt.Sprintf("%s[%d]", e.Option, e.Index)
}

func (e *FieldError) Error() string { return "app: Options." + e.Field() + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// Pipeline is a pool, its ports, poll loops and stages. Use it from one
// controlling goroutine.
type Pipeline struct {
	opts   Options
	pool   *mbuf.Pool
	env    *pmd.Env
	ports  []port.Port
	owned  []io.Closer
	stages []Stage
	// caches[i] is loop i's cache, nil until Cache(i).
	caches []*mbuf.Cache
	// rxLoop and txLoop record which loop drives each declared receive
	// and transmit queue half: checked by Add, wired by Start.
	rxLoop, txLoop map[Queue]int

	loops   []*lcore.Loop // built by Start, in Options.Lcores order
	started []*lcore.Loop // the loops whose Start succeeded
	ran     []bool        // ran[i]: Options.Lcores[i]'s loop was started

	startCalled, loopsStopped, closed bool
}

// New validates opts, makes the pool and opens the ports. On error nothing
// stays open. Every error is a *FieldError naming the option.
func New(opts Options) (*Pipeline, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.Lcores = slices.Clone(opts.Lcores)
	opts.Ports = slices.Clone(opts.Ports)
	if opts.Pool.Name == "" {
		opts.Pool.Name = "peregrine"
	}
	pool, err := mbuf.New(opts.Pool)
	if err != nil {
		return nil, &FieldError{"Pool", -1, err}
	}
	p := &Pipeline{
		opts:   opts,
		pool:   pool,
		env:    &pmd.Env{Pool: pool, Clock: opts.Clock},
		caches: make([]*mbuf.Cache, len(opts.Lcores)),
		ran:    make([]bool, len(opts.Lcores)),
		rxLoop: make(map[Queue]int),
		txLoop: make(map[Queue]int),
	}
	for i, spec := range opts.Ports {
		pt, err := p.open(spec)
		if err != nil {
			if cerr := p.Close(); cerr != nil {
				err = fmt.Errorf("%w (and while closing what was opened: %v)", err, cerr)
			}
			return nil, &FieldError{"Ports", i, err}
		}
		p.ports = append(p.ports, pt)
	}
	return p, nil
}

// open opens one port spec; a capture=FILE parameter (pmd.CaptureParam)
// wraps the port in a pcap mirror of its received and transmitted frames.
func (p *Pipeline) open(spec string) (port.Port, error) {
	base, capture, err := pcap.SplitCapture(spec)
	if err != nil {
		return nil, err
	}
	pt, err := pmd.Open(p.env, base)
	if err != nil || capture.File == "" {
		return pt, err
	}
	m, err := pcap.NewMirror(pt, p.pool, pcap.MirrorOptions{Path: capture.File, Snaplen: capture.Snaplen, Max: capture.Max, Clock: p.opts.Clock})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s=%s: %w (give a file this process can create)", pmd.CaptureParam, capture.File, err), pt.Close())
	}
	return m, nil
}

// validate checks what can be checked before anything is made. The loops
// are asked by lcore.New itself (CPU allowed, idle policy sane): it only
// validates and allocates, so the trial loop is simply dropped.
func (o *Options) validate() error {
	if len(o.Lcores) == 0 {
		return &FieldError{"Lcores", -1, errors.New("none given (give at least one, e.g. []app.Lcore{{CPU: 0}}; CPU -1 leaves a loop unpinned)")}
	}
	noop := []lcore.Stage{noopStage{}}
	if _, err := lcore.New(lcore.Options{CPU: -1, Idle: o.Idle, Stages: noop}); err != nil {
		return &FieldError{"Idle", -1, err}
	}
	for i, lc := range o.Lcores {
		lo := lcore.Options{CPU: lc.CPU, Stages: noop}
		if lc.Idle != nil {
			lo.Idle = *lc.Idle
		}
		if _, err := lcore.New(lo); err != nil {
			return &FieldError{"Lcores", i, err}
		}
	}
	for i, spec := range o.Ports {
		if spec == "" {
			return &FieldError{"Ports", i, errors.New(`empty spec (give DRIVER:ARGS, e.g. "afxdp:veth0" or "null:")`)}
		}
		for j, earlier := range o.Ports[:i] {
			if pmd.SamePort(spec, earlier) {
				return &FieldError{"Ports", i, fmt.Errorf("%q opens the same port as port %d (%q): open each port once", spec, j, earlier)}
			}
		}
	}
	return nil
}

// noopStage lets validate ask lcore.New about a loop's options.
type noopStage struct{}

func (noopStage) Name() string        { return "validate" }
func (noopStage) Poll(clock.Time) int { return 0 }

// name is the loop's name: Name, or one made from the CPU or the index.
func (l Lcore) name(i int) string {
	switch {
	case l.Name != "":
		return l.Name
	case l.CPU >= 0:
		return fmt.Sprintf("lcore-%d", l.CPU)
	default:
		return fmt.Sprintf("lcore-u%d", i)
	}
}

// Pool returns the pipeline's pool.
func (p *Pipeline) Pool() *mbuf.Pool { return p.pool }

// Port returns the i-th port: Options.Ports in order, then those given to
// AddPort.
func (p *Pipeline) Port(i int) port.Port { return p.ports[i] }

// Ports returns the ports in order (the slice is the caller's).
func (p *Pipeline) Ports() []port.Port { return slices.Clone(p.ports) }

// Lcores returns how many loops Options declared; stages are commonly
// spread over them round-robin (stage i on loop i % Lcores()).
func (p *Pipeline) Lcores() int { return len(p.opts.Lcores) }

// AddPort adopts a port made elsewhere (mem.NewPair, fabric.Link): Stop
// closes it with the others. It returns the port's index.
func (p *Pipeline) AddPort(pt port.Port) int {
	p.ports = append(p.ports, pt)
	return len(p.ports) - 1
}

// Own hands c to the pipeline to close after its loops stop and before its
// ports close (last given, first closed): a fabric.Fabric, a transport
// endpoint, anything that holds frames or a cache of its own.
func (p *Pipeline) Own(c io.Closer) { p.owned = append(p.owned, c) }

// Cache returns loop's mbuf cache, making it on first use. Give it to the
// stages that run on loop (and only to them): it belongs to that loop's
// goroutine from Start until the loop ends, and the pipeline closes it.
// It panics if loop is not an index of Options.Lcores.
func (p *Pipeline) Cache(loop int) *mbuf.Cache {
	if loop < 0 || loop >= len(p.caches) {
		panic(fmt.Sprintf("app: Cache(%d): the pipeline has lcores 0..%d", loop, len(p.caches)-1))
	}
	if p.caches[loop] == nil {
		p.caches[loop] = p.pool.NewCache()
	}
	return p.caches[loop]
}

// Add declares a stage: the loop that polls it and the queue halves it
// drives. Stages run in the order they were added to their loop. Add
// refuses a stage after Start, a loop that is not in Options.Lcores, a
// queue of a port that is not the pipeline's, and a queue half another
// loop already drives.
func (p *Pipeline) Add(s Stage) error {
	if p.startCalled {
		return errors.New("app: Add after Start (declare every stage before starting the pipeline)")
	}
	if s.Stage == nil {
		return errors.New("app: Add: Stage.Stage is nil (pass the lcore.Stage to run)")
	}
	name := s.Stage.Name()
	if s.Loop < 0 || s.Loop >= len(p.opts.Lcores) {
		return fmt.Errorf("app: Add %q: Loop %d is not an lcore of the pipeline (use 0..%d, an index of Options.Lcores)", name, s.Loop, len(p.opts.Lcores)-1)
	}
	for _, h := range []struct {
		what  string
		qs    []Queue
		loops map[Queue]int
	}{{"receive", s.Rx, p.rxLoop}, {"transmit", s.Tx, p.txLoop}} {
		for _, q := range h.qs {
			if !slices.Contains(p.ports, q.Port) {
				return fmt.Errorf("app: Add %q: %s queue of a port that is not the pipeline's (open it through Options.Ports, or adopt it with AddPort first)", name, h.what)
			}
			if n := q.Port.Info().Queues; q.Queue < 0 || q.Queue >= n {
				return fmt.Errorf("app: Add %q: %s queue %d of port %s is out of range (it has %d)", name, h.what, q.Queue, q.Port.Info().Name, n)
			}
			if l, ok := h.loops[q]; ok && l != s.Loop {
				return fmt.Errorf("app: Add %q: the %s half of port %s queue %d is already driven by lcore %d, not %d (one goroutine drives a queue half: put the stages on one loop, or give them different queues)",
					name, h.what, q.Port.Info().Name, q.Queue, l, s.Loop)
			}
		}
	}
	for _, q := range s.Rx {
		p.rxLoop[q] = s.Loop
	}
	for _, q := range s.Tx {
		p.txLoop[q] = s.Loop
	}
	s.Rx, s.Tx = slices.Clone(s.Rx), slices.Clone(s.Tx)
	p.stages = append(p.stages, s)
	return nil
}

// Start wires the loops' caches into the queue halves their stages drive,
// builds the loops and starts them. It may be called once; on error the
// pipeline still needs Stop.
func (p *Pipeline) Start() error {
	if p.startCalled {
		return errors.New("app: Start called twice (a pipeline runs once)")
	}
	p.startCalled = true
	if len(p.stages) == 0 {
		return errors.New("app: Start: no stages (declare them with Add)")
	}
	if err := p.wireCaches(); err != nil {
		return err
	}
	per := make([][]lcore.Stage, len(p.opts.Lcores))
	for _, s := range p.stages {
		per[s.Loop] = append(per[s.Loop], s.Stage)
	}
	var index []int // index[k]: the Options.Lcores entry of p.loops[k]
	for i, lc := range p.opts.Lcores {
		if len(per[i]) == 0 {
			continue
		}
		idle := p.opts.Idle
		if lc.Idle != nil {
			idle = *lc.Idle
		}
		l, err := lcore.New(lcore.Options{Name: lc.name(i), CPU: lc.CPU, Clock: p.opts.Clock, Idle: idle, Stages: per[i], Isolate: p.opts.Isolate})
		if err != nil {
			p.loops = nil
			return &FieldError{"Lcores", i, err}
		}
		p.loops = append(p.loops, l)
		index = append(index, i)
	}
	for k, l := range p.loops {
		if err := l.Start(); err != nil {
			return err
		}
		p.started = append(p.started, l)
		p.ran[index[k]] = true
	}
	return nil
}

// wireCaches gives every declared queue half its loop's cache, port by
// port and queue by queue.
func (p *Pipeline) wireCaches() error {
	if p.opts.PortOwnCaches {
		return nil
	}
	for _, pt := range p.ports {
		cu, ok := pt.(CacheUser)
		if !ok {
			continue
		}
		for q := range pt.Info().Queues {
			k := Queue{pt, q}
			rl, rxOK := p.rxLoop[k]
			tl, txOK := p.txLoop[k]
			if !rxOK && !txOK {
				continue
			}
			var rx, tx *mbuf.Cache
			if rxOK {
				rx = p.Cache(rl)
			}
			if txOK {
				tx = p.Cache(tl)
			}
			if err := cu.UseCaches(q, rx, tx); err != nil {
				return fmt.Errorf("app: port %s queue %d: %w", pt.Info().Name, q, err)
			}
		}
	}
	return nil
}

// Loops returns the started loops, in Options.Lcores order (for their
// names and counters, which any goroutine may read).
func (p *Pipeline) Loops() []*lcore.Loop { return slices.Clone(p.started) }

// LoopStats returns the loops' counters summed (lcore.Stats; exact once
// the loops have stopped).
func (p *Pipeline) LoopStats() lcore.Stats {
	var g lcore.Group
	for _, l := range p.loops {
		g.Add(l)
	}
	return g.Stats()
}
