package rfc2544

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
)

// Measure names one of RFC 2544's measurements.
type Measure string

// The measurements Run makes, in this order.
const (
	Throughput Measure = "throughput" // NDR and PDR by Search (RFC 2544 26.1)
	Latency    Measure = "latency"    // at fractions of NDR (26.2)
	FrameLoss  Measure = "frame-loss" // loss ratio at fractions of MaxRate (26.3)
	BackToBack Measure = "back-to-back"
)

// AllMeasures lists every measurement.
var AllMeasures = []Measure{Throughput, Latency, FrameLoss, BackToBack}

// Defaults of Options.
var (
	DefaultLatencyLoads = []float64{0.1, 0.5, 0.9, 1.0}
	DefaultLossLoads    = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}
)

// DefaultBurstTrials is how many back-to-back searches are averaged (RFC
// 2544 asks for 50; each is a bisection of several bursts).
const DefaultBurstTrials = 3

// Options configure Run. Zero fields take their defaults.
type Options struct {
	// Search is the template of every search; its Size is set per size
	// and its MaxRate by MaxRate when that is set.
	Search SearchOptions
	// MaxRate, when set, gives each size's highest offered load (line
	// rate for that size, or what the generator sends).
	MaxRate func(FrameSize) float64
	// Sizes default to StandardSizes.
	Sizes []FrameSize
	// Measures default to AllMeasures; latency needs throughput.
	Measures []Measure
	// Repeats is how many searches run at RepeatSize (default 1; three
	// give search_repeatability). RepeatSize defaults to 64.
	Repeats    int
	RepeatSize FrameSize
	// LatencyLoads are fractions of NDR (default 10, 50, 90, 100 %);
	// LossLoads fractions of MaxRate (default 10 % to 100 % by 10 %).
	LatencyLoads, LossLoads []float64
	// BurstTrials back-to-back searches are averaged (default
	// DefaultBurstTrials); the longest burst tried is MaxRate ×
	// BurstDuration (default 2 s, RFC 2544's minimum).
	BurstTrials   int
	BurstDuration time.Duration
	// Clock times the run (nil: clock.NewReal()).
	Clock clock.Clock
	// Progress, when set, gets one line per step.
	Progress func(string)
}

func (o *Options) validate() error {
	if len(o.Sizes) == 0 {
		o.Sizes = StandardSizes
	}
	for _, s := range o.Sizes {
		if s != IMIX && (s < 64 || s > 9018) {
			return fmt.Errorf("rfc2544: frame size %d: give 64..9018 bytes with FCS, or IMIX", int(s))
		}
	}
	if len(o.Measures) == 0 {
		o.Measures = AllMeasures
	}
	for _, m := range o.Measures {
		if !slices.Contains(AllMeasures, m) {
			return fmt.Errorf("rfc2544: measure %q: give one of %v", m, AllMeasures)
		}
	}
	if o.has(Latency) && !o.has(Throughput) {
		return fmt.Errorf("rfc2544: the latency measure runs at fractions of NDR: add %q", Throughput)
	}
	if o.Repeats == 0 {
		o.Repeats = 1
	}
	if o.Repeats < 1 || o.Repeats > 20 {
		return fmt.Errorf("rfc2544: Repeats %d: give 1..20 searches", o.Repeats)
	}
	if o.RepeatSize == 0 {
		o.RepeatSize = 64
	}
	if len(o.LatencyLoads) == 0 {
		o.LatencyLoads = DefaultLatencyLoads
	}
	if len(o.LossLoads) == 0 {
		o.LossLoads = DefaultLossLoads
	}
	for _, f := range append(slices.Clone(o.LatencyLoads), o.LossLoads...) {
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("rfc2544: load fraction %g: give (0, 1]", f)
		}
	}
	if o.BurstTrials == 0 {
		o.BurstTrials = DefaultBurstTrials
	}
	if o.BurstDuration == 0 {
		o.BurstDuration = 2 * time.Second
	}
	if o.BurstTrials < 1 || o.BurstDuration <= 0 {
		return fmt.Errorf("rfc2544: BurstTrials %d and BurstDuration %v: give at least 1 and a positive duration", o.BurstTrials, o.BurstDuration)
	}
	if o.Clock == nil {
		o.Clock = clock.NewReal()
	}
	if o.MaxRate != nil {
		o.Search.MaxRate = o.MaxRate(o.Sizes[0])
	}
	// In place, so that the defaults are what a report records.
	return o.Search.Validate()
}

func (o *Options) has(m Measure) bool { return slices.Contains(o.Measures, m) }

// LatencyPoint is the latency of one trial at a fraction of NDR, in
// nanoseconds (within 1 % for the quantiles: hist.HDR).
type LatencyPoint struct {
	Load     float64 `json:"load_of_ndr"`
	Rate     float64 `json:"rate_fps"`
	Sent     uint64  `json:"sent"`
	Received uint64  `json:"received"`
	Min      uint64  `json:"min_ns"`
	Avg      float64 `json:"avg_ns"`
	P50      uint64  `json:"p50_ns"`
	P99      uint64  `json:"p99_ns"`
	P999     uint64  `json:"p99_9_ns"`
	Max      uint64  `json:"max_ns"`
}

// LossPoint is the frame loss rate at a fraction of MaxRate.
type LossPoint struct {
	Load     float64 `json:"load_of_max"`
	Rate     float64 `json:"rate_fps"`
	Sent     uint64  `json:"sent"`
	Received uint64  `json:"received"`
	Loss     float64 `json:"loss_ratio"`
}

// BurstResult is the back-to-back measure: the longest burst at MaxRate
// forwarded without loss, per search and averaged.
type BurstResult struct {
	Rate   float64  `json:"rate_fps"`
	Bursts []uint64 `json:"bursts"`
	Mean   float64  `json:"mean"`
	// AtMax: the longest burst tried passed, so the DUT's buffer is at
	// least that (or it keeps up with MaxRate).
	AtMax   bool   `json:"at_max"`
	Longest uint64 `json:"longest_tried"`
}

// SizeResult holds one frame size's measurements.
type SizeResult struct {
	Size    FrameSize `json:"-"`
	SizeStr string    `json:"size"`
	MaxRate float64   `json:"max_rate_fps"`
	// Searches holds every search at this size (Repeats at RepeatSize);
	// NDR and PDR are the median of theirs.
	Searches      []*SearchResult `json:"searches,omitempty"`
	NDR           float64         `json:"ndr_fps"`
	PDR           float64         `json:"pdr_fps"`
	Repeatability float64         `json:"search_repeatability,omitempty"`
	// Ceiling is what the traffic side itself offers and receives at this
	// size, when measured (the veth harness). GeneratorLimited: the NDR
	// reached it, or the search's own ceiling (SearchResult), so the
	// DUT's NDR is at least NDR, not NDR: the JSON then gives it as
	// ndr_at_least_fps, never as ndr_fps.
	Ceiling          float64        `json:"generator_ceiling_fps,omitempty"`
	GeneratorLimited bool           `json:"generator_limited"`
	Latency          []LatencyPoint `json:"latency,omitempty"`
	FrameLoss        []LossPoint    `json:"frame_loss,omitempty"`
	BackToBack       *BurstResult   `json:"back_to_back,omitempty"`
}

// NDRText is the NDR as the report and the ratio lines give it: "≥ N
// (generator-limited)" when the generator, not the DUT, bounded it.
func (s *SizeResult) NDRText() string {
	if s.GeneratorLimited {
		return fmt.Sprintf("≥ %.0f (generator-limited)", s.NDR)
	}
	return fmt.Sprintf("%.0f", s.NDR)
}

// MarshalJSON writes a generator-limited NDR as ndr_at_least_fps (and
// ndr_fps null): it is a lower bound, not the DUT's NDR.
func (s SizeResult) MarshalJSON() ([]byte, error) {
	type plain SizeResult
	if !s.GeneratorLimited {
		return json.Marshal(plain(s))
	}
	return json.Marshal(struct {
		plain
		NDR     *float64 `json:"ndr_fps"`
		AtLeast float64  `json:"ndr_at_least_fps"`
		Text    string   `json:"ndr"`
	}{plain(s), nil, s.NDR, s.NDRText()})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *SizeResult) UnmarshalJSON(b []byte) error {
	type plain SizeResult
	var v struct {
		plain
		AtLeast float64 `json:"ndr_at_least_fps"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = SizeResult(v.plain)
	if s.GeneratorLimited {
		s.NDR = v.AtLeast
	}
	s.Size = parseSize(s.SizeStr)
	return nil
}

// parseSize reads FrameSize.String's form back (0, IMIX, when it is not a
// length).
func parseSize(str string) FrameSize {
	var n int
	if _, err := fmt.Sscanf(str, "%dB", &n); err != nil {
		return IMIX
	}
	return FrameSize(n)
}

// Result is one DUT's run.
type Result struct {
	DUT     string        `json:"dut"`
	Sizes   []SizeResult  `json:"sizes"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Size returns the result for s, or nil.
func (r *Result) Size(s FrameSize) *SizeResult {
	for i := range r.Sizes {
		if r.Sizes[i].Size == s {
			return &r.Sizes[i]
		}
	}
	return nil
}

// Run makes the RFC 2544 measurements against one DUT, size by size: the
// throughput search (Repeats times at RepeatSize), latency at fractions of
// the NDR found, the frame loss rate at fractions of MaxRate and the
// back-to-back burst length.
func Run(ctx context.Context, t Trialer, dut string, opts Options) (*Result, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	res := &Result{DUT: dut}
	start := opts.Clock.Now()
	defer func() { res.Elapsed = opts.Clock.Now().Sub(start) }()
	say := func(format string, a ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf("%s: ", dut) + fmt.Sprintf(format, a...))
		}
	}
	for _, size := range opts.Sizes {
		so := opts.Search
		so.Size = size
		if opts.MaxRate != nil {
			so.MaxRate = opts.MaxRate(size)
		}
		if err := so.Validate(); err != nil {
			return res, err
		}
		sr := SizeResult{Size: size, SizeStr: size.String(), MaxRate: so.MaxRate}
		if opts.has(Throughput) {
			n := 1
			if size == opts.RepeatSize {
				n = opts.Repeats
			}
			var ndr, pdr []float64
			for i := range n {
				s, err := Search(ctx, t, so)
				if err != nil {
					return res, fmt.Errorf("%s %s search %d: %w", dut, size, i+1, err)
				}
				sr.Searches = append(sr.Searches, s)
				ndr = append(ndr, s.NDR())
				if len(s.Goals) > 1 {
					pdr = append(pdr, s.Goals[1].Rate)
				}
				say("%s search %d/%d: NDR %.0f fps, %d trials", size, i+1, n, s.NDR(), len(s.Trials))
				if s.HeldBack > 0 {
					say("%s search %d/%d: %d trials held back (offered < %.0f %% of their rate) decided nothing and were run again", size, i+1, n, s.HeldBack, 100*(1-so.OfferedTolerance))
				}
				if s.GeneratorLimited {
					say("%s search %d/%d: the generator could not offer more than %.0f fps: the search's ceiling", size, i+1, n, s.Ceiling)
				}
			}
			sr.NDR, sr.PDR = median(ndr), median(pdr)
			// The median is a lower bound when a search it comes from
			// passed its generator-lowered ceiling.
			byNDR := slices.SortedFunc(slices.Values(sr.Searches), func(a, b *SearchResult) int { return cmp.Compare(a.NDR(), b.NDR()) })
			for _, s := range byNDR[(n-1)/2 : n/2+1] {
				if s.GeneratorLimited && s.Goals[0].AtMax {
					sr.GeneratorLimited = true
				}
			}
			if n > 1 {
				sr.Repeatability = Repeatability(ndr)
			}
		}
		if opts.has(Latency) && sr.NDR > 0 {
			for _, f := range opts.LatencyLoads {
				r, err := t.Trial(ctx, TrialSpec{Size: size, Rate: f * sr.NDR, Duration: so.Duration, Latency: true})
				if err != nil {
					return res, fmt.Errorf("%s %s latency at %.0f %% of NDR: %w", dut, size, 100*f, err)
				}
				p := LatencyPoint{Load: f, Rate: f * sr.NDR, Sent: r.Sent, Received: r.Received}
				if h := r.Latency; h != nil && h.Count() > 0 {
					p.Min, p.Avg, p.Max = h.Min(), h.Mean(), h.Max()
					p.P50, p.P99, p.P999 = h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999)
				}
				sr.Latency = append(sr.Latency, p)
				say("%s latency at %.0f %% of NDR: p50 %d ns p99 %d ns", size, 100*f, p.P50, p.P99)
			}
		}
		if opts.has(FrameLoss) {
			loads := slices.Sorted(slices.Values(opts.LossLoads))
			for _, f := range loads {
				r, err := t.Trial(ctx, TrialSpec{Size: size, Rate: f * so.MaxRate, Duration: so.Duration})
				if err != nil {
					return res, fmt.Errorf("%s %s frame loss at %.0f %%: %w", dut, size, 100*f, err)
				}
				sr.FrameLoss = append(sr.FrameLoss, LossPoint{Load: f, Rate: f * so.MaxRate, Sent: r.Sent, Received: r.Received, Loss: r.LossRatio()})
			}
			say("%s frame loss at 100 %%: %.4f", size, sr.FrameLoss[len(sr.FrameLoss)-1].Loss)
		}
		if opts.has(BackToBack) {
			b, err := backToBack(ctx, t, size, so, opts)
			if err != nil {
				return res, fmt.Errorf("%s %s back-to-back: %w", dut, size, err)
			}
			sr.BackToBack = b
			say("%s back-to-back: %.0f frames", size, b.Mean)
		}
		res.Sizes = append(res.Sizes, sr)
	}
	return res, nil
}

// backToBack bisects the burst length at MaxRate: the longest burst with
// no loss, to the search's relative width, BurstTrials times.
func backToBack(ctx context.Context, t Trialer, size FrameSize, so SearchOptions, opts Options) (*BurstResult, error) {
	longest := max(uint64(so.MaxRate*opts.BurstDuration.Seconds()), 2)
	b := &BurstResult{Rate: so.MaxRate, Longest: longest}
	burst := func(n uint64) (bool, error) {
		r, err := t.Trial(ctx, TrialSpec{Size: size, Rate: so.MaxRate, Frames: n})
		return err == nil && r.Received >= r.Sent, err
	}
	for range opts.BurstTrials {
		ok, err := burst(longest)
		if err != nil {
			return nil, err
		}
		if ok {
			b.AtMax = true
			b.Bursts = append(b.Bursts, longest)
			continue
		}
		lo, hi := uint64(0), longest // lo passed (0 trivially), hi failed
		for hi-lo > 1 && float64(hi-lo) > so.Width*float64(hi) {
			mid := lo + (hi-lo)/2
			ok, err := burst(mid)
			if err != nil {
				return nil, err
			}
			if ok {
				lo = mid
			} else {
				hi = mid
			}
		}
		b.Bursts = append(b.Bursts, lo)
	}
	var sum float64
	for _, n := range b.Bursts {
		sum += float64(n)
	}
	b.Mean = sum / float64(len(b.Bursts))
	return b, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
