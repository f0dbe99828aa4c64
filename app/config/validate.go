package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/pmd"
)

// Validate checks every field of the configuration, opening nothing, and
// returns every problem found (Errors), each naming the field's path and
// the fix. Parse calls it.
func (c *Config) Validate() error { return c.validate(nil) }

// validate adds the problems it finds to errs, those Parse found first.
func (c *Config) validate(errs Errors) error {
	f := &c.File
	top := func(path string, err error) {
		if err != nil {
			errs = append(errs, &Error{path, err})
		}
	}
	top("idle", CheckIdle(f.Idle))
	if len(f.Lcores) == 0 {
		top("lcores", fmt.Errorf("none given: give at least one, e.g. lcores: [{name: a, cpu: 0}]"))
	}
	seen := map[string]bool{}
	for i, lc := range f.Lcores {
		path := fmt.Sprintf("lcores[%d]", i)
		switch {
		case lc.Name == "":
			top(path+".name", fmt.Errorf("missing: name the lcore, e.g. name: a, so a pipeline can refer to it"))
		case seen[lc.Name]:
			top(path+".name", fmt.Errorf("%q is the name of an earlier lcore: give each lcore its own name", lc.Name))
		}
		seen[lc.Name] = true
		if lc.CPU != nil {
			top(path+".cpu", CheckCPU(*lc.CPU))
		}
		if lc.Idle != "" {
			top(path+".idle", CheckIdle(lc.Idle))
		}
	}
	if len(f.Ports) == 0 {
		top("ports", fmt.Errorf("none given: give at least one, e.g. ports: [{name: p0, spec: \"afxdp:veth0\"}]"))
	}
	seen = map[string]bool{}
	opened := map[string]int{} // pmd.PortKey → first port opening it
	afxdp := 0
	for i, p := range f.Ports {
		path := fmt.Sprintf("ports[%d]", i)
		switch {
		case p.Name == "":
			top(path+".name", fmt.Errorf("missing: name the port, e.g. name: p%d, so stages can refer to it", i))
		case seen[p.Name]:
			top(path+".name", fmt.Errorf("%q is the name of an earlier port: give each port its own name", p.Name))
		}
		seen[p.Name] = true
		if err := CheckSpec(p.Spec); err != nil {
			top(path+".spec", err)
			continue
		}
		if key := pmd.PortKey(p.Spec); !strings.HasPrefix(p.Spec, "null:") {
			if j, dup := opened[key]; dup {
				top(path+".spec", fmt.Errorf("%q opens the same port as ports[%d] (%q): open each port once and refer to it by name from every stage that uses it", p.Spec, j, f.Ports[j].Spec))
			} else {
				opened[key] = i
			}
		}
		if driverOf(p.Spec) == "afxdp" {
			afxdp++
		}
	}
	top("pool.frame_size", CheckFrameSize(f.Pool.FrameSize))
	top("run.duration", CheckDuration(f.Run.Duration.D(), "run until every stage with an end has finished, or a signal"))
	top("run.drain", CheckDuration(f.Run.Drain.D(), ""))
	top("run.stats_period", CheckAtLeast(f.Run.StatsPeriod.D(), time.Millisecond))
	c.checkHost(top)

	if len(f.Pipelines) == 0 {
		top("pipelines", fmt.Errorf("none given: give each lcore a pipeline of stages, e.g. pipelines: [{lcore: a, stages: [{kind: forwarder, ports: [p0, p1]}]}]"))
	}
	used := map[string]int{}
	for i, pl := range f.Pipelines {
		path := fmt.Sprintf("pipelines[%d]", i)
		if _, ok := c.lcores[pl.Lcore]; !ok {
			top(path+".lcore", fmt.Errorf("%q is not an lcore of this file: use one of %s", pl.Lcore, c.lcoreNames()))
		} else if j, dup := used[pl.Lcore]; dup {
			top(path+".lcore", fmt.Errorf("lcore %q already has pipelines[%d]: put all of an lcore's stages in one pipeline", pl.Lcore, j))
		}
		used[pl.Lcore] = i
		if len(pl.Stages) == 0 {
			top(path+".stages", fmt.Errorf("none given: give the lcore at least one stage"))
		}
	}
	names := map[string]string{}
	pollers := map[string]poller{}
	extra := 0
	for i := range c.Stages {
		st := &c.Stages[i]
		if prev, dup := names[st.Name]; dup {
			errs = append(errs, &Error{st.Path + ".name", fmt.Errorf("%q is the name of %s: give each stage its own name", st.Name, prev)})
		}
		names[st.Name] = st.Path
		st.Spec.Check(&Checker{cfg: c, path: st.Path, errs: &errs, extraFrames: &extra, lcore: st.Lcore, pollers: pollers})
	}
	loops := len(used)
	extra += afxdp * AFXDPFillFrames
	top("pool.frames", CheckFrames(f.Pool.Frames, loops, extra, f.Pool.FrameSize))
	if len(c.refused) > 0 {
		seen := map[string]bool{}
		errs = slices.DeleteFunc(errs, func(e *Error) bool {
			dup := c.refused[e.Path] && seen[e.Path]
			seen[e.Path] = true
			return dup
		})
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *Error) int { return order(a.Path) - order(b.Path) })
		return errs
	}
	return nil
}

// order sorts errors roughly in file order: top-level sections first.
func order(path string) int {
	for i, p := range []string{"pool", "idle", "lcores", "ports", "pipelines", "run", "host"} {
		if strings.HasPrefix(path, p) {
			return i
		}
	}
	return 9
}

// CheckSpec parses a port spec and checks its driver is known and that
// it names a target where the driver needs one; the driver checks the
// rest when it opens the port.
func CheckSpec(spec string) error {
	if spec == "" {
		return fmt.Errorf("missing: give a port spec, e.g. \"afxdp:veth0?queue=0\", \"afpacket:eth1\", \"mem:a/0\" or \"null:\"")
	}
	s, err := pmd.ParseSpec(spec)
	if err != nil {
		return err
	}
	if _, ok := pmd.Lookup(s.Driver); !ok {
		var known []string
		for _, d := range pmd.Drivers() {
			known = append(known, d.Name)
		}
		return fmt.Errorf("%q: unknown port driver %q: use one of %s", spec, s.Driver, strings.Join(known, ", "))
	}
	if d, _ := pmd.Lookup(s.Driver); s.Target == "" && s.Driver != "null" {
		return fmt.Errorf("%q names no %s target: %s", spec, s.Driver, d.Syntax)
	}
	return nil
}

func driverOf(spec string) string {
	s, err := pmd.ParseSpec(spec)
	if err != nil {
		return ""
	}
	return s.Driver
}

func (c *Config) portIndex(name string) int {
	if i, ok := c.ports[name]; ok {
		return i
	}
	return -1
}

// portNames and lcoreNames list the names a reference may use, in
// messages; a file with hundreds has its first few listed.
func (c *Config) portNames() string {
	return listNames(c.File.Ports, func(p Port) string { return p.Name })
}

func (c *Config) lcoreNames() string {
	return listNames(c.File.Lcores, func(l Lcore) string { return l.Name })
}

// maxListed bounds the names one message lists: a message per reference
// listing every name would grow with the square of the file.
const maxListed = 16

func listNames[T any](items []T, name func(T) string) string {
	var names []string
	for _, it := range items[:min(len(items), maxListed)] {
		names = append(names, name(it))
	}
	if len(items) > maxListed {
		names = append(names, fmt.Sprintf("… (%d more)", len(items)-maxListed))
	}
	return strings.Join(names, ", ")
}
