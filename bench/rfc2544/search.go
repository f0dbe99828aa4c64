package rfc2544

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults of SearchOptions.
const (
	DefaultDuration    = time.Second
	DefaultWidth       = 0.005
	DefaultPDRLoss     = 0.005
	DefaultExceedRatio = 0.5
	DefaultSumFactor   = 2
	DefaultMaxTrials   = 400
	// DefaultOfferedTolerance: a trial that offered less than 95 % of its
	// rate was held back.
	DefaultOfferedTolerance = 0.05
	// phases is how many times the trial duration doubles from
	// InitialDuration to Duration by default (Duration/8 first).
	defaultPhases = 4
)

// Goal is one rate the search looks for: the highest offered load whose
// trials lose at most LossRatio of their frames (NDR: 0; PDR: 0.005).
type Goal struct {
	Name      string
	LossRatio float64
}

// SearchOptions configure Search. Zero fields take their defaults.
type SearchOptions struct {
	Size FrameSize
	// MinRate and MaxRate bound the offered load, frames per second;
	// MaxRate is required (line rate, or what the generator can send).
	// MinRate defaults to MaxRate/1000.
	MinRate, MaxRate float64
	// Duration is the final phase's trial duration (default 1 s);
	// InitialDuration the first phase's (default Duration/8). Each phase
	// doubles it, and halves the width, until Duration and Width.
	Duration, InitialDuration time.Duration
	// Width is the resolution: the search ends when the upper bound is
	// within Width (relative) above the lower. Default 0.005.
	Width float64
	// PDRLoss is the loss ratio the partial-drop rate tolerates (default
	// 0.005); negative searches for NDR only.
	PDRLoss float64
	// ExceedRatio is the fraction of a load's trial time that may exceed
	// a goal's loss ratio while the load still counts as passing it
	// (default 0.5: the majority decides). SumFactor is how much trial
	// time, in phase durations, a load needs before it can pass (default
	// 2); with the defaults one passing trial makes a lower bound, and an
	// upper bound takes two failing ones.
	ExceedRatio float64
	SumFactor   float64
	// MaxTrials bounds the search (default 400): a DUT so noisy that the
	// bounds never settle ends in an error rather than a loop.
	MaxTrials int
	// OfferedTolerance: a trial whose generator offered less than
	// (1 − OfferedTolerance) of its rate was held back (its CPU was
	// taken) and says nothing about the DUT, which saw a lighter load:
	// it is recorded but decides nothing, and the load is tried again.
	// Default 0.05; negative takes every trial as evidence, as if the
	// generator always kept its rate. Only Trialers that measure
	// TrialResult.SendTime can be held back.
	OfferedTolerance float64
	// OnTrial, when set, is called after every trial (progress output).
	OnTrial func(TrialRecord)
}

// TrialRecord is one trial of a search, as the JSON result lists it.
type TrialRecord struct {
	Goal     string        `json:"goal"`
	Phase    int           `json:"phase"`
	Rate     float64       `json:"rate_fps"`
	Duration time.Duration `json:"duration_ns"`
	Sent     uint64        `json:"sent"`
	Received uint64        `json:"received"`
	Loss     float64       `json:"loss_ratio"`
	// Offered is the rate actually offered (sent ÷ send time) when the
	// Trialer measured it, else Rate.
	Offered float64 `json:"offered_fps"`
	// HeldBack: Offered fell short of Rate by more than the tolerance
	// with nothing refused: the generator's CPU was taken, and the trial
	// decided nothing. Backpressure: it fell short because the DUT's side
	// refused frames; the shortfall counts as loss (Loss is at least
	// 1 − Offered ÷ Rate).
	HeldBack     bool `json:"held_back,omitempty"`
	Backpressure bool `json:"backpressure,omitempty"`
}

// GoalResult is what the search found for one goal.
type GoalResult struct {
	Goal Goal `json:"goal"`
	// Rate is the relevant lower bound, frames per second offered: the
	// highest load that passed the goal at the final trial duration below
	// every load that failed it. 0 when even MinRate failed.
	Rate float64 `json:"rate_fps"`
	// Upper is the lowest load that failed (0 when the search's ceiling
	// passed: the DUT outran the offered load, AtMax, and Rate is a lower
	// bound of its capacity).
	Upper float64 `json:"upper_fps"`
	AtMax bool    `json:"at_max"`
	// Width is (Upper − Rate) ÷ Upper.
	Width float64 `json:"width"`
	// Forwarded is the mean received rate of the final trials at Rate.
	Forwarded float64 `json:"forwarded_fps"`
}

// SearchResult is a search's answer and its trials.
type SearchResult struct {
	Size   FrameSize     `json:"-"`
	Goals  []GoalResult  `json:"goals"`
	Trials []TrialRecord `json:"trials"`
	// TrialTime sums the trials' send times (their durations when the
	// Trialer does not measure them).
	TrialTime time.Duration `json:"trial_time_ns"`
	// HeldBack counts the trials whose generator was held back (they
	// decided nothing and were run again).
	HeldBack int `json:"held_back_trials"`
	// Ceiling is the highest load the search offered: MaxRate, or lower
	// when the generator was held back heldBackLimit times running at a
	// load (it cannot offer that now), then the best it offered there.
	Ceiling float64 `json:"ceiling_fps"`
	// GeneratorLimited: the search lowered its ceiling below MaxRate; a
	// goal AtMax is then bounded by the generator, not by the DUT.
	GeneratorLimited bool `json:"generator_limited"`
}

// NDR returns the first goal's rate (the non-drop rate).
func (r *SearchResult) NDR() float64 { return r.Goals[0].Rate }

// Validate fills in the defaults and checks opts.
func (o *SearchOptions) Validate() error {
	if !(o.MaxRate > 0) || math.IsInf(o.MaxRate, 0) {
		return fmt.Errorf("rfc2544: MaxRate %g: give the highest load to offer, frames per second (> 0)", o.MaxRate)
	}
	if o.MinRate == 0 {
		o.MinRate = o.MaxRate / 1000
	}
	if o.MinRate <= 0 || o.MinRate >= o.MaxRate {
		return fmt.Errorf("rfc2544: MinRate %g: give 0 < MinRate < MaxRate %g", o.MinRate, o.MaxRate)
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.InitialDuration == 0 {
		o.InitialDuration = o.Duration >> (defaultPhases - 1)
	}
	if o.Duration <= 0 || o.InitialDuration <= 0 || o.InitialDuration > o.Duration {
		return fmt.Errorf("rfc2544: trial durations %v (initial) and %v (final): give 0 < initial <= final", o.InitialDuration, o.Duration)
	}
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Width <= 0 || o.Width >= 0.5 {
		return fmt.Errorf("rfc2544: Width %g: give a relative resolution in (0, 0.5), e.g. 0.005", o.Width)
	}
	if o.PDRLoss == 0 {
		o.PDRLoss = DefaultPDRLoss
	}
	if o.PDRLoss >= 1 {
		return fmt.Errorf("rfc2544: PDRLoss %g: give a loss ratio below 1, e.g. 0.005 (negative: no PDR)", o.PDRLoss)
	}
	if o.ExceedRatio == 0 {
		o.ExceedRatio = DefaultExceedRatio
	}
	if o.ExceedRatio < 0 || o.ExceedRatio >= 1 {
		return fmt.Errorf("rfc2544: ExceedRatio %g: give [0, 1), e.g. 0.5", o.ExceedRatio)
	}
	if o.SumFactor == 0 {
		o.SumFactor = DefaultSumFactor
	}
	if o.SumFactor < 1 {
		return fmt.Errorf("rfc2544: SumFactor %g: give 1 or more trial durations of evidence per load", o.SumFactor)
	}
	if o.MaxTrials == 0 {
		o.MaxTrials = DefaultMaxTrials
	}
	if o.OfferedTolerance == 0 {
		o.OfferedTolerance = DefaultOfferedTolerance
	}
	if o.OfferedTolerance >= 0.5 {
		return fmt.Errorf("rfc2544: OfferedTolerance %g: give a shortfall below 0.5, e.g. 0.05 (negative: every trial is evidence)", o.OfferedTolerance)
	}
	return nil
}

// Goals lists what the search looks for: NDR, then PDR unless PDRLoss < 0.
func (o *SearchOptions) Goals() []Goal {
	g := []Goal{{"NDR", 0}}
	if o.PDRLoss > 0 {
		g = append(g, Goal{"PDR", o.PDRLoss})
	}
	return g
}

// ErrTooManyTrials ends a search whose bounds did not settle in MaxTrials.
var ErrTooManyTrials = errors.New("rfc2544: the search did not settle within MaxTrials trials (the DUT's loss is too erratic for this ExceedRatio)")

type outcome struct {
	dur  time.Duration
	loss float64
	rx   float64 // received frames per second
}

type class int

const (
	undecided class = iota
	lower
	upper
)

// backpressureSlack is the shortfall a trial whose frames were refused
// may show and still count as having offered its rate: the send time is
// measured to a loop iteration.
const backpressureSlack = 0.001

// heldBackLimit is how many held-back trials running at one load make the
// search take it as out of the generator's reach, when they offered about
// the same (within twice the tolerance: the generator's own ceiling);
// trials held back by erratic amounts (its CPU taken now and then) take
// three times as many.
const heldBackLimit = 5

// searcher holds one search's trials, keyed by exact offered load: every
// load it offers again is a value it computed before, so equal loads are
// equal floats. Held-back trials are not in loads: held counts them per
// load since its last trial that was evidence, best their best offer.
type searcher struct {
	opts        SearchOptions
	t           Trialer
	loads       map[float64][]outcome
	held        map[float64]int
	best, worst map[float64]float64
	top         float64 // the ceiling: no load above it is offered or counted
	retry       float64 // the load of the last trial, held back; 0: none
	result      SearchResult
}

// Search finds each goal's rate for one frame size by MLRsearch's method
// (see the package doc): phases of trials that lengthen towards Duration
// while the width narrows towards Width, every bound decided by the
// majority of its trial time, the last phase at full duration confirming
// both bounds.
func Search(ctx context.Context, t Trialer, opts SearchOptions) (*SearchResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &searcher{opts: opts, t: t, loads: map[float64][]outcome{}, held: map[float64]int{}, best: map[float64]float64{}, worst: map[float64]float64{}, top: opts.MaxRate}
	s.result.Size = opts.Size
	durs, widths := s.phases()
	for _, g := range opts.Goals() {
		var lo, up float64
		for i := range durs {
			var err error
			if lo, up, err = s.phase(ctx, g, i, durs[i], widths[i]); err != nil {
				return &s.result, err
			}
		}
		gr := GoalResult{Goal: g, Rate: lo}
		if !math.IsInf(up, 1) {
			gr.Upper = up
			gr.Width = (up - lo) / up
		} else {
			gr.AtMax = true
		}
		var n int
		for _, o := range s.loads[lo] {
			if o.dur >= opts.Duration {
				gr.Forwarded += o.rx
				n++
			}
		}
		if n > 0 {
			gr.Forwarded /= float64(n)
		}
		s.result.Goals = append(s.result.Goals, gr)
	}
	s.result.Ceiling = s.top
	return &s.result, nil
}

// phases returns each phase's trial duration and width: the duration
// doubles from InitialDuration up to Duration, the width halves down to
// Width in step.
func (s *searcher) phases() ([]time.Duration, []float64) {
	var durs []time.Duration
	for d := s.opts.InitialDuration; d < s.opts.Duration; d *= 2 {
		durs = append(durs, d)
	}
	durs = append(durs, s.opts.Duration)
	widths := make([]float64, len(durs))
	for i := range widths {
		widths[i] = min(s.opts.Width*math.Pow(2, float64(len(durs)-1-i)), 0.25)
	}
	return durs, widths
}

// classify decides a load for goal g from its trials of duration d or
// longer: an upper bound when more than ExceedRatio of the time needed
// (SumFactor × d) lost too much, a lower bound when enough time passed
// that even had every missing second failed it would not be.
func (s *searcher) classify(load float64, g Goal, d time.Duration) class {
	var hi, lo float64
	for _, o := range s.loads[load] {
		if o.dur < d {
			continue
		}
		if o.loss > g.LossRatio {
			hi += o.dur.Seconds()
		} else {
			lo += o.dur.Seconds()
		}
	}
	sum := s.opts.SumFactor * d.Seconds()
	switch {
	case hi > s.opts.ExceedRatio*sum:
		return upper
	case lo >= (1-s.opts.ExceedRatio)*sum:
		return lower
	}
	return undecided
}

// bounds returns the lowest upper bound (+Inf when none) and the highest
// lower bound below it (0 when none) at duration d, among the loads up to
// the ceiling.
func (s *searcher) bounds(g Goal, d time.Duration) (lo, up float64) {
	up = math.Inf(1)
	for x := range s.loads {
		if x < up && x <= s.top && s.classify(x, g, d) == upper {
			up = x
		}
	}
	for x := range s.loads {
		if x > lo && x < up && x <= s.top && s.classify(x, g, d) == lower {
			lo = x
		}
	}
	return lo, up
}

// phase runs trials of duration d until goal g's bounds at that duration
// are within width, and returns them.
func (s *searcher) phase(ctx context.Context, g Goal, i int, d time.Duration, width float64) (lo, up float64, err error) {
	stepUp, stepDown := width, width
	for {
		lo, up = s.bounds(g, d)
		next, done := s.next(g, d, width, lo, up, &stepUp, &stepDown)
		if done {
			s.retry = 0
			return lo, up, nil
		}
		// A held-back trial is run again where it was, while that load
		// still lies between the bounds.
		if x := s.retry; x > lo && x < up && x <= s.top {
			next = x
		}
		s.retry = 0
		if len(s.result.Trials) >= s.opts.MaxTrials {
			return lo, up, ErrTooManyTrials
		}
		if err := s.trial(ctx, g, i, next, d); err != nil {
			return lo, up, err
		}
	}
}

// next picks the load to try, in this order: a load between the bounds
// still undecided at this duration (earlier phases' bounds being
// re-measured, or a trial held back: the highest one that passed
// somewhere, else the lowest); the ceiling when nothing failed yet; a step down from the upper bound when
// nothing passed (to the rate the DUT forwarded when that is lower: the
// first guess at its capacity), or up from the lower one when nothing
// failed, each step twice the last; else the midpoint while the bounds are
// wider than width.
func (s *searcher) next(g Goal, d time.Duration, width, lo, up float64, stepUp, stepDown *float64) (float64, bool) {
	top := math.Min(up, s.top)
	var pick float64
	pickPassed := false
	for x, os := range s.loads {
		if x <= lo || x > top || (x == top && !math.IsInf(up, 1)) || s.classify(x, g, d) != undecided {
			continue
		}
		passed := slices.ContainsFunc(os, func(o outcome) bool { return o.loss <= g.LossRatio })
		switch {
		case pick == 0, passed && !pickPassed, passed && x > pick, !passed && !pickPassed && x < pick:
			pick, pickPassed = x, passed
		}
	}
	if pick != 0 {
		return pick, false
	}
	if math.IsInf(up, 1) {
		if lo == s.top {
			return 0, true
		}
		if lo == 0 {
			return s.top, false
		}
		next := math.Min(s.top, lo/(1-*stepUp))
		*stepUp = math.Min(2**stepUp, 0.5)
		return next, false
	}
	if lo == 0 {
		if up <= s.opts.MinRate {
			return 0, true
		}
		next := up * (1 - *stepDown)
		if rx := s.forwarded(up); rx > 0 && rx < next {
			next = rx * (1 - width/2)
		}
		*stepDown = math.Min(2**stepDown, 0.5)
		return math.Max(next, s.opts.MinRate), false
	}
	if (up-lo)/up <= width {
		return 0, true
	}
	return (lo + up) / 2, false
}

// forwarded is the received rate of the last trial at load x.
func (s *searcher) forwarded(x float64) float64 {
	os := s.loads[x]
	if len(os) == 0 {
		return 0
	}
	return os[len(os)-1].rx
}

func (s *searcher) trial(ctx context.Context, g Goal, phase int, rate float64, d time.Duration) error {
	spec := TrialSpec{Size: s.opts.Size, Rate: rate, Duration: d}
	r, err := s.t.Trial(ctx, spec)
	if err != nil {
		return fmt.Errorf("rfc2544: trial at %.0f fps for %v: %w", rate, d, err)
	}
	o := outcome{dur: d, loss: r.LossRatio(), rx: float64(r.Received) / d.Seconds()}
	rec := TrialRecord{Goal: g.Name, Phase: phase, Rate: rate, Duration: d, Sent: r.Sent, Received: r.Received, Loss: o.loss, Offered: rate}
	if r.SendTime > 0 {
		rec.Offered = float64(r.Sent) / r.SendTime.Seconds()
		short := s.opts.OfferedTolerance >= 0 && rec.Offered < (1-s.opts.OfferedTolerance)*rate
		if r.Refused > 0 && rec.Offered < (1-backpressureSlack)*rate {
			// The DUT did not take the load: what it held back, a wire
			// would have seen it drop.
			rec.Backpressure = true
			o.loss = max(o.loss, 1-rec.Offered/rate)
			rec.Loss = o.loss
		} else {
			rec.HeldBack = short
		}
	}
	if rec.HeldBack {
		s.heldBack(rate, rec.Offered)
	} else {
		s.held[rate] = 0
		s.loads[rate] = append(s.loads[rate], o)
	}
	s.result.Trials = append(s.result.Trials, rec)
	if r.SendTime > 0 {
		s.result.TrialTime += r.SendTime
	} else {
		s.result.TrialTime += d
	}
	if s.opts.OnTrial != nil {
		s.opts.OnTrial(rec)
	}
	return nil
}

// heldBack counts a held-back trial at load x that offered offered; the
// heldBackLimit-th running (steady offers; erratic ones, thrice as many)
// lowers the ceiling to the best the generator offered there, or the
// highest load below x it did offer: asked for x it cannot deliver it
// now, and a load it cannot offer is evidence of nothing.
func (s *searcher) heldBack(x, offered float64) {
	s.result.HeldBack++
	s.retry = x
	if s.held[x]++; s.held[x] == 1 {
		s.best[x], s.worst[x] = offered, offered
	}
	s.best[x], s.worst[x] = max(s.best[x], offered), min(s.worst[x], offered)
	steady := s.best[x] <= s.worst[x]*(1+2*max(s.opts.OfferedTolerance, 0))
	if s.held[x] < heldBackLimit || !steady && s.held[x] < 3*heldBackLimit || x > s.top {
		return
	}
	s.held[x], s.retry = 0, 0
	top := max(s.best[x], s.opts.MinRate)
	for y := range s.loads {
		if y < x {
			top = max(top, y)
		}
	}
	if top < s.top {
		s.top = top
		s.result.GeneratorLimited = true
	}
}

// Repeatability is max ÷ min of rates found by repeated searches (1 is
// perfectly repeatable); +Inf when one of them is 0.
func Repeatability(rates []float64) float64 {
	if len(rates) == 0 {
		return math.NaN()
	}
	lo, hi := slices.Min(rates), slices.Max(rates)
	if lo <= 0 {
		return math.Inf(1)
	}
	return hi / lo
}
