package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is a configuration file as written: every field's YAML name is its
// snake_case key. Parse fills it strictly (an unknown key is an error) and
// Validate checks it before anything is opened.
type File struct {
	// Pool is the one packet pool every port and stage uses.
	Pool Pool `yaml:"pool"`
	// Idle is what an idle poll loop does when its lcore says nothing:
	// adaptive (the default: spin briefly after work, then yield, then
	// sleep), busy, yield or sleep.
	Idle string `yaml:"idle" default:"adaptive"`
	// Lcores are the poll loops, each named so pipelines can refer to it.
	Lcores []Lcore `yaml:"lcores"`
	// Ports are opened in order with the same specs as the --port flags.
	Ports []Port `yaml:"ports"`
	// Pipelines hold, per lcore, the stages that lcore polls.
	Pipelines []Pipeline `yaml:"pipelines"`
	// Run says how long the appliance runs and how it ends.
	Run Run `yaml:"run"`
	// Host, when present, runs the sidecar beside the pipelines.
	Host *Host `yaml:"host"`
}

// Pool configures the packet pool.
type Pool struct {
	// Frames is the number of frames (default 16384).
	Frames int `yaml:"frames" default:"16384"`
	// FrameSize is the bytes per frame: 2048 (default), 4096, 8192 or
	// 16384.
	FrameSize int `yaml:"frame_size" default:"2048"`
}

// Lcore is one poll loop.
type Lcore struct {
	// Name is how pipelines refer to the loop (required, unique).
	Name string `yaml:"name"`
	// CPU is the CPU the loop is pinned to; absent or -1 leaves it
	// unpinned.
	CPU *int `yaml:"cpu"`
	// Idle overrides the file's Idle for this loop.
	Idle string `yaml:"idle"`
}

// Port is one port.
type Port struct {
	// Name is how stages refer to the port (required, unique).
	Name string `yaml:"name"`
	// Spec opens it: afxdp:IFACE?queue=N&netns=NS, afpacket:IFACE,
	// mem:PAIR/END, null:, pcap:FILE, pcap-out:FILE.
	Spec string `yaml:"spec"`
}

// Pipeline is one lcore's stages, polled in order.
type Pipeline struct {
	// Lcore names the loop (one pipeline per lcore).
	Lcore string `yaml:"lcore"`
	// Stages are decoded by kind (see Kinds): each is a mapping whose
	// "kind" key selects the stage type and whose other keys are that
	// type's fields.
	Stages []yaml.Node `yaml:"stages"`
}

// Run says how long the appliance runs.
type Run struct {
	// Duration ends the run (0 or absent: until every stage with an end
	// has finished, or a signal when none has one).
	Duration Duration `yaml:"duration"`
	// Drain is how long in-flight work may take to finish once the run
	// ends (default 5s): operations outstanding, frames on their way.
	Drain Duration `yaml:"drain" default:"5s"`
	// StatsPeriod is how often live figures print (default 1s).
	StatsPeriod Duration `yaml:"stats_period" default:"1s"`
}

// Duration is a time.Duration written as Go writes one (500ms, 10s, 2m);
// a bare 0 is zero.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %q is not a duration: write one as 500ms, 10s or 2m (or 0)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Defaults applied by Parse to fields left out.
const (
	DefaultFrames      = 16384
	DefaultFrameSize   = 2048
	DefaultDrain       = Duration(5 * time.Second)
	DefaultStatsPeriod = Duration(time.Second)
	DefaultIdle        = "adaptive"
)
