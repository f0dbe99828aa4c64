package app

import (
	"errors"
	"net"
	"time"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// GeneratorsOptions configures AddGenerators: a traffic generator on
// every queue of one port. `peregrine gen` and (later) a config file's
// generator stage build through it.
type GeneratorsOptions struct {
	// Port is the index (in Options.Ports order) of the port to send on.
	Port int
	// Burst, Sizes, Flows, Rate (frames/s per queue, 0: as fast as
	// possible) and Count (frames per queue, 0: no end) configure each
	// queue's traffic.Generator.
	Burst int
	Sizes traffic.Sizes
	Flows int
	Rate  float64
	Count uint64
	// SrcMAC, DstMAC and Addressing set the frames' addresses, ports and
	// VLAN (traffic.GeneratorOptions; nil: the defaults).
	SrcMAC, DstMAC net.HardwareAddr
	Addressing     *traffic.Addressing
	// Loops are the loops the queues' generators are spread over (nil:
	// every loop).
	Loops []int
}

// Generators are the generators AddGenerators placed, one per queue.
type Generators struct {
	Gens []*traffic.Generator
	// Loops[q] is the loop queue q's generator runs on.
	Loops []int
}

// Stats sums the generators' counters.
func (g *Generators) Stats() traffic.GeneratorStats {
	var total traffic.GeneratorStats
	for _, x := range g.Gens {
		st := x.Stats()
		total.Sent += st.Sent
		total.Bytes += st.Bytes
	}
	return total
}

// Done reports whether every generator has sent its Count.
func (g *Generators) Done() bool {
	for _, x := range g.Gens {
		if !x.Done() {
			return false
		}
	}
	return true
}

// AddGenerators adds a generator for every queue of port o.Port, queue q
// on loop q mod the number of loops, each given its loop's cache. Errors
// are *FieldError naming a GeneratorsOptions field where one is to blame.
func (p *Pipeline) AddGenerators(o GeneratorsOptions) (*Generators, error) {
	out, err := p.portAt("Port", o.Port)
	if err != nil {
		return nil, err
	}
	gs := &Generators{}
	for q := range out.Info().Queues {
		loop := p.spread(o.Loops, q)
		g, err := traffic.NewGenerator(traffic.GeneratorOptions{Port: out, Queue: q, Pool: p.pool, Burst: o.Burst, Sizes: o.Sizes, Flows: o.Flows, Rate: o.Rate, Count: o.Count,
			SrcMAC: o.SrcMAC, DstMAC: o.DstMAC, Addressing: o.Addressing, Cache: p.Cache(loop)})
		if err != nil {
			return nil, err
		}
		if err := p.Add(Stage{Stage: g, Loop: loop, Tx: []Queue{{Port: out, Queue: q}}}); err != nil {
			return nil, err
		}
		gs.Gens, gs.Loops = append(gs.Gens, g), append(gs.Loops, loop)
	}
	return gs, nil
}

// ReplayOptions configures AddReplay: frames read from a pcap: port sent
// out another port, as `peregrine gen --replay` does.
type ReplayOptions struct {
	// Source is the index of the pcap: port (opened from a "pcap:FILE?..."
	// spec in Options.Ports); Out the index of the port to send on.
	Source, Out int
	// Burst is the frames per burst.
	Burst int
}

// Replay is the stage AddReplay placed.
type Replay struct {
	Fwd *fwd.Forwarder
	src port.Port
	rd  *pcap.Reader
}

// Done reports whether the file has ended (every loop of it) and every
// frame read has been sent or dropped.
func (r *Replay) Done() bool {
	st := r.Fwd.Stats()
	return r.rd.Ended() && st.Tx+st.Dropped == r.src.Stats().RxPackets
}

// AddReplay adds, on loop 0, an io forwarder from the pcap port Source to
// queue 0 of Out that waits (rather than drops) when Out is full.
func (p *Pipeline) AddReplay(o ReplayOptions) (*Replay, error) {
	src, err := p.portAt("Source", o.Source)
	if err != nil {
		return nil, err
	}
	rd, ok := src.(*pcap.Reader)
	if !ok {
		return nil, &FieldError{"Source", -1, errors.New(`not a pcap: port (open it from a "pcap:FILE" spec)`)}
	}
	out, err := p.portAt("Out", o.Out)
	if err != nil {
		return nil, err
	}
	f, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: src, Out: out, Pool: p.pool, Burst: o.Burst, OnFull: fwd.FullRetry, Cache: p.Cache(0)})
	if err != nil {
		return nil, err
	}
	if err := p.Add(Stage{Stage: f, Rx: []Queue{{Port: src, Queue: 0}}, Tx: []Queue{{Port: out, Queue: 0}}}); err != nil {
		return nil, err
	}
	return &Replay{Fwd: f, src: src, rd: rd}, nil
}

// SinksOptions configures AddSinks: a measuring sink on every queue of
// one port, as `peregrine gen --rx` runs.
type SinksOptions struct {
	// Port is the index of the port to receive on.
	Port int
	// Burst and Flows (the sender's flow count) configure each sink;
	// Latency records one-way latency from the frames' stamps.
	Burst   int
	Flows   int
	Latency bool
	// SrcPort is the sender's flow 0 source port (0: traffic.BaseSrcPort).
	SrcPort uint16
	// PerFlow, FlowHistograms and Interval: traffic.SinkOptions'.
	PerFlow        bool
	FlowHistograms bool
	Interval       time.Duration
	// Loops are the loops the queues' sinks are spread over (nil: every
	// loop).
	Loops []int
}

// Sinks are the sinks AddSinks placed, one per queue.
type Sinks struct {
	Sinks []*traffic.Sink
}

// Frames sums the frames the sinks received (safe while they run).
func (s *Sinks) Frames() (n uint64) {
	for _, sk := range s.Sinks {
		n += sk.Frames()
	}
	return n
}

// Stats sums the sinks' counters and merges their latency histograms.
// Read it after Stop.
func (s *Sinks) Stats() (traffic.SinkStats, hist.Histogram) {
	var total traffic.SinkStats
	var lat hist.Histogram
	for _, sk := range s.Sinks {
		st := sk.Stats()
		total.Received += st.Received
		total.Bytes += st.Bytes
		total.InOrder += st.InOrder
		total.Gaps += st.Gaps
		total.Late += st.Late
		total.Foreign += st.Foreign
		l := sk.Latency()
		lat.Merge(&l)
	}
	return total, lat
}

// Flows sums the sinks' per-flow counters and merges their HDR latency
// histograms and counts the intervals closed. Safe while they run; nil
// without PerFlow.
func (s *Sinks) Flows() (flows []traffic.FlowStats, total hist.HDR, intervals uint64) {
	for _, sk := range s.Sinks {
		flows = traffic.MergeFlows(flows, sk.Flows())
		t, n := sk.LatencyHDR()
		total.Merge(&t)
		intervals = max(intervals, n)
	}
	return flows, total, intervals
}

// FlowLatencies merges the sinks' per-flow latency histograms, as of
// Stop (nil before, and without FlowHistograms).
func (s *Sinks) FlowLatencies() (lats []traffic.FlowLatency) {
	for _, sk := range s.Sinks {
		lats = traffic.MergeFlowLatencies(lats, sk.FlowLatencies())
	}
	return lats
}

// TakeIntervals merges the sinks' traffic.Sink.TakeIntervals.
func (s *Sinks) TakeIntervals() (h hist.HDR) {
	for _, sk := range s.Sinks {
		t := sk.TakeIntervals()
		h.Merge(&t)
	}
	return h
}

// AddSinks adds a sink for every queue of port o.Port, queue q on loop q
// mod the number of loops, each given its loop's cache.
func (p *Pipeline) AddSinks(o SinksOptions) (*Sinks, error) {
	in, err := p.portAt("Port", o.Port)
	if err != nil {
		return nil, err
	}
	ss := &Sinks{}
	for q := range in.Info().Queues {
		loop := p.spread(o.Loops, q)
		sk, err := traffic.NewSink(traffic.SinkOptions{Port: in, Queue: q, Pool: p.pool, Burst: o.Burst, Flows: o.Flows, Latency: o.Latency, SrcPort: o.SrcPort, Clock: p.latencyClock(), Cache: p.Cache(loop),
			PerFlow: o.PerFlow, FlowHistograms: o.FlowHistograms, Interval: o.Interval})
		if err != nil {
			return nil, err
		}
		if err := p.Add(Stage{Stage: sk, Loop: loop, Rx: []Queue{{Port: in, Queue: q}}}); err != nil {
			return nil, err
		}
		ss.Sinks = append(ss.Sinks, sk)
	}
	return ss, nil
}

// latencyClock is the clock sinks read their latency with: the
// pipeline's, or a real one, which reads the same CLOCK_MONOTONIC as the
// loops' own real clocks.
func (p *Pipeline) latencyClock() clock.Clock {
	if p.opts.Clock != nil {
		return p.opts.Clock
	}
	return clock.NewReal()
}

// spread returns the loop of the i-th stage spread round-robin over loops
// (nil: every loop of the pipeline).
func (p *Pipeline) spread(loops []int, i int) int {
	if len(loops) == 0 {
		return i % p.Lcores()
	}
	return loops[i%len(loops)]
}

// portAt returns port i, or a *FieldError naming option when there is none.
func (p *Pipeline) portAt(option string, i int) (port.Port, error) {
	if i < 0 || i >= len(p.ports) {
		return nil, &FieldError{option, -1, portIndexError(i, len(p.ports))}
	}
	return p.ports[i], nil
}
