package swift_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt/swift"
)

const us = time.Microsecond

// newController returns a Controller initialised with p, failing the test
// on error.
func newController(t testing.TB, p swift.Params) *swift.Controller {
	t.Helper()
	var c swift.Controller
	require.NoError(t, c.Init(p))
	return &c
}

// withCwnd returns the default params with the initial window set to w.
func withCwnd(w float64) swift.Params {
	p := swift.DefaultParams()
	p.InitialCwnd = w
	return p
}

func TestDefaultParamsMatchGoogle(t *testing.T) {
	p := swift.DefaultParams()
	require.NoError(t, p.Validate())
	require.Equal(t, 25*us, p.BaseTarget)
	require.Equal(t, 1*us, p.PerHopTarget)
	require.Equal(t, 100*us, p.FlowScalingRange)
	require.Equal(t, 0.1, p.FlowScalingMinCwnd)
	require.Equal(t, 256.0, p.FlowScalingMaxCwnd)
	require.Equal(t, 1.0, p.AI)
	require.Equal(t, 0.8, p.Beta)
	require.Equal(t, 0.5, p.MaxMDF)
	require.Equal(t, 0.01, p.MinCwnd)
	require.Equal(t, 256.0, p.MaxCwnd)
	require.Equal(t, 32.0, p.InitialCwnd)
	require.Equal(t, 3, p.RetxResetThreshold)
	require.False(t, p.CutOnEarlyRetransmit)
}

func TestValidateNamesFieldAndFix(t *testing.T) {
	cases := []struct {
		field string
		mut   func(*swift.Params)
	}{
		{"BaseTarget", func(p *swift.Params) { p.BaseTarget = 0 }},
		{"BaseTarget", func(p *swift.Params) { p.BaseTarget = 2 * time.Second }},
		{"PerHopTarget", func(p *swift.Params) { p.PerHopTarget = -1 }},
		{"Hops", func(p *swift.Params) { p.Hops = -1 }},
		{"Hops", func(p *swift.Params) { p.Hops = swift.MaxHops + 1 }},
		{"FlowScalingRange", func(p *swift.Params) { p.FlowScalingRange = -us }},
		{"FlowScalingMinCwnd", func(p *swift.Params) { p.FlowScalingMinCwnd = 0 }},
		{"FlowScalingMinCwnd", func(p *swift.Params) { p.FlowScalingMinCwnd = math.NaN() }},
		{"FlowScalingMaxCwnd", func(p *swift.Params) { p.FlowScalingMaxCwnd = p.FlowScalingMinCwnd }},
		{"FlowScalingMaxCwnd", func(p *swift.Params) { p.FlowScalingMaxCwnd = math.Inf(1) }},
		{"AI", func(p *swift.Params) { p.AI = 0 }},
		{"AI", func(p *swift.Params) { p.AI = math.NaN() }},
		{"Beta", func(p *swift.Params) { p.Beta = 0 }},
		{"Beta", func(p *swift.Params) { p.Beta = 1 }},
		{"MaxMDF", func(p *swift.Params) { p.MaxMDF = 0 }},
		{"MaxMDF", func(p *swift.Params) { p.MaxMDF = 1.5 }},
		{"MinCwnd", func(p *swift.Params) { p.MinCwnd = 0 }},
		{"MaxCwnd", func(p *swift.Params) { p.MaxCwnd = p.MinCwnd / 2 }},
		{"MaxCwnd", func(p *swift.Params) { p.MaxCwnd = swift.MaxCwndLimit + 1 }},
		{"InitialCwnd", func(p *swift.Params) { p.InitialCwnd = p.MaxCwnd + 1 }},
		{"InitialCwnd", func(p *swift.Params) { p.InitialCwnd = 0 }},
		{"RetxResetThreshold", func(p *swift.Params) { p.RetxResetThreshold = 0 }},
	}
	for _, tc := range cases {
		p := swift.DefaultParams()
		tc.mut(&p)
		err := p.Validate()
		require.Error(t, err, tc.field)
		require.True(t, errors.Is(err, swift.ErrInvalidParams), "%v", err)
		require.Contains(t, err.Error(), "set Params."+tc.field, "%v", err)

		c := newController(t, swift.DefaultParams())
		require.ErrorIs(t, c.Init(p), swift.ErrInvalidParams)
		require.Equal(t, 32.0, c.Cwnd(), "a failed Init leaves the controller unchanged")
	}
	require.ErrorIs(t, swift.Params{}.Validate(), swift.ErrInvalidParams, "the zero Params is not valid")
}

func TestInitialState(t *testing.T) {
	c := newController(t, swift.DefaultParams())
	require.Equal(t, 32.0, c.Cwnd())
	require.Equal(t, 32, c.Window())
	require.Zero(t, c.SRTT())
	require.Zero(t, c.PacingGap())
	require.Equal(t, swift.Stats{}, c.Stats())
	require.Equal(t, swift.DefaultParams(), c.Params())
}

func TestAdditiveIncreaseBelowTarget(t *testing.T) {
	c := newController(t, swift.DefaultParams())
	now := clock.Time(0)
	// One window's worth of ACKs, one packet each, raises cwnd by about AI.
	for range 32 {
		now += clock.Time(us)
		c.OnAck(now, 10*us, 1)
	}
	require.InDelta(t, 33.0, c.Cwnd(), 0.02)
	require.Equal(t, uint64(32), c.Stats().Increases)
	require.Equal(t, uint64(0), c.Stats().Decreases)

	// The increase is proportional to the packets acknowledged.
	before := c.Cwnd()
	c.OnAck(now, 10*us, 4)
	require.InDelta(t, before+4/before, c.Cwnd(), 1e-12)

	// Below one packet each ACK adds AI*acked: a sub-packet window is one
	// ACK per round trip.
	c = newController(t, withCwnd(0.25))
	c.OnAck(0, 10*us, 1)
	require.InDelta(t, 1.25, c.Cwnd(), 1e-12)
}

func TestACKWithoutSampleChangesNoWindow(t *testing.T) {
	c := newController(t, swift.DefaultParams())
	c.OnAck(1000, 0, 5)
	require.Equal(t, 32.0, c.Cwnd())
	require.Zero(t, c.SRTT())
	require.Zero(t, c.Stats().RTTSamples)
}

func TestMultiplicativeDecreaseAboveTargetOncePerRTT(t *testing.T) {
	p := swift.DefaultParams()
	c := newController(t, p)
	now := clock.Time(time.Millisecond)
	rtt := 50 * us
	target := c.TargetDelay()
	require.Less(t, target, rtt)

	c.OnAck(now, rtt, 1)
	// TargetDelay rounds to the ns; 1ns of target is 5e-4 packets here.
	want := 32 * (1 - p.Beta*float64(rtt-target)/float64(rtt))
	require.InDelta(t, want, c.Cwnd(), 1e-3)
	require.Equal(t, uint64(1), c.Stats().Decreases)

	// Within one RTT of the decrease, further high delays change nothing.
	after := c.Cwnd()
	for i := range 10 {
		c.OnAck(now+clock.Time(i)*clock.Time(us), rtt, 1)
	}
	require.Equal(t, after, c.Cwnd())
	require.Equal(t, uint64(1), c.Stats().Decreases)

	// One RTT later it decreases again, against the target of the smaller
	// window (flow scaling has raised it).
	now += clock.Time(rtt)
	target = c.TargetDelay()
	c.OnAck(now, rtt, 1)
	require.InDelta(t, after*(1-p.Beta*float64(rtt-target)/float64(rtt)), c.Cwnd(), 1e-3)
	require.Less(t, c.Cwnd(), after)
	require.Equal(t, uint64(2), c.Stats().Decreases)
}

func TestDecreaseBoundedByMaxMDF(t *testing.T) {
	p := swift.DefaultParams()
	c := newController(t, p)
	c.OnAck(clock.Time(time.Second), 10*time.Millisecond, 1)
	require.InDelta(t, 32*(1-p.MaxMDF), c.Cwnd(), 1e-9, "a huge delay cuts by exactly MaxMDF")

	// A delay just above target cuts by much less.
	c = newController(t, p)
	target := c.TargetDelay()
	c.OnAck(clock.Time(time.Second), target+us, 1)
	require.Greater(t, c.Cwnd(), 32*(1-0.05))
	require.Less(t, c.Cwnd(), 32.0)
}

func TestFlowScalingRaisesTargetAsCwndFalls(t *testing.T) {
	p := swift.DefaultParams()
	fs := func(w float64) time.Duration {
		x := (1/math.Sqrt(w) - 1/math.Sqrt(p.FlowScalingMaxCwnd)) /
			(1/math.Sqrt(p.FlowScalingMinCwnd) - 1/math.Sqrt(p.FlowScalingMaxCwnd))
		return time.Duration(float64(p.FlowScalingRange) * min(max(x, 0), 1))
	}
	prev := time.Duration(0)
	for _, w := range []float64{256, 128, 32, 8, 2, 1, 0.5, 0.1, 0.05, 0.01} {
		c := newController(t, withCwnd(w))
		got := c.TargetDelay()
		require.InDelta(t, float64(p.BaseTarget+fs(w)), float64(got), 2, "cwnd %v", w)
		if prev != 0 {
			require.GreaterOrEqual(t, got, prev, "cwnd %v", w)
		}
		prev = got
	}
	require.Equal(t, p.BaseTarget, newController(t, withCwnd(256)).TargetDelay(), "no scaling at FlowScalingMaxCwnd")
	require.Equal(t, p.BaseTarget+p.FlowScalingRange, newController(t, withCwnd(0.1)).TargetDelay(), "full scaling at FlowScalingMinCwnd")
	require.Equal(t, p.BaseTarget+p.FlowScalingRange, newController(t, withCwnd(0.01)).TargetDelay(), "clamped below FlowScalingMinCwnd")

	// Hops add PerHopTarget each; a zero range disables flow scaling.
	p.Hops, p.FlowScalingRange, p.InitialCwnd = 6, 0, 0.5
	c := newController(t, p)
	require.Equal(t, p.BaseTarget+6*p.PerHopTarget, c.TargetDelay())

	// A measured hop count replaces Params.Hops, clamped to [0, MaxHops];
	// only changes count.
	c.SetHops(2)
	require.Equal(t, 2, c.Hops())
	require.Equal(t, p.BaseTarget+2*p.PerHopTarget, c.TargetDelay())
	c.SetHops(2)
	c.SetHops(-5)
	require.Equal(t, p.BaseTarget, c.TargetDelay())
	c.SetHops(1000)
	require.Equal(t, swift.MaxHops, c.Hops())
	require.Equal(t, uint64(3), c.Stats().HopChanges)
}

// A longer path tolerates more delay before the window shrinks: the same
// RTT sample decreases the window on a direct path and grows it on one
// whose measured hops lift the target above the sample.
func TestHopsRaiseTheTarget(t *testing.T) {
	p := swift.DefaultParams()
	p.FlowScalingRange = 0
	rtt := p.BaseTarget + 3*p.PerHopTarget
	direct, far := newController(t, p), newController(t, p)
	far.SetHops(5)
	now := clock.Time(time.Second)
	direct.OnAck(now, rtt, 1)
	far.OnAck(now, rtt, 1)
	require.Less(t, direct.Cwnd(), p.InitialCwnd, "above a 0-hop target")
	require.Greater(t, far.Cwnd(), p.InitialCwnd, "below a 5-hop target")
}

func TestPacingBelowOnePacket(t *testing.T) {
	c := newController(t, withCwnd(0.25))
	require.Equal(t, 1, c.Window())
	require.Zero(t, c.PacingGap(), "no RTT sample yet")

	// A sample above target keeps the window below 1; the gap spreads
	// cwnd packets over one SRTT.
	c.OnAck(clock.Time(time.Second), 400*us, 0)
	require.Equal(t, 400*us, c.SRTT())
	require.Less(t, c.Cwnd(), 0.25)
	require.Equal(t, 1, c.Window())
	require.InDelta(t, float64(400*us)/c.Cwnd(), float64(c.PacingGap()), 1)

	c = newController(t, withCwnd(1))
	c.OnAck(0, 10*us, 1)
	require.Equal(t, 2.0, c.Cwnd())
	require.Zero(t, c.PacingGap(), "no pacing at cwnd >= 1")
	require.Equal(t, 2, c.Window())
}

func TestSRTTSmoothing(t *testing.T) {
	c := newController(t, swift.DefaultParams())
	c.OnAck(0, 100*us, 1)
	require.Equal(t, 100*us, c.SRTT(), "the first sample sets SRTT")
	c.OnAck(0, 20*us, 1)
	require.Equal(t, 80*us, c.SRTT(), "3/4 old + 1/4 new")
	c.OnAck(0, 0, 1)
	require.Equal(t, 80*us, c.SRTT(), "no sample, no change")
}

func TestClampToMinAndMax(t *testing.T) {
	p := swift.DefaultParams()
	p.MaxCwnd, p.InitialCwnd = 40, 39.5
	c := newController(t, p)
	for i := range 1000 {
		c.OnAck(clock.Time(i), us, 8)
	}
	require.Equal(t, 40.0, c.Cwnd())
	require.Equal(t, 40, c.Window())

	p = swift.DefaultParams()
	p.MinCwnd = 0.001
	c = newController(t, p)
	now := clock.Time(0)
	for range 200 {
		now += clock.Time(time.Millisecond)
		c.OnAck(now, time.Millisecond, 1)
	}
	require.Equal(t, 0.001, c.Cwnd())
	require.Equal(t, 1, c.Window())
	require.InDelta(t, float64(time.Second), float64(c.PacingGap()), float64(time.Microsecond))
}

func TestTimeoutCutsThenResets(t *testing.T) {
	p := swift.DefaultParams()
	c := newController(t, p)
	now := clock.Time(time.Second)
	c.OnAck(now, 20*us, 1) // below target: SRTT 20µs, cwnd 32+1/32
	start := c.Cwnd()

	// First episode: cut by MaxMDF. The rest of the lost flight, timing out
	// in the same SRTT, belongs to the same episode.
	now += clock.Time(time.Millisecond)
	c.OnRetransmit(now, true)
	require.InDelta(t, start*0.5, c.Cwnd(), 1e-12)
	for range 7 {
		c.OnRetransmit(now+clock.Time(us), true)
	}
	require.InDelta(t, start*0.5, c.Cwnd(), 1e-12)
	st := c.Stats()
	require.Equal(t, uint64(8), st.Timeouts)
	require.Equal(t, uint64(1), st.TimeoutEpisodes)
	require.Equal(t, uint64(1), st.RetransmitCuts)

	// Second episode (the backed-off RTO later): another cut.
	now += clock.Time(2 * time.Millisecond)
	c.OnRetransmit(now, true)
	require.InDelta(t, start*0.25, c.Cwnd(), 1e-12)

	// Third consecutive episode reaches RetxResetThreshold: MinCwnd.
	now += clock.Time(4 * time.Millisecond)
	c.OnRetransmit(now, true)
	require.Equal(t, p.MinCwnd, c.Cwnd())
	st = c.Stats()
	require.Equal(t, uint64(3), st.TimeoutEpisodes)
	require.Equal(t, uint64(2), st.RetransmitCuts)
	require.Equal(t, uint64(1), st.Resets)
	require.Equal(t, 1, c.Window())
	require.Greater(t, c.PacingGap(), time.Duration(0))

	// An ACK ends the episodes: the next timeout only cuts.
	c = newController(t, p)
	c.OnAck(now, 20*us, 1)
	for i := range 5 {
		now += clock.Time(time.Millisecond)
		c.OnRetransmit(now, true)
		if i%2 == 0 {
			c.OnAck(now, 0, 1)
		}
	}
	require.Zero(t, c.Stats().Resets)
	require.Equal(t, uint64(5), c.Stats().RetransmitCuts)
}

// A flight lost before the first RTT sample times out packet by packet,
// microseconds apart: one episode (one cut), not one per packet — which
// reached RetxResetThreshold at the third packet and sent a new
// connection's cwnd to MinCwnd.
func TestTimeoutsBeforeFirstSampleAreOneEpisode(t *testing.T) {
	p := swift.DefaultParams()
	c := newController(t, p)
	now := clock.Time(time.Second)
	for i := range 8 {
		c.OnRetransmit(now+clock.Time(i)*clock.Time(us), true)
	}
	require.InDelta(t, p.InitialCwnd*(1-p.MaxMDF), c.Cwnd(), 1e-12, "one cut for the lost flight")
	st := c.Stats()
	require.Equal(t, uint64(8), st.Timeouts)
	require.Equal(t, uint64(1), st.TimeoutEpisodes)
	require.Zero(t, st.Resets)
	// An ACK ends the episode; with a sample the next ones are told apart
	// by SRTT again.
	c.OnAck(now+clock.Time(time.Millisecond), 20*us, 1)
	c.OnRetransmit(now+clock.Time(2*time.Millisecond), true)
	require.Equal(t, uint64(2), c.Stats().TimeoutEpisodes)
}

func TestTimeoutCutOncePerRTT(t *testing.T) {
	c := newController(t, swift.DefaultParams())
	now := clock.Time(time.Second)
	c.OnAck(now, 100*us, 1) // above target: a decrease at now
	after := c.Cwnd()
	require.Less(t, after, 32.0)
	// A timeout within one SRTT of that decrease does not cut again.
	c.OnRetransmit(now+clock.Time(10*us), true)
	require.Equal(t, after, c.Cwnd())
	require.Equal(t, uint64(1), c.Stats().TimeoutEpisodes)
	require.Zero(t, c.Stats().RetransmitCuts)
}

func TestEarlyRetransmit(t *testing.T) {
	p := swift.DefaultParams()
	c := newController(t, p)
	now := clock.Time(time.Second)
	c.OnAck(now, 20*us, 1)
	w := c.Cwnd()
	c.OnRetransmit(now+clock.Time(time.Millisecond), false)
	require.Equal(t, w, c.Cwnd(), "Google's default: early retransmits do not cut")
	require.Equal(t, uint64(1), c.Stats().EarlyRetransmits)

	// They do end timeout episodes: two timeouts, an early retransmit, two
	// timeouts never reach the reset threshold of 3.
	for i := range 5 {
		now += clock.Time(time.Millisecond)
		c.OnRetransmit(now, i != 2)
	}
	require.Zero(t, c.Stats().Resets)

	// With CutOnEarlyRetransmit: the paper's fast recovery, a MaxMDF cut at
	// most once per SRTT.
	p.CutOnEarlyRetransmit = true
	c = newController(t, p)
	c.OnAck(now, 20*us, 1)
	w = c.Cwnd()
	c.OnRetransmit(now+clock.Time(time.Millisecond), false)
	c.OnRetransmit(now+clock.Time(time.Millisecond+us), false)
	require.InDelta(t, w*(1-p.MaxMDF), c.Cwnd(), 1e-12)
	require.Equal(t, uint64(1), c.Stats().RetransmitCuts)
}

func TestInitResetsState(t *testing.T) {
	c := newController(t, swift.DefaultParams())
	c.OnAck(0, 20*us, 1)
	c.OnRetransmit(clock.Time(time.Millisecond), true)
	require.NoError(t, c.Init(swift.DefaultParams()))
	require.Equal(t, 32.0, c.Cwnd())
	require.Zero(t, c.SRTT())
	require.Equal(t, swift.Stats{}, c.Stats())
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	conns := make([]swift.Controller, 64)
	for i := range conns {
		require.NoError(t, conns[i].Init(swift.DefaultParams()))
	}
	now := clock.Time(0)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		c := &conns[i%len(conns)]
		i++
		now += clock.Time(us)
		c.OnAck(now, time.Duration(10+i%40)*us, 1)
		if i%97 == 0 {
			c.OnRetransmit(now, i%2 == 0)
		}
		_ = c.Window()
		_ = c.PacingGap()
		_ = c.TargetDelay()
		_ = c.Stats()
	})
	require.Zero(t, allocs)
	allocs = testing.AllocsPerRun(100, func() { _ = conns[0].Init(swift.DefaultParams()) })
	require.Zero(t, allocs, "re-initialising a slot allocates nothing")
}

func BenchmarkOnAck(b *testing.B) {
	b.Run("below-target", func(b *testing.B) {
		benchOnAck(b, func(int) time.Duration { return 10 * us })
	})
	b.Run("above-target", func(b *testing.B) {
		benchOnAck(b, func(int) time.Duration { return 200 * us })
	})
	b.Run("mixed", func(b *testing.B) {
		benchOnAck(b, func(i int) time.Duration { return time.Duration(10+(i*7)%50) * us })
	})
}

func benchOnAck(b *testing.B, rtt func(int) time.Duration) {
	var conns [256]swift.Controller
	for i := range conns {
		if err := conns[i].Init(swift.DefaultParams()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	now := clock.Time(0)
	i := 0
	for b.Loop() {
		now += 100
		c := &conns[i&255]
		c.OnAck(now, rtt(i), 1)
		i++
	}
}

func BenchmarkWindowAndPacing(b *testing.B) {
	var c swift.Controller
	if err := c.Init(withCwnd(0.5)); err != nil {
		b.Fatal(err)
	}
	c.OnAck(0, 50*us, 0)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n += c.Window() + int(c.PacingGap())
	}
	_ = n
}
