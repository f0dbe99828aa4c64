package config

import (
	"context"
	"fmt"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/clock"
)

// Stage is one kind of stage a pipeline can hold. Its exported fields,
// tagged `yaml:"snake_case"`, are the keys a stage of that kind takes
// besides "kind" and "name"; Parse decodes them strictly.
//
// A new mechanism's stage (IOI, the delivery index, the multi-channel send
// queue, QP translation) joins by a type implementing Stage in a new file
// of this package and one line in Kinds: nothing else changes.
type Stage interface {
	// Check validates the fields, fills in defaults, and reports each
	// problem through c (which knows the stage's path, the ports and the
	// other stages). It opens nothing.
	Check(c *Checker)
	// Build adds the stage to b's pipeline on b.Loop, before Start, and
	// returns what the run reads while it works and after it ends.
	Build(b *Builder) (Running, error)
}

// Kind names a Stage type.
type Kind struct {
	// Name is the "kind" key's value.
	Name string
	// New returns a zero Stage of the kind to decode into.
	New func() Stage
}

// Needer is a Stage that refers to other stages of the file by name (an
// initiator to its in-process target): Build builds those first.
type Needer interface {
	Needs() []string
}

// Kinds returns every stage kind, in the order errors list them. This is
// the extension point: a mechanism adds its kind here.
func Kinds() []Kind {
	return []Kind{
		{Name: "forwarder", New: func() Stage { return &Forwarder{} }},
		{Name: "generator", New: func() Stage { return &Generator{} }},
		{Name: "sink", New: func() Stage { return &Sink{} }},
		{Name: "fabric", New: func() Stage { return &Fabric{} }},
		{Name: "transport", New: func() Stage { return &Transport{} }},
		{Name: "roce", New: func() Stage { return &RoCE{} }},
	}
}

// Running is a built stage as the run sees it. Its methods are called from
// the controlling goroutine; they read the stage's counters, which the
// stages publish for any goroutine.
type Running interface {
	// Live returns one line of figures for the dt seconds since the last
	// call ("" for none).
	Live(dt float64) string
	// Finite reports whether the stage ends by itself (a generator with a
	// count, an initiator with a count, a sink expecting a count), and
	// Done whether it has.
	Finite() bool
	Done() bool
	// Drain stops the stage's posting or sending and waits, until ctx
	// ends, for its in-flight work to finish; it returns what was still
	// in flight ("" when nothing was). The loops still run.
	Drain(ctx context.Context) string
	// Report returns the stage's summary lines and checks, read after the
	// pipeline stopped.
	Report() (lines []string, checks []Check)
	// Counters returns the stage's cumulative figures by name, for JSON
	// lines and metrics.
	Counters() map[string]float64
}

// Check is one verification of a run's result.
type Check struct {
	OK   bool
	What string
}

// Checker collects a configuration's problems. A Stage's Check reports
// through it.
type Checker struct {
	cfg  *Config
	path string
	errs *Errors
	// extraFrames accumulates what stages keep beyond the loops' caches.
	extraFrames *int
	// lcore is the loop polling the stage (-1: not an lcore of the file);
	// pollers maps a port polled for receive to the first stage (path
	// and loop) that polls it.
	lcore   int
	pollers map[string]poller
}

type poller struct {
	path  string
	lcore int
}

// Errorf reports a problem with the stage's field: field "" is the stage
// itself.
func (c *Checker) Errorf(field, format string, args ...any) {
	c.Err(field, fmt.Errorf(format, args...))
}

// Err reports err as a problem with field (nil is ignored).
func (c *Checker) Err(field string, err error) {
	if err == nil {
		return
	}
	path := c.path
	if field != "" {
		path += "." + field
	}
	*c.errs = append(*c.errs, &Error{path, err})
}

// Port checks that field names one of the file's ports.
func (c *Checker) Port(field, name string) {
	if name == "" {
		c.Errorf(field, "missing: name one of the ports (%s)", c.cfg.portNames())
		return
	}
	if c.cfg.portIndex(name) < 0 {
		c.Errorf(field, "%q is not a port of this file: use one of %s", name, c.cfg.portNames())
	}
}

// Polls checks that field names one of the file's ports, which the stage
// receives from: two loops polling one port's queues would take each
// other's frames (and race on the rings), so a port is polled from one
// lcore.
func (c *Checker) Polls(field, name string) {
	c.Port(field, name)
	if c.cfg.portIndex(name) < 0 || c.lcore < 0 || c.pollers == nil {
		return
	}
	if p, ok := c.pollers[name]; ok && p.lcore != c.lcore {
		c.Errorf(field, "port %q is polled by %s on lcore %q already: a port is received from by one lcore; put both stages on one lcore or give each its own port",
			name, p.path, c.cfg.File.Lcores[p.lcore].Name)
		return
	}
	if _, ok := c.pollers[name]; !ok {
		c.pollers[name] = poller{c.path, c.lcore}
	}
}

// PortDriver returns the driver of the named port ("" when unknown).
func (c *Checker) PortDriver(name string) string {
	i := c.cfg.portIndex(name)
	if i < 0 {
		return ""
	}
	return driverOf(c.cfg.File.Ports[i].Spec)
}

// Stage returns the stage named name, or nil.
func (c *Checker) Stage(name string) *Placed {
	if i, ok := c.cfg.stages[name]; ok {
		return &c.cfg.Stages[i]
	}
	return nil
}

// KeepFrames adds n frames the stage keeps beyond the loops' caches to
// the pool size the file must give.
func (c *Checker) KeepFrames(n int) { *c.extraFrames += n }

// Builder is what a Stage builds on: the pipeline, its loop, the ports by
// name and the stages built before.
type Builder struct {
	// Pipeline is the appliance's pipeline (its pool, ports and loops).
	Pipeline *app.Pipeline
	// Loop is the index of the loop that polls the stage.
	Loop int
	// Clock is the pipeline's clock.
	Clock clock.Clock
	cfg   *Config
	built map[string]Running
}

// Port returns the index in the pipeline of the named port.
func (b *Builder) Port(name string) int { return b.cfg.portIndex(name) }

// Built returns the running stage named name, built before this one.
func (b *Builder) Built(name string) Running { return b.built[name] }
