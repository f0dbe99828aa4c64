package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/fabric"
)

// BenchmarkSim: transport packets simulated per second on one core, by
// the endpoints' burst size.
func BenchmarkSim(b *testing.B) {
	for _, burst := range []int{8, 32, 64} {
		b.Run("burst="+itoa(burst), func(b *testing.B) {
			profile := fabric.Profile{Delay: 5 * time.Microsecond, Loss: 0.1}
			ep := rt.Options{MaxConns: 4, AckEvery: 8, Burst: burst}
			s, err := New(Config{Seed: 1, AtoB: profile, BtoA: profile, A: ep, B: ep, Frames: 8192, Start: 1_000_000})
			require.NoError(b, err)
			defer s.Close()
			w := NewWorkload(s, WorkloadConfig{Conns: 1, Packets: max(b.N/2, 1), MaxPayload: 64, PerPoll: 64, Seed: 1})
			require.NoError(b, w.Open())
			b.ReportAllocs()
			b.ResetTimer()
			require.NoError(b, s.Run(func() bool { return w.Err() != nil || w.Done() }, time.Hour))
			b.StopTimer()
			require.NoError(b, w.Verify())
			frames := s.A.Stats().TxFrames + s.B.Stats().TxFrames
			b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "pkts/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/pkt")
		})
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
