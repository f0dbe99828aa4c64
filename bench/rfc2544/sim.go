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
	// DUTStalls and GenStalls are how many times a second (Poisson) the
	// DUT's loop and the generator's stop for StallMin to StallMax
	// (uniform; default 1 to 10 ms), as busy loops sharing two CPUs with
	// the runtime and other processes do. A stalled DUT forwards nothing
	// and queues what arrives in its Buffer, dropping what overflows;
	// between stalls it forwards faster than Capacity by 1 ÷ (1 − the
	// share of time it is stalled), so that Capacity stays what it
	// forwards over time, as a DUT measured on a noisy machine does; a
	// stalled generator sends nothing, then catches up at once on up to
	// GenCatchUp of its frames (default 1 ms, what traffic.Generator's
	// bucket holds): a longer stall makes its trial take longer
	// (TrialResult.SendTime) while the DUT drains its queue.
	DUTStalls, GenStalls float64
	StallMin, StallMax   time.Duration
	GenCatchUp           time.Duration
	// GenHeldProb is the probability that the generator is held back for
	// a whole trial (its CPU shared): it offers 50–95 % of the rate, and
	// the DUT sees that lighter load.
	GenHeldProb float64
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
	opts SimulatedOptions
	// rng draws the DUT's noise, gen the generator's: a held-back trial
	// leaves the DUT's draws as they would have been.
	rng, gen *rand.Rand
	Trials   int // trials run
}

// NewSimulated validates opts and builds the DUT.
func NewSimulated(opts SimulatedOptions) (*Simulated, error) {
	if !(opts.Capacity > 0) {
		return nil, fmt.Errorf("rfc2544: simulated Capacity %g: give frames per second > 0", opts.Capacity)
	}
	if opts.Jitter < 0 || opts.Jitter >= 1 || opts.NoisyProb < 0 || opts.NoisyProb > 1 || opts.GenHeldProb < 0 || opts.GenHeldProb > 1 {
		return nil, fmt.Errorf("rfc2544: simulated Jitter %g, NoisyProb %g and GenHeldProb %g: give fractions in [0, 1)", opts.Jitter, opts.NoisyProb, opts.GenHeldProb)
	}
	if opts.StallMin == 0 {
		opts.StallMin = time.Millisecond
	}
	if opts.StallMax == 0 {
		opts.StallMax = 10 * time.Millisecond
	}
	if opts.GenCatchUp == 0 {
		opts.GenCatchUp = time.Millisecond
	}
	if opts.DUTStalls < 0 || opts.GenStalls < 0 || opts.StallMin <= 0 || opts.StallMax < opts.StallMin {
		return nil, fmt.Errorf("rfc2544: simulated stalls %g/s (DUT) and %g/s (generator) of %v to %v: give rates >= 0 and 0 < StallMin <= StallMax", opts.DUTStalls, opts.GenStalls, opts.StallMin, opts.StallMax)
	}
	if opts.Latency == 0 {
		opts.Latency = 10 * time.Microsecond
	}
	return &Simulated{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x2544)), gen: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x6e6e))}, nil
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
	var sendTime time.Duration
	if s.opts.DUTStalls > 0 || s.opts.GenStalls > 0 || s.opts.GenHeldProb > 0 {
		recv, sendTime = s.fluid(sent, spec.Rate, c)
		secs = sendTime.Seconds()
	} else if spec.Rate > c {
		recv = min(sent, s.opts.Buffer+uint64(c*secs))
	}
	if s.opts.Clock != nil {
		s.opts.Clock.Advance(time.Duration(secs * float64(time.Second)))
	}
	if !spec.Latency {
		return TrialResult{Sent: sent, Received: recv, SendTime: sendTime}, nil
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
	return TrialResult{Sent: sent, Received: recv, Latency: lat, SendTime: sendTime}, nil
}

// fluidStep is the fluid model's time step: a tenth of the shortest stall.
const fluidStep = 100 * time.Microsecond

// fluid runs one trial of sent frames offered at rate to a DUT of
// capacity c through the stalls, as a fluid queue in fluidStep steps, and
// returns the frames received and the send time.
func (s *Simulated) fluid(sent uint64, rate, c float64) (uint64, time.Duration) {
	dt := fluidStep.Seconds()
	if s.gen.Float64() < s.opts.GenHeldProb {
		rate *= 0.5 + 0.45*s.gen.Float64()
	}
	if s.opts.DUTStalls == 0 && s.opts.GenStalls == 0 {
		// Held back only: a steady lighter load.
		secs := float64(sent) / rate
		recv := sent
		if rate > c {
			recv = min(sent, s.opts.Buffer+uint64(c*secs))
		}
		return recv, time.Duration(secs * float64(time.Second))
	}
	stall := func(r *rand.Rand) float64 {
		lo, hi := s.opts.StallMin.Seconds(), s.opts.StallMax.Seconds()
		return lo + (hi-lo)*r.Float64()
	}
	// Between stalls the DUT runs at mu, so that over time it forwards c.
	mu := c / max(0.05, 1-s.opts.DUTStalls*(s.opts.StallMin+s.opts.StallMax).Seconds()/2)
	left, buf := float64(sent), float64(s.opts.Buffer)
	var q, lost, dutStall, genStall, owed float64
	var steps int64
	for left > 0 {
		steps++
		if dutStall <= 0 && s.rng.Float64() < s.opts.DUTStalls*dt {
			dutStall = stall(s.rng)
		}
		if genStall <= 0 && s.gen.Float64() < s.opts.GenStalls*dt {
			genStall = stall(s.gen)
			owed = rate * min(genStall, s.opts.GenCatchUp.Seconds())
		}
		if genStall > 0 {
			genStall -= dt
		} else {
			a := min(left, rate*dt+owed)
			left -= a
			q += a
			owed = 0
		}
		if dutStall > 0 {
			dutStall -= dt
		} else {
			q -= min(q, mu*dt)
		}
		if q > buf {
			lost += q - buf
			q = buf
		}
	}
	// The DUT forwards what it queued once the generator is done.
	return sent - min(sent, uint64(lost+0.5)), time.Duration(steps) * fluidStep
}
