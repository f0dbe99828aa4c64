package pmd

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// ErrUnknownDriver is wrapped by Open when no driver has the spec's name.
var ErrUnknownDriver = errors.New("pmd: unknown driver")

// ErrNoPool is returned by drivers that allocate or free packets when
// Env.Pool is nil.
var ErrNoPool = errors.New("pmd: env has no mbuf pool")

// Env is what drivers need to open a port. Create one per process (or per
// simulated appliance) with &pmd.Env{...} and never copy it.
type Env struct {
	Pool  *mbuf.Pool
	Clock clock.Clock  // nil → a real clock
	Log   *slog.Logger // nil → slog.Default()

	mu        sync.Mutex
	shared    map[string]any
	realClock clock.Clock
}

// Shared returns the value stored under key, first storing create() there
// if there is none. It is how a driver keeps state across the ports it opens
// from one Env; keys should start with the driver's name. create runs with
// the Env locked and must not call Shared.
func (e *Env) Shared(key string, create func() any) any {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.shared[key]; ok {
		return v
	}
	if e.shared == nil {
		e.shared = make(map[string]any)
	}
	v := create()
	e.shared[key] = v
	return v
}

// ClockOrReal returns Env.Clock, or one real clock shared by every caller
// when Env.Clock is nil.
func (e *Env) ClockOrReal() clock.Clock {
	if e.Clock != nil {
		return e.Clock
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.realClock == nil {
		e.realClock = clock.NewReal()
	}
	return e.realClock
}

// Logger returns Env.Log, or slog.Default() when it is nil.
func (e *Env) Logger() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

// RequirePool returns Env.Pool, or an error wrapping ErrNoPool that names
// the driver which needed it.
func (e *Env) RequirePool(driver string) (*mbuf.Pool, error) {
	if e.Pool == nil {
		return nil, fmt.Errorf("%w: driver %s needs one (set Env.Pool to a pool from mbuf.New)", ErrNoPool, driver)
	}
	return e.Pool, nil
}

// Driver describes one registered driver.
type Driver struct {
	Name   string // the DRIVER part of a spec
	Syntax string // e.g. "mem:PAIR/END[?queues=N&size=N]"
	Help   string // one line
	// Open opens a port. spec.Driver == Name. It returns the port as
	// port.Port; callers that need driver-specific methods open the port
	// through the driver package's own constructor instead.
	Open func(env *Env, spec Spec) (port.Port, error)
}

// registry is the set of drivers, filled from driver packages' init().
var registry struct {
	mu      sync.RWMutex
	drivers map[string]Driver
}

// Register adds a driver. It is called from driver packages' init() and
// panics on an empty or duplicate name or a nil Open, which are programming
// errors.
func Register(d Driver) {
	if err := checkDriverName(d.Name); err != nil {
		panic(fmt.Sprintf("pmd: Register: %v", err))
	}
	if d.Open == nil {
		panic(fmt.Sprintf("pmd: Register: driver %q has a nil Open", d.Name))
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, dup := registry.drivers[d.Name]; dup {
		panic(fmt.Sprintf("pmd: Register: driver %q registered twice", d.Name))
	}
	if registry.drivers == nil {
		registry.drivers = make(map[string]Driver)
	}
	registry.drivers[d.Name] = d
}

// Drivers returns every registered driver, sorted by name.
func Drivers() []Driver {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	out := make([]Driver, 0, len(registry.drivers))
	for _, d := range registry.drivers {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Driver) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the driver registered under name.
func Lookup(name string) (Driver, bool) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	d, ok := registry.drivers[name]
	return d, ok
}

// Open parses spec and opens a port with the driver it names. An unknown
// driver is an error that lists every known driver with its syntax.
func Open(env *Env, spec string) (port.Port, error) {
	if env == nil {
		return nil, fmt.Errorf("pmd: open %q: env is nil (pass &pmd.Env{Pool: pool})", spec)
	}
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	d, ok := Lookup(s.Driver)
	if !ok {
		return nil, fmt.Errorf("%w %q in %q; known drivers:\n%s", ErrUnknownDriver, s.Driver, spec, driverList())
	}
	p, err := d.Open(env, s)
	if err != nil {
		return nil, fmt.Errorf("pmd: open %q: %w", spec, err)
	}
	return p, nil
}

// driverList formats every driver as "  SYNTAX  HELP" lines.
func driverList() string {
	ds := Drivers()
	if len(ds) == 0 {
		return "  (none registered: import _ \"github.com/peregrine-net/peregrine/pmd/all\")"
	}
	width := 0
	for _, d := range ds {
		width = max(width, len(d.Syntax))
	}
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "  %-*s  %s", width, d.Syntax, d.Help)
	}
	return b.String()
}
