package traffic

import (
	"time"

	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

// TestGeneratorRateSurvivesLatePolls: a loop whose iterations alternate
// 20 µs and 44 µs polls the generator every 32 µs on average, one burst's
// time at 1 Mfps; a late poll's excess must be made up by the next, so the
// generator offers its rate, not 32 frames per late poll (812 kfps).
func TestGeneratorRateSurvivesLatePolls(t *testing.T) {
	g := newNullGenerator(t, GeneratorOptions{Sizes: FixedSize(60), Rate: 1e6})
	vc := clock.NewVirtual(1)
	for i := range 31250 { // one virtual second
		g.Poll(vc.Advance([2]time.Duration{20 * time.Microsecond, 44 * time.Microsecond}[i%2]))
	}
	sent := g.Stats().Sent
	require.InEpsilon(t, 1e6, float64(sent), 0.002, "sent %d frames in 1 s at 1 Mfps", sent)
	g.Stop(vc.Now())
}
