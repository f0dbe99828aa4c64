package null_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/null"
	"github.com/peregrine-net/peregrine/pmd/pmdtest"
)

func newPool(t testing.TB, frames int) *mbuf.Pool {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: frames, Debug: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pool.Close()) })
	return pool
}

// TestConformance runs the single-port subset of the suite: a null port
// does not loop back, so the round-trip subtests do not apply.
func TestConformance(t *testing.T) {
	pool := newPool(t, 4096)
	env := &pmd.Env{Pool: pool}
	pmdtest.RunBasic(t, pmdtest.BasicHarness{
		Pool: pool,
		Open: func(t *testing.T) port.Port {
			p, err := pmd.Open(env, "null:conf?queues=2&size=100&fill=1")
			require.NoError(t, err)
			return p
		},
	})
}

func TestRx(t *testing.T) {
	pool := newPool(t, 1024)
	p, err := null.New(pool, null.Options{Size: 128, Fill: true, Queues: 2})
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 32)
	for q := range 2 {
		require.Equal(t, 32, p.RxBurst(q, bufs))
		for _, h := range bufs {
			data := pool.Data(h)
			require.Len(t, data, 128)
			require.Equal(t, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, data[:6])
			require.Equal(t, []byte(p.Info().MAC), data[6:12])
			require.Equal(t, []byte{0x88, 0xb5}, data[12:14])
		}
		require.Equal(t, 32, p.TxBurst(q, bufs))
	}
	st := p.Stats()
	require.Equal(t, uint64(64), st.RxPackets)
	require.Equal(t, uint64(64*128), st.RxBytes)
	require.Equal(t, uint64(64), st.TxPackets)
	require.Equal(t, uint64(64*128), st.TxBytes)
	require.Equal(t, uint64(32), st.Queues[1].RxPackets)
	require.NoError(t, p.Close())
	require.NoError(t, pool.CheckLeaks())
}

func TestRxNoBuf(t *testing.T) {
	pool := newPool(t, 128)
	p, err := null.New(pool, null.Options{})
	require.NoError(t, err)
	var held []mbuf.Handle
	bufs := make([]mbuf.Handle, 32)
	for range 10 {
		n := p.RxBurst(0, bufs)
		held = append(held, bufs[:n]...)
	}
	require.Len(t, held, 128, "every frame handed out")
	require.Positive(t, p.Stats().RxNoBuf)
	require.Zero(t, p.RxBurst(0, bufs))
	require.Equal(t, len(held), p.TxBurst(0, held))
	require.NoError(t, p.Close())
	require.NoError(t, pool.CheckLeaks())
}

func TestSharedCache(t *testing.T) {
	pool := newPool(t, 1024)
	cache := pool.NewCache()
	a, err := null.New(pool, null.Options{Cache: cache, Queues: 2})
	require.NoError(t, err)
	b, err := null.New(pool, null.Options{Cache: cache})
	require.NoError(t, err)
	bufs := make([]mbuf.Handle, 32)
	for range 100 {
		n := a.RxBurst(1, bufs)
		require.Equal(t, 32, n)
		require.Equal(t, n, b.TxBurst(0, bufs[:n]))
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.Positive(t, cache.Len(), "the ports do not flush a cache they do not own")
	cache.Close()
	require.NoError(t, pool.CheckLeaks())
}

func TestOptions(t *testing.T) {
	pool := newPool(t, 64)
	env := &pmd.Env{Pool: pool}
	for _, tc := range []struct{ spec, want string }{
		{"null:?size=5000", "size=5000 is out of range (use 1..1792)"},
		{"null:?fill=maybe", `fill="maybe" is not a boolean`},
		{"null:?burst=32", `unknown parameter "burst" in "null:?burst=32" (valid parameters: queues, size, fill)`},
	} {
		_, err := pmd.Open(env, tc.spec)
		require.ErrorIs(t, err, pmd.ErrBadParam, tc.spec)
		require.ErrorContains(t, err, tc.want, tc.spec)
	}
	_, err := null.New(pool, null.Options{Size: 4000})
	require.ErrorContains(t, err, "Options.Size 4000 is out of range")
	_, err = null.New(pool, null.Options{Queues: 1000})
	require.ErrorContains(t, err, "Options.Queues 1000 is out of range")
	_, err = null.New(nil, null.Options{})
	require.ErrorContains(t, err, "pool is nil")
	p, err := pmd.Open(env, "null:")
	require.NoError(t, err)
	info := p.Info()
	require.Equal(t, "null:", info.Name)
	require.Equal(t, "null", info.Driver)
	require.NoError(t, p.Close())
}

func TestZeroAllocs(t *testing.T) {
	pool := newPool(t, 1024)
	for _, fill := range []bool{false, true} {
		p, err := null.New(pool, null.Options{Fill: fill})
		require.NoError(t, err)
		for _, burst := range []int{1, 32, 64} {
			bufs := make([]mbuf.Handle, burst)
			allocs := testing.AllocsPerRun(100, func() {
				n := p.RxBurst(0, bufs)
				p.TxBurst(0, bufs[:n])
			})
			require.Zero(t, allocs, "fill=%v burst %d", fill, burst)
		}
		require.NoError(t, p.Close())
	}
	require.NoError(t, pool.CheckLeaks())
}

// BenchmarkIOForward is testpmd's io forwarding between two null ports:
// RxBurst on A, TxBurst on B, one goroutine. cache=lcore shares one
// mbuf.Cache between both ports, as a DPDK lcore's mempool cache is;
// cache=port gives each port queue its own RX and TX caches (the default).
func BenchmarkIOForward(b *testing.B) {
	for _, shared := range []bool{false, true} {
		for _, burst := range []int{1, 32, 64} {
			name := fmt.Sprintf("cache=port/burst=%d", burst)
			if shared {
				name = fmt.Sprintf("cache=lcore/burst=%d", burst)
			}
			b.Run(name, func(b *testing.B) { benchIOForward(b, burst, shared) })
		}
	}
}

func benchIOForward(b *testing.B, burst int, sharedCache bool) {
	pool, err := mbuf.New(mbuf.Options{Name: "bench", Frames: 4096})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var cache *mbuf.Cache
	if sharedCache {
		cache = pool.NewCache()
		defer cache.Close()
	}
	rx, _ := null.New(pool, null.Options{Name: "null:a", Cache: cache})
	tx, _ := null.New(pool, null.Options{Name: "null:b", Cache: cache})
	defer rx.Close()
	defer tx.Close()
	bufs := make([]mbuf.Handle, burst)
	b.ReportAllocs()
	var pkts float64
	for b.Loop() {
		n := rx.RxBurst(0, bufs)
		tx.TxBurst(0, bufs[:n])
		pkts += float64(n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
	b.ReportMetric(pkts/b.Elapsed().Seconds(), "pkts/s")
}
