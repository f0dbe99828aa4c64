package traffic

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/null"
)

// newNullGenerator is a generator on a null port that frees what it is
// given into the generator's cache, so only the generator's own work
// (allocation, header build, stamp, the TxBurst call) remains. opts gets
// Port, Pool and Cache; everything is closed when the test ends.
func newNullGenerator(tb testing.TB, opts GeneratorOptions) *Generator {
	tb.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: tb.Name(), Frames: 4096})
	require.NoError(tb, err)
	tb.Cleanup(func() { pool.Close() })
	cache := pool.NewCache()
	tb.Cleanup(cache.Close)
	p, err := null.New(pool, null.Options{Cache: cache})
	require.NoError(tb, err)
	tb.Cleanup(func() { p.Close() })
	opts.Port, opts.Pool, opts.Cache = p, pool, cache
	g, err := NewGenerator(opts)
	require.NoError(tb, err)
	return g
}

// BenchmarkGeneratorPoll measures the generator's own cost per frame.
func BenchmarkGeneratorPoll(b *testing.B) {
	for _, size := range []int{64, 1518} {
		b.Run(FixedSize(size).String(), func(b *testing.B) {
			g := newNullGenerator(b, GeneratorOptions{Sizes: FixedSize(size)})
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
	g := newNullGenerator(t, GeneratorOptions{Sizes: FixedSize(64), Flows: 4})
	require.Equal(t, 32, g.Poll(1))
	require.Zero(t, testing.AllocsPerRun(100, func() { g.Poll(2) }))
	g.Stop(3)
}
