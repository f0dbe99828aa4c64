package mem

import (
	"fmt"
	"strings"

	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
)

func init() {
	pmd.Register(pmd.Driver{
		Name:   DriverName,
		Syntax: "mem:PAIR/END[?queues=N&size=N&mtu=N&steer=queue|hash]",
		Help:   "one end (0 or 1) of an in-memory port pair; handles pass with no copy",
		Open:   open,
	})
}

// sharedKey is where the driver keeps its pair table in a pmd.Env.
const sharedKey = "mem/pairs"

func open(env *pmd.Env, spec pmd.Spec) (port.Port, error) {
	if err := spec.CheckParams("queues", "size", "mtu", "steer"); err != nil {
		return nil, err
	}
	pool, err := env.RequirePool(DriverName)
	if err != nil {
		return nil, err
	}
	name, endText, ok := strings.Cut(spec.Target, "/")
	if !ok || name == "" || (endText != "0" && endText != "1") {
		return nil, fmt.Errorf("%w: mem: target %q is not PAIR/END with END 0 or 1 (e.g. mem:ab/0)", pmd.ErrBadSpec, spec.Target)
	}
	end := int(endText[0] - '0')
	var opts PairOptions
	if opts.Queues, err = spec.Int("queues", DefaultQueues, 1, MaxQueues); err != nil {
		return nil, err
	}
	if opts.Size, err = spec.Int("size", DefaultSize, 2, MaxSize); err != nil {
		return nil, err
	}
	if opts.MTU, err = spec.Int("mtu", DefaultMTU, MinMTU, MaxMTU); err != nil {
		return nil, err
	}
	steer, err := spec.Choice("steer", SteerQueue.String(), SteerQueue.String(), SteerHash.String())
	if err != nil {
		return nil, err
	}
	if steer == SteerHash.String() {
		opts.Steer = SteerHash
		if opts.Queues > MaxHashQueues {
			return nil, fmt.Errorf("%w: mem: queues=%d with steer=hash is out of range (use 1..%d)", pmd.ErrBadParam, opts.Queues, MaxHashQueues)
		}
	}
	opts.Name = name

	t := env.Shared(sharedKey, func() any { return &table{pairs: make(map[string]*entry)} }).(*table)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.pairs[name]
	if e == nil {
		a, b, err := NewPair(pool, opts)
		if err != nil {
			return nil, err
		}
		e = &entry{opts: opts, ends: [2]*Port{a, b}}
		t.pairs[name] = e
	} else if err := e.compatible(spec, opts); err != nil {
		return nil, err
	}
	if e.opened[end] {
		return nil, fmt.Errorf("%w: mem:%s/%d is open already (close it first, or open the other end)", ErrEndInUse, name, end)
	}
	e.opened[end] = true
	p := e.ends[end]
	p.info.Name = spec.Raw
	p.onClose = func() { t.closed(name, e, end) }
	return p, nil
}

// compatible checks that the parameters a second opener gave explicitly
// match the ones the pair was created with; omitted ones are inherited.
func (e *entry) compatible(spec pmd.Spec, want PairOptions) error {
	check := func(param string, have, asked int) error {
		if spec.Params.Has(param) && have != asked {
			return fmt.Errorf("%w: mem: pair %q was created with %s=%d, %q asks for %s=%d (omit %s or use %d)",
				pmd.ErrBadParam, want.Name, param, have, spec.Raw, param, asked, param, have)
		}
		return nil
	}
	if err := check("queues", e.opts.Queues, want.Queues); err != nil {
		return err
	}
	if err := check("size", e.opts.Size, want.Size); err != nil {
		return err
	}
	if spec.Params.Has("steer") && e.opts.Steer != want.Steer {
		return fmt.Errorf("%w: mem: pair %q was created with steer=%s, %q asks for steer=%s (omit steer or use %s)",
			pmd.ErrBadParam, want.Name, e.opts.Steer, spec.Raw, want.Steer, e.opts.Steer)
	}
	return check("mtu", e.opts.MTU, want.MTU)
}

// closed forgets the pair once no end is open any more, so the name can be
// reused for a fresh pair. An end that was never opened is closed here,
// which frees anything the closed end had sent it.
func (t *table) closed(name string, e *entry, end int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.closed[end] = true
	other := 1 - end
	if e.opened[other] && !e.closed[other] {
		return
	}
	if !e.opened[other] {
		e.ends[other].Close()
	}
	if t.pairs[name] == e {
		delete(t.pairs, name)
	}
}
