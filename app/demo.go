package app

import (
	"time"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/fwd"
)

// ForwardDemoPorts returns the port specs of the forward demo over mem
// pairs, in the order AddForwardDemo expects: generator out, forwarder
// in, forwarder out, sink in.
func ForwardDemoPorts() []string {
	return []string{"mem:gen-fwd/0", "mem:gen-fwd/1", "mem:fwd-sink/0", "mem:fwd-sink/1"}
}

// ForwardDemoOptions configures AddForwardDemo: generator → io forwarder
// → sink over the pipeline's first four ports.
type ForwardDemoOptions struct {
	// Burst is the frames per burst of every stage.
	Burst int
	// Sizes and Rate (frames/s, 0: as fast as possible) shape the
	// generator's traffic.
	Sizes traffic.Sizes
	Rate  float64
}

// ForwardDemo is the forward demo's three stages.
type ForwardDemo struct {
	Gen  *traffic.Generator
	Fwd  *fwd.Forwarder
	Sink *traffic.Sink
}

// AddForwardDemo adds the forward demo to p, whose ports 0..3 are the
// generator's output, the forwarder's input and output, and the sink's
// input (ForwardDemoPorts, or veth ports in that order). Loop 0 runs the
// generator and the sink, the last loop (loop 0 again on one lcore) the
// forwarder, which waits rather than drops when its output is full, so
// every frame sent must arrive; each stage and the queue halves it drives
// share its loop's cache.
func (p *Pipeline) AddForwardDemo(o ForwardDemoOptions) (*ForwardDemo, error) {
	if _, err := p.portAt("Ports", 3); err != nil {
		return nil, err
	}
	genOut, fwdIn, fwdOut, sinkIn := p.ports[0], p.ports[1], p.ports[2], p.ports[3]
	loopA, loopB := 0, p.Lcores()-1
	gen, err := traffic.NewGenerator(traffic.GeneratorOptions{Port: genOut, Pool: p.pool, Burst: o.Burst, Sizes: o.Sizes, Rate: o.Rate, Cache: p.Cache(loopA)})
	if err != nil {
		return nil, err
	}
	forwarder, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: fwdIn, Out: fwdOut, Pool: p.pool, Burst: o.Burst, OnFull: fwd.FullRetry, Cache: p.Cache(loopB)})
	if err != nil {
		return nil, err
	}
	sink, err := traffic.NewSink(traffic.SinkOptions{Port: sinkIn, Pool: p.pool, Burst: o.Burst, Latency: true, Cache: p.Cache(loopA)})
	if err != nil {
		return nil, err
	}
	for _, st := range []Stage{
		{Stage: gen, Loop: loopA, Tx: []Queue{{Port: genOut, Queue: 0}}},
		{Stage: sink, Loop: loopA, Rx: []Queue{{Port: sinkIn, Queue: 0}}},
		{Stage: forwarder, Loop: loopB, Rx: []Queue{{Port: fwdIn, Queue: 0}}, Tx: []Queue{{Port: fwdOut, Queue: 0}}},
	} {
		if err := p.Add(st); err != nil {
			return nil, err
		}
	}
	return &ForwardDemo{Gen: gen, Fwd: forwarder, Sink: sink}, nil
}

// Drain stops the generator and waits up to timeout for every frame it
// sent to reach the sink; it reports whether they all did. The loops must
// still run.
func (d *ForwardDemo) Drain(timeout time.Duration) bool {
	d.Gen.StopSending()
	return WaitFor(func() bool { return d.Gen.Done() && d.Sink.Frames() == d.Gen.Stats().Sent }, timeout)
}
