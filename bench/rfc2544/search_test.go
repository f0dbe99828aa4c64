package rfc2544

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// TestSearchFindsCapacityAcrossSeeds runs the search against simulated
// DUTs of random capacity whose trials jitter by up to 0.2 % and are
// disturbed (30–90 % of capacity) 3 % of the time, on the virtual clock:
// every seed's NDR must lie within the resolution below the capacity (and
// the jitter), and never above it, and PDR likewise. 1,000 seeds (100
// under -short, 200 under the race detector); -seed=N replays one.
func TestSearchFindsCapacityAcrossSeeds(t *testing.T) {
	seeds := []uint64{}
	if s, ok := testenv.Replay(t); ok {
		seeds = append(seeds, s)
	} else {
		for s := range (testenv.Seeds{Full: 1000, Short: 100, Race: 200}).N(t) {
			seeds = append(seeds, uint64(s))
		}
	}
	const jitter = 0.002
	var trials, maxTrials int
	var simTime time.Duration
	for _, seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 1))
		capacity := 2e5 + r.Float64()*3e6
		vc := clock.NewVirtual(0)
		dut, err := NewSimulated(SimulatedOptions{Capacity: capacity, Jitter: jitter, NoisyProb: 0.03, Seed: seed, Clock: vc})
		require.NoError(t, err)
		res, err := Search(context.Background(), dut, SearchOptions{MaxRate: 4e6, Duration: time.Second})
		require.NoError(t, err, "seed %d (replay: go test ./bench/rfc2544 -run TestSearchFindsCapacityAcrossSeeds -seed=%d)", seed, seed)
		for _, g := range res.Goals {
			require.False(t, g.AtMax, "seed %d %s", seed, g.Goal.Name)
			lo := capacity * (1 - jitter) * (1 - DefaultWidth)
			if g.Goal.Name == "PDR" {
				// Up to 0.5 % loss is allowed: the rate may exceed the
				// capacity by 1/(1−0.005).
				require.LessOrEqual(t, g.Rate, capacity/(1-g.Goal.LossRatio), "seed %d %s", seed, g.Goal.Name)
			} else {
				require.LessOrEqual(t, g.Rate, capacity, "seed %d: NDR above the capacity", seed)
			}
			require.GreaterOrEqual(t, g.Rate, lo, "seed %d %s: %.0f below capacity %.0f by more than the width (upper %.0f)", seed, g.Goal.Name, g.Rate, capacity, g.Upper)
			require.LessOrEqual(t, g.Width, DefaultWidth, "seed %d %s", seed, g.Goal.Name)
		}
		require.Equal(t, res.TrialTime, time.Duration(vc.Now()).Round(time.Millisecond), "seed %d: the virtual clock ran the trials' time", seed)
		trials += len(res.Trials)
		maxTrials = max(maxTrials, len(res.Trials))
		simTime += res.TrialTime
	}
	n := float64(len(seeds))
	t.Logf("%d seeds: %.1f trials per search (max %d), %.1f s of trials per search", len(seeds), float64(trials)/n, maxTrials, simTime.Seconds()/n)
}

// TestSearchToleratesOneBadTrialPerLoad: a DUT whose every trial at one
// load below capacity is disturbed once must not take that disturbance
// for its capacity: with the default ExceedRatio, one failing trial makes
// no upper bound. (The first trial at each load and duration fails.)
func TestSearchToleratesOneBadTrialPerLoad(t *testing.T) {
	d := &onceBad{capacity: 1e6, bad: map[[2]float64]bool{}}
	res, err := Search(context.Background(), d, SearchOptions{MaxRate: 2e6})
	require.NoError(t, err)
	require.InDelta(t, 1e6, res.NDR(), 1e6*DefaultWidth)
	require.LessOrEqual(t, res.NDR(), 1e6)
	// And with ExceedRatio 0 (every failing trial counts, RFC 2544's
	// plain binary search) the first bad trial decides the result.
	d = &onceBad{capacity: 1e6, bad: map[[2]float64]bool{}}
	res, err = Search(context.Background(), d, SearchOptions{MaxRate: 2e6, ExceedRatio: 1e-9, SumFactor: 1})
	require.NoError(t, err)
	require.Less(t, res.NDR(), 0.5e6, "a single disturbed trial decides a search without tolerance")
}

// onceBad loses 10 % of the first trial at every load and duration, then
// behaves.
type onceBad struct {
	capacity float64
	bad      map[[2]float64]bool
}

func (d *onceBad) Trial(_ context.Context, spec TrialSpec) (TrialResult, error) {
	sent := spec.Count()
	recv := sent
	if spec.Rate > d.capacity {
		recv = uint64(d.capacity * spec.Duration.Seconds())
	}
	if k := [2]float64{spec.Rate, spec.Duration.Seconds()}; !d.bad[k] {
		d.bad[k] = true
		recv = recv * 9 / 10
	}
	return TrialResult{Sent: sent, Received: recv}, nil
}

func TestSearchReportsAtMaxAndBelowMin(t *testing.T) {
	fast, _ := NewSimulated(SimulatedOptions{Capacity: 5e6})
	res, err := Search(context.Background(), fast, SearchOptions{MaxRate: 1e6})
	require.NoError(t, err)
	require.True(t, res.Goals[0].AtMax)
	require.Equal(t, 1e6, res.NDR())
	// Confirmed at the final duration: the last trial at MaxRate is a
	// full-length one.
	require.Equal(t, DefaultDuration, res.Trials[len(res.Trials)-1].Duration)

	slow, _ := NewSimulated(SimulatedOptions{Capacity: 10})
	res, err = Search(context.Background(), slow, SearchOptions{MaxRate: 1e6, MinRate: 1000})
	require.NoError(t, err)
	require.Zero(t, res.NDR())
	require.Equal(t, 1000.0, res.Goals[0].Upper)
}

func TestSearchOptionsRejectNonsense(t *testing.T) {
	for _, o := range []SearchOptions{
		{},
		{MaxRate: math.Inf(1)},
		{MaxRate: 10, MinRate: 20},
		{MaxRate: 10, Width: 0.7},
		{MaxRate: 10, Duration: time.Second, InitialDuration: 2 * time.Second},
		{MaxRate: 10, PDRLoss: 1},
		{MaxRate: 10, ExceedRatio: 1},
		{MaxRate: 10, SumFactor: 0.5},
	} {
		require.Error(t, o.Validate(), "%+v", o)
	}
}

func TestSearchGivesUpOnAnErraticDUT(t *testing.T) {
	// Every trial loses: no bound ever settles? It does: everything is an
	// upper bound. A DUT that alternates pass and fail at every load does
	// not, with a SumFactor that needs many trials and a tiny MaxTrials.
	d := &alternating{}
	_, err := Search(context.Background(), d, SearchOptions{MaxRate: 1e6, MaxTrials: 20, SumFactor: 50, ExceedRatio: 0.5})
	require.ErrorIs(t, err, ErrTooManyTrials)
}

type alternating struct{ n int }

func (a *alternating) Trial(_ context.Context, spec TrialSpec) (TrialResult, error) {
	a.n++
	sent := spec.Count()
	if a.n%2 == 0 {
		return TrialResult{Sent: sent, Received: sent / 2}, nil
	}
	return TrialResult{Sent: sent, Received: sent}, nil
}

func TestRepeatability(t *testing.T) {
	require.Equal(t, 1.1, Repeatability([]float64{100, 110, 105}))
	require.True(t, math.IsInf(Repeatability([]float64{0, 1}), 1))
}

// TestSearchFlagsAGeneratorThatCannotKeepUp: a Trialer whose sends took
// longer than the rate allows marks the search generator-limited.
func TestSearchFlagsAGeneratorThatCannotKeepUp(t *testing.T) {
	slow := &slowGen{limit: 5e5}
	res, err := Search(context.Background(), slow, SearchOptions{MaxRate: 1e6})
	require.NoError(t, err)
	require.True(t, res.GeneratorLimited)
	res, err = Search(context.Background(), &slowGen{limit: 2e6}, SearchOptions{MaxRate: 1e6})
	require.NoError(t, err)
	require.False(t, res.GeneratorLimited)
	require.InDelta(t, 1e6, res.Trials[0].Offered, 1)
}

// slowGen sends at most limit frames per second and loses nothing.
type slowGen struct{ limit float64 }

func (g *slowGen) Trial(_ context.Context, spec TrialSpec) (TrialResult, error) {
	n := spec.Count()
	d := time.Duration(float64(n) / min(spec.Rate, g.limit) * float64(time.Second))
	return TrialResult{Sent: n, Received: n, SendTime: d}, nil
}
