package sim

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScaleShape asserts the study's shape: share-nothing scales linearly;
// a port's line rate caps it; software hand-off costs a third of each
// shard; a shared line per packet flattens the curve at one line transfer
// per packet whatever the number of shards; a shared line per burst does
// not. The model is exact on the virtual clock, so the bounds are tight.
func TestScaleShape(t *testing.T) {
	sc := ScaleStudy(1)
	run := func(i, shards int) ScaleResult { return RunScale(sc[i], shards) }
	speedup := func(i, shards int) float64 { return run(i, shards).Mpps / run(i, 1).Mpps }

	one := run(0, 1)
	c := MeasuredCosts()
	require.InDelta(t, 1e3/(c.PacketNs+c.PortNs+c.PoolNs), one.Mpps, 0.2, "one shard runs at its per-packet cost")
	for _, s := range []int{2, 4, 8, 16} {
		require.InDelta(t, float64(s), speedup(0, s), 0.05*float64(s), "share-nothing at %d shards is linear", s)
		require.Zero(t, run(0, s).HandedOff, "steered: nothing handed off")
	}

	capped := run(1, 16)
	require.InDelta(t, capped.LinkMpps, capped.Mpps, 0.02*capped.LinkMpps, "100G: the link is the limit at 16 shards")
	require.Less(t, speedup(1, 16), 6.0)

	h := run(2, 16)
	require.Greater(t, h.HandedOff, h.Packets/2, "RSS on random ports sends most packets to another shard's queue")
	require.Less(t, speedup(2, 16), 0.8*16)
	require.Greater(t, speedup(2, 16), 0.5*16)

	lineCap := 1e3 / c.LineNs
	line16 := run(4, 16)
	require.LessOrEqual(t, line16.Mpps, lineCap*1.01, "a shared line per packet caps the rate at one transfer per packet")
	require.InDelta(t, run(4, 4).Mpps, line16.Mpps, 0.1*line16.Mpps, "and the curve is flat past the cap")
	require.Less(t, speedup(4, 16), 3.0)

	require.Greater(t, speedup(3, 16), 0.9*16, "a shared line per burst of 32 costs little")
}

func TestScaleDeterministic(t *testing.T) {
	sc := ScaleStudy(7)[2]
	require.Equal(t, RunScale(sc, 8), RunScale(sc, 8))
	var a, b bytes.Buffer
	ra, rb := WriteScaleStudy(&a, 3), WriteScaleStudy(&b, 3)
	require.Equal(t, a.String(), b.String())
	require.Equal(t, ra, rb)
	t.Log("\n" + a.String())
}
