package fabric

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseProfileExample(t *testing.T) {
	const s = "loss=1%,burst=0.5%/30%/50%,dup=0.1%,reorder=5%/200us,corrupt=0.01%,delay=50us,jitter=10us," +
		"rate=10gbit,queue=1000,paths=4,spread=20us,hops=3"
	p, err := ParseProfile(s)
	require.NoError(t, err)
	require.Equal(t, Profile{
		Loss:         1,
		Burst:        GilbertElliott{P: 0.5, R: 30, BadLoss: 50},
		Dup:          0.1,
		Reorder:      5,
		ReorderDelay: 200 * time.Microsecond,
		Corrupt:      0.01,
		Delay:        50 * time.Microsecond,
		Jitter:       10 * time.Microsecond,
		Rate:         10e9,
		QueuePackets: 1000,
		Paths:        4,
		Spread:       20 * time.Microsecond,
		Hops:         3,
	}, p)
	require.Equal(t, s, p.String(), "the example is already canonical")

	p, err = ParseProfile(" delay = 1.5ms , dist=normal,order=free, spray=random,rate=2.5Gbit,overhead=24,queue=64KiB,corrupt=1%/any,limit=100,burst=1%/20% ")
	require.NoError(t, err)
	require.Equal(t, Profile{
		Delay: 1500 * time.Microsecond, Dist: DistNormal, Order: OrderFree, Spray: SprayRandom,
		Rate: 2.5e9, Overhead: 24, QueueBytes: 64 << 10, Corrupt: 1, CorruptL2: true, Limit: 100,
		Burst: GilbertElliott{P: 1, R: 20, BadLoss: 100},
	}, p)
	require.Equal(t, "burst=1%/20%,corrupt=1%/any,delay=1500us,dist=normal,order=free,rate=2500mbit,overhead=24,queue=64KiB,spray=random,limit=100", p.String())

	p, err = ParseProfile("")
	require.NoError(t, err)
	require.Equal(t, Profile{}, p)
	require.Equal(t, "", p.String())
}

// TestProfileStringRoundTrips formats random valid profiles and parses
// them back.
func TestProfileStringRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pct := func() Percent {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return Percent(rng.IntN(101))
		default:
			return Percent(rng.Float64() * 100)
		}
	}
	dur := func() time.Duration {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return time.Duration(rng.IntN(1000)) * time.Microsecond
		default:
			return time.Duration(rng.Int64N(int64(time.Second)))
		}
	}
	for range 2000 {
		p := Profile{Loss: pct(), Dup: pct(), Corrupt: pct(), CorruptL2: rng.IntN(2) == 0,
			Delay: dur(), Jitter: dur(), Dist: Dist(rng.IntN(2)), Order: Order(rng.IntN(2)),
			Limit: rng.IntN(3) * 1000, Spray: Spray(rng.IntN(2)), Hops: rng.IntN(2) * rng.IntN(MaxHops+1)}
		if rng.IntN(2) == 0 {
			p.Burst = GilbertElliott{P: pct() + 0.001, R: pct() + 0.001, BadLoss: pct() + 0.1, GoodLoss: pct()}
			p.Burst.P, p.Burst.R, p.Burst.BadLoss = min(p.Burst.P, 100), min(p.Burst.R, 100), min(p.Burst.BadLoss, 100)
		}
		if p.Reorder = pct(); p.Reorder > 0 {
			p.ReorderDelay = dur() + 1
		}
		if rng.IntN(2) == 0 {
			p.Rate = 1 + rng.Uint64N(MaxRate)
			p.Overhead = rng.IntN(MaxOverhead + 1)
			if rng.IntN(2) == 0 {
				p.QueuePackets = rng.IntN(MaxQueue + 1)
			} else {
				p.QueueBytes = rng.IntN(MaxQueueB + 1)
			}
		}
		if p.Paths = rng.IntN(MaxPaths + 1); p.Paths > 1 {
			p.Spread = dur()
		}
		require.NoError(t, p.Validate(), "%+v", p)
		back, err := ParseProfile(p.String())
		require.NoError(t, err, p.String())
		require.Equal(t, p, back, p.String())
	}
}

// TestParseProfileUnits: rates and sizes are read by internal/units, the
// parser of every subcommand, so they take the same spellings.
func TestParseProfileUnits(t *testing.T) {
	for in, want := range map[string]Profile{
		"rate=10Gbit,queue=1GB":     {Rate: 10e9, QueueBytes: 1e9},
		"rate=100Mbit/s,queue=1MiB": {Rate: 100e6, QueueBytes: 1 << 20},
	} {
		p, err := ParseProfile(in)
		if err != nil || p.Rate != want.Rate || p.QueueBytes != want.QueueBytes {
			t.Errorf("ParseProfile(%q) = rate %d queue %d B, %v; want rate %d queue %d B", in, p.Rate, p.QueueBytes, err, want.Rate, want.QueueBytes)
		}
	}
}

func TestParseProfileErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"lose=1%", []string{`unknown key "lose"`, "loss=P%", "e.g. loss=1%"}},
		{"loss=1", []string{"loss=1:", "needs a percent sign", "syntax loss=P%"}},
		{"loss=101%", []string{"loss=101%", "not a percentage in 0..100%"}},
		{"loss", []string{`key "loss" has no value`, "syntax loss=P%"}},
		{"loss=1%,loss=2%", []string{`key "loss" is given twice`}},
		{"burst=1%", []string{"burst=1%:", "want 2 to 4 percentages", "syntax burst=P%/R%[/BAD%[/GOOD%]]"}},
		{"burst=1%/0%", []string{"Burst.R is 0"}},
		{"reorder=5%", []string{"reorder=5%:", "missing '/DURATION'", "syntax reorder=P%/DURATION"}},
		{"reorder=5%/0", []string{"needs a ReorderDelay"}},
		{"corrupt=1%/l2", []string{"corrupt=1%/l2", `unknown place "l2"`}},
		{"delay=5", []string{"delay=5:", "not a duration", "syntax delay=DURATION"}},
		{"jitter=-5us", []string{"jitter=-5us", "negative"}},
		{"dist=gauss", []string{"dist=gauss", "unknown distribution", "dist=uniform|normal"}},
		{"order=lifo", []string{"order=fifo|free"}},
		{"rate=10gbits", []string{"rate=10gbits", "no unit", "rate=N{bit,kbit,mbit,gbit,tbit}"}},
		{"rate=0gbit", []string{"not a positive rate"}},
		{"rate=100tbit", []string{"out of range"}},
		{"rate=1000", []string{"rate=1000", "no unit"}},
		{"rate=1mpps", []string{"rate=1mpps", "no unit"}},
		{"rate=-1gbit", []string{"rate=-1gbit", "negative"}},
		{"queue=lots", []string{"queue=lots", "neither a packet count nor a size"}},
		{"queue=1000", []string{"without Rate"}},
		{"rate=1gbit,queue=2GiB", []string{"queue=2GiB", "1B..1GiB"}},
		{"paths=65", []string{"Paths 65 is out of range"}},
		{"hops=256", []string{"Hops 256 is out of range"}},
		{"spread=10us", []string{"Spread 10µs needs more than one path"}},
		{"spray=hash", []string{"spray=rr|random"}},
		{"limit=-1", []string{"limit=-1", "not a whole number"}},
		{"limit=99999999", []string{"Limit 99999999 is out of range"}},
	} {
		_, err := ParseProfile(tc.in)
		require.ErrorIs(t, err, ErrBadProfile, tc.in)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w, tc.in)
		}
	}
	_, err := ParseProfile("bogus=1")
	require.True(t, strings.Contains(err.Error(), ProfileSyntax), "an unknown key shows the whole syntax")
}

func TestProfileValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Profile
		want string
	}{
		{Profile{Loss: -1}, "Loss -1% is out of range"},
		{Profile{Burst: GilbertElliott{P: 1, R: 10}}, "drop nothing"},
		{Profile{Burst: GilbertElliott{R: 10, BadLoss: 100}}, "Burst.P is 0"},
		{Profile{Delay: -1}, "Delay -1ns is out of range"},
		{Profile{Delay: 2 * time.Hour}, "Delay 2h0m0s is out of range"},
		{Profile{Rate: 1e9, QueuePackets: 10, QueueBytes: 10}, "both set"},
		{Profile{Rate: 1e9, Overhead: 5000}, "Overhead 5000 is out of range"},
		{Profile{Overhead: 24}, "without Rate"},
		{Profile{Dist: 7}, "Dist 7 is unknown"},
	} {
		err := tc.p.Validate()
		require.ErrorIs(t, err, ErrBadProfile)
		require.ErrorContains(t, err, tc.want)
	}
	require.NoError(t, Profile{Burst: GilbertElliott{BadLoss: 100}}.Validate(), "parsed burst=0%/... defaults are harmless")
}
