package app

import (
	"errors"
	"fmt"
	"net"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
)

// ForwarderOptions configures AddForwarders: testpmd's forwarding modes
// over every queue of a pipeline's ports. `peregrine fwd` and (later) a
// config file's forwarder stage build through it, so both place and
// configure stages the same way.
type ForwarderOptions struct {
	// Mode is io, mac, macswap, rxonly, 5tswap, icmpecho, csum (a
	// fwd.Forwarder per queue) or
	// txonly (a traffic.Generator per queue, receiving nothing).
	Mode string
	// Burst is the frames per burst of each stage.
	Burst int
	// PeerMAC is the destination MAC written in mac mode.
	PeerMAC net.HardwareAddr
	// Sizes, Rate (frames/s per port and queue, 0: as fast as possible)
	// and Flows configure the txonly generators; other modes ignore them.
	Sizes traffic.Sizes
	Rate  float64
	Flows int
	// Ports are the indices of the ports to forward between, in order
	// (nil: every port of the pipeline); Loops the loops the stages are
	// spread over (nil: every loop).
	Ports, Loops []int
}

// validate checks what can be checked before any port opens; each error
// is a *FieldError naming the ForwarderOptions field.
func (o *ForwarderOptions) validate() (fwd.Mode, error) {
	if o.Mode == "txonly" {
		if o.Rate < 0 {
			return 0, &FieldError{"Rate", -1, fmt.Errorf("%g frames/s is negative (0 sends as fast as possible)", o.Rate)}
		}
		return 0, nil
	}
	m, err := fwd.ParseMode(o.Mode)
	if err != nil {
		return 0, &FieldError{"Mode", -1, fmt.Errorf("%w (or txonly)", err)}
	}
	return m, nil
}

// ValidateForwarders reports the first ForwarderOptions field refused
// before anything is opened (a *FieldError), so a command can fail fast
// on a bad flag.
func ValidateForwarders(o ForwarderOptions) error {
	_, err := o.validate()
	return err
}

// Forwarders are the stages AddForwarders placed, in placement order.
type Forwarders struct {
	// Stages holds a *fwd.Forwarder or, in txonly mode, a
	// *traffic.Generator per queue.
	Stages []lcore.Stage
	// Placed says where each stage (same index) runs and what it drives:
	// the summary's per-queue lines read it.
	Placed []Placement
}

// Placement is one stage's place: the index of its input port (in
// ForwarderOptions.Ports order, or the pipeline's), the queue it drives on
// both ports, and its loop.
type Placement struct {
	Port, Queue, Loop int
}

// Stats sums the forwarders' counters (txonly's generators have none).
func (f *Forwarders) Stats() fwd.Stats {
	var t fwd.Stats
	for _, st := range f.Stages {
		if fw, ok := st.(*fwd.Forwarder); ok {
			s := fw.Stats()
			t.Rx, t.Tx, t.Dropped, t.Short = t.Rx+s.Rx, t.Tx+s.Tx, t.Dropped+s.Dropped, t.Short+s.Short
			t.BadIPChecksum, t.BadL4Checksum, t.NotEcho = t.BadIPChecksum+s.BadIPChecksum, t.BadL4Checksum+s.BadL4Checksum, t.NotEcho+s.NotEcho
		}
	}
	return t
}

// Dropped sums the frames the forwarders' outputs refused.
func (f *Forwarders) Dropped() uint64 {
	var n uint64
	for _, st := range f.Stages {
		if fw, ok := st.(*fwd.Forwarder); ok {
			n += fw.Stats().Dropped
		}
	}
	return n
}

// AddForwarders adds a forwarding stage (a generator in txonly mode) for
// every queue of every port of p: frames received on port i leave on port
// i+1 (mod the number of ports; one port sends back out the way they came).
// Stages are spread over p's loops round-robin, each given the cache of
// the loop it runs on and declared with the queue halves it drives. Call
// it before Start. Errors are *FieldError naming a ForwarderOptions field
// where one is to blame.
func (p *Pipeline) AddForwarders(o ForwarderOptions) (*Forwarders, error) {
	mode, err := o.validate()
	if err != nil {
		return nil, err
	}
	ports := p.Ports()
	if o.Ports != nil {
		ports = nil
		for _, i := range o.Ports {
			pt, err := p.portAt("Ports", i)
			if err != nil {
				return nil, err
			}
			ports = append(ports, pt)
		}
	}
	if len(ports) == 0 {
		return nil, errors.New("app: AddForwarders: the pipeline has no ports")
	}
	txonly := o.Mode == "txonly"
	out := &Forwarders{}
	for i, in := range ports {
		outPort := ports[(i+1)%len(ports)]
		queues := min(in.Info().Queues, outPort.Info().Queues)
		for q := range queues {
			loop := p.spread(o.Loops, len(out.Stages))
			cache := p.Cache(loop)
			var st Stage
			if txonly {
				g, err := traffic.NewGenerator(traffic.GeneratorOptions{Port: in, Queue: q, Pool: p.Pool(), Burst: o.Burst, Sizes: o.Sizes, Flows: o.Flows, Rate: o.Rate, Cache: cache})
				if err != nil {
					return nil, err
				}
				st = Stage{Stage: g, Loop: loop, Tx: []Queue{{Port: in, Queue: q}}}
			} else {
				f, err := fwd.New(fwd.Options{Mode: mode, In: in, InQueue: q, Out: outPort, OutQueue: q, Pool: p.Pool(), Burst: o.Burst, PeerMAC: o.PeerMAC, Cache: cache})
				if err != nil {
					return nil, err
				}
				st = Stage{Stage: f, Loop: loop, Rx: []Queue{{Port: in, Queue: q}}}
				if mode != fwd.ModeRxOnly {
					st.Tx = []Queue{{Port: outPort, Queue: q}}
				}
			}
			if err := p.Add(st); err != nil {
				return nil, err
			}
			out.Stages = append(out.Stages, st.Stage)
			out.Placed = append(out.Placed, Placement{Port: i, Queue: q, Loop: loop})
		}
	}
	return out, nil
}
