package traffic

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/null"
)

// BenchmarkGeneratorPoll measures the generator's own cost per frame: a
// null port frees what it is given into the generator's cache, so only
// allocation, header build, stamp and the TxBurst call are measured.
func BenchmarkGeneratorPoll(b *testing.B) {
	for _, size := range []int{64, 1518} {
		b.Run(FixedSize(size).String(), func(b *testing.B) {
			pool, err := mbuf.New(mbuf.Options{Name: "gen-bench", Frames: 4096})
			require.NoError(b, err)
			defer pool.Close()
			cache := pool.NewCache()
			defer cache.Close()
			p, err := null.New(pool, null.Options{Cache: cache})
			require.NoError(b, err)
			defer p.Close()
			g, err := NewGenerator(GeneratorOptions{Port: p, Pool: pool, Sizes: FixedSize(size), Cache: cache})
			require.NoError(b, err)
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for sent < b.N {
				sent += g.Poll(1)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(sent), "ns/frame")
			g.Stop(0)
		})
	}
}

// TestGeneratorPollAllocatesNothing: a steady-state burst allocates nothing.
func TestGeneratorPollAllocatesNothing(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "gen-allocs", Frames: 4096})
	require.NoError(t, err)
	defer pool.Close()
	cache := pool.NewCache()
	defer cache.Close()
	p, err := null.New(pool, null.Options{Cache: cache})
	require.NoError(t, err)
	defer p.Close()
	g, err := NewGenerator(GeneratorOptions{Port: p, Pool: pool, Sizes: FixedSize(64), Flows: 4, Cache: cache})
	require.NoError(t, err)
	require.Equal(t, 32, g.Poll(1))
	require.Zero(t, testing.AllocsPerRun(100, func() { g.Poll(2) }))
	g.Stop(3)
}
