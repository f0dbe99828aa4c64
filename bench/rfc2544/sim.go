package rfc2544

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/hist"
)

// SimulatedOptions describe a simulated DUT.
type SimulatedOptions struct {
	// Capacity is the rate, frames per second, the DUT forwards without
	// loss in an undisturbed trial (required).
	Capacity float64
	// Buffer is how many frames the DUT queues before it drops: a burst
	// of N frames at rate R > Capacity loses N − Buffer − Capacity·N/R.
	Buffer uint64
	// Jitter takes a uniform [0, Jitter) fraction off the capacity in
	// every trial: the run-to-run variation of a real DUT.
	Jitter float64
	// NoisyProb is the probability that a trial is disturbed (another
	// process took the DUT's CPU): its capacity drops to 30–90 %.
	NoisyProb float64
	// Latency is the unloaded one-way latency (default 10 µs); it grows
	// with the load as an M/D/1 queue's, and by the queue's length when
	// overloaded.
	Latency time.Duration
	// Seed makes the trials' noise reproducible.
	Seed uint64
	// Clock, when set, is advanced by each trial's duration, so a search's
	// time is read off it.
	Clock *clock.Virtual
}

// Simulated is a Trialer whose DUT has a known capacity: the search's
// tests run against it on the virtual clock.
type Simulated struct {
	opts   SimulatedOptions
	rng    *rand.Rand
	Trials int // trials run
}

// NewSimulated validates opts and builds the DUT.
func NewSimulated(opts SimulatedOptions) (*Simulated, error) {
	if !(opts.Capacity > 0) {
		return nil, fmt.Errorf("rfc2544: simulated Capacity %g: give frames per second > 0", opts.Capacity)
	}
	if opts.Jitter < 0 || opts.Jitter >= 1 || opts.NoisyProb < 0 || opts.NoisyProb > 1 {
		return nil, fmt.Errorf("rfc2544: simulated Jitter %g and NoisyProb %g: give fractions in [0, 1)", opts.Jitter, opts.NoisyProb)
	}
	if opts.Latency == 0 {
		opts.Latency = 10 * time.Microsecond
	}
	return &Simulated{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x2544))}, nil
}

// latencySamples is how many frames of a trial get a latency: enough for
// p99.9, without recording every simulated frame.
const latencySamples = 4000

// Trial implements Trialer.
func (s *Simulated) Trial(ctx context.Context, spec TrialSpec) (TrialResult, error) {
	if err := ctx.Err(); err != nil {
		return TrialResult{}, err
	}
	if !(spec.Rate > 0) {
		return TrialResult{}, fmt.Errorf("rfc2544: simulated trial at rate %g", spec.Rate)
	}
	s.Trials++
	sent := spec.Count()
	secs := float64(sent) / spec.Rate
	c := s.opts.Capacity * (1 - s.rng.Float64()*s.opts.Jitter)
	if s.rng.Float64() < s.opts.NoisyProb {
		c *= 0.3 + 0.6*s.rng.Float64()
	}
	recv := sent
	if spec.Rate > c {
		recv = min(sent, s.opts.Buffer+uint64(c*secs))
	}
	if s.opts.Clock != nil {
		s.opts.Clock.Advance(time.Duration(secs * float64(time.Second)))
	}
	if !spec.Latency {
		return TrialResult{Sent: sent, Received: recv}, nil
	}
	lat := new(hist.HDR)
	base := float64(s.opts.Latency)
	rho := spec.Rate / c
	for range min(recv, latencySamples) {
		var q float64
		switch {
		case rho < 1:
			// M/D/1 mean wait in service times, ρ/(2(1−ρ)), spread
			// exponentially.
			q = base * rho / (2 * (1 - rho)) * s.rng.ExpFloat64()
		default:
			q = float64(s.opts.Buffer) / c * 1e9 * s.rng.Float64()
		}
		lat.Record(uint64(base + math.Min(q, 1e9)))
	}
	return TrialResult{Sent: sent, Received: recv, Latency: lat}, nil
}
