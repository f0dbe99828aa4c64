package mem_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/mem"
	"github.com/peregrine-net/peregrine/pmd/pmdtest"
)

func newPool(t testing.TB, frames int) *mbuf.Pool {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: frames, Debug: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pool.Close()) })
	return pool
}

func TestConformance(t *testing.T) {
	pool := newPool(t, 8192)
	pmdtest.Run(t, pmdtest.Harness{
		Pool: pool,
		Open: func(t *testing.T) (port.Port, port.Port) {
			a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "conf", Queues: 3, Size: 1024})
			require.NoError(t, err)
			return a, b
		},
		MaxFrame: pool.FrameSize() - pool.Headroom(),
	})
}

// TestConformanceRegistry runs the suite on ends opened by spec, with the
// direction reversed (end 1 transmits) and small rings so PartialTx bites
// early.
func TestConformanceRegistry(t *testing.T) {
	pool := newPool(t, 4096)
	env := &pmd.Env{Pool: pool}
	pmdtest.Run(t, pmdtest.Harness{
		Pool: pool,
		Open: func(t *testing.T) (port.Port, port.Port) {
			b, err := pmd.Open(env, "mem:reg/1?queues=2&size=64")
			require.NoError(t, err)
			a, err := pmd.Open(env, "mem:reg/0")
			require.NoError(t, err)
			return b, a
		},
		MaxFrame: pool.FrameSize() - pool.Headroom(),
	})
}

func TestNewPairOptions(t *testing.T) {
	pool := newPool(t, 64)
	for _, tc := range []struct {
		opts mem.PairOptions
		want string
	}{
		{mem.PairOptions{Size: 1000}, "Size 1000 is not a power of two (use 1024)"},
		{mem.PairOptions{Size: 1}, "Size 1 is out of range"},
		{mem.PairOptions{Queues: -1}, "Queues -1 is out of range"},
		{mem.PairOptions{Queues: mem.MaxQueues + 1}, "Queues 257 is out of range"},
		{mem.PairOptions{MTU: 10}, "MTU 10 is out of range"},
	} {
		_, _, err := mem.NewPair(pool, tc.opts)
		require.ErrorContains(t, err, tc.want)
	}
	_, _, err := mem.NewPair(nil, mem.PairOptions{})
	require.ErrorContains(t, err, "pool is nil")

	a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "ab"})
	require.NoError(t, err)
	defer a.Close()
	defer b.Close()
	ia, ib := a.Info(), b.Info()
	require.Equal(t, "mem:ab/0", ia.Name)
	require.Equal(t, "mem:ab/1", ib.Name)
	require.Equal(t, mem.DefaultMTU, ia.MTU)
	require.Equal(t, 1, ia.Queues)
	require.True(t, ia.Caps&port.CapZeroCopy != 0)
	require.NotEqual(t, ia.MAC, ib.MAC)
	require.Equal(t, byte(0x02), ia.MAC[0]&0x03, "locally administered unicast")
	a2, b2, err := mem.NewPair(pool, mem.PairOptions{Name: "ab"})
	require.NoError(t, err)
	require.Equal(t, ia.MAC, a2.Info().MAC, "MAC derives from the pair name and end only")
	require.NoError(t, a2.Close())
	require.NoError(t, b2.Close())
	require.Same(t, b, a.Peer())
}

// TestNoCopy checks the defining property: the handle sent is the handle
// received, the bytes never move.
func TestNoCopy(t *testing.T) {
	pool := newPool(t, 64)
	a, b, err := mem.NewPair(pool, mem.PairOptions{})
	require.NoError(t, err)
	defer a.Close()
	defer b.Close()
	hs := make([]mbuf.Handle, 8)
	require.Equal(t, 8, pool.AllocBulk(hs))
	sent := append([]mbuf.Handle(nil), hs...)
	require.Equal(t, 8, a.TxBurst(0, hs))
	got := make([]mbuf.Handle, 16)
	require.Equal(t, 8, b.RxBurst(0, got))
	require.Equal(t, sent, got[:8])
	pool.Free(got[:8])
}

func TestPeerClosed(t *testing.T) {
	pool := newPool(t, 256)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Size: 64})
	require.NoError(t, err)
	hs := make([]mbuf.Handle, 32)
	require.Equal(t, 32, pool.AllocBulk(hs))
	for _, h := range hs {
		pool.SetLen(h, 100)
	}
	require.Equal(t, 32, a.TxBurst(0, hs), "queued towards b")
	require.NoError(t, b.Close())
	require.Zero(t, pool.InUse(), "b's Close freed what waited in its ring")

	require.Equal(t, 8, pool.AllocBulk(hs[:8]))
	require.Zero(t, a.TxBurst(0, hs[:8]), "peer closed")
	st := a.Stats()
	require.Equal(t, uint64(8), st.TxDropped)
	require.Equal(t, uint64(32), st.TxPackets)
	require.Equal(t, uint64(3200), st.TxBytes)
	pool.Free(hs[:8]) // refused frames are still ours
	require.NoError(t, a.Close())
	require.NoError(t, pool.CheckLeaks())
}

// TestCloseWhilePeerSends closes one end while the other keeps sending:
// whatever slips into the closed end's ring after its drain is freed when
// the second end closes.
func TestCloseWhilePeerSends(t *testing.T) {
	pool := newPool(t, 1024)
	for range 20 {
		a, b, err := mem.NewPair(pool, mem.PairOptions{Size: 256})
		require.NoError(t, err)
		started := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			hs := make([]mbuf.Handle, 16)
			for i := range 2000 {
				if i == 10 {
					close(started)
				}
				if pool.AllocBulk(hs) != len(hs) {
					continue
				}
				n := a.TxBurst(0, hs)
				pool.Free(hs[n:])
			}
		}()
		<-started
		require.NoError(t, b.Close())
		<-done
		require.NoError(t, a.Close())
		require.NoError(t, pool.CheckLeaks())
	}
}

func TestRegistry(t *testing.T) {
	pool := newPool(t, 256)
	env := &pmd.Env{Pool: pool}

	a, err := pmd.Open(env, "mem:x/0?queues=2")
	require.NoError(t, err)
	require.Equal(t, "mem:x/0?queues=2", a.Info().Name)
	require.Equal(t, 2, a.Info().Queues)

	_, err = pmd.Open(env, "mem:x/0")
	require.ErrorIs(t, err, mem.ErrEndInUse)

	_, err = pmd.Open(env, "mem:x/1?queues=4")
	require.ErrorIs(t, err, pmd.ErrBadParam)
	require.ErrorContains(t, err, "queues=2")

	b, err := pmd.Open(env, "mem:x/1?queues=2&size=1024")
	require.NoError(t, err)
	require.Equal(t, 2, b.Info().Queues, "inherits the pair's queues")

	// Another Env has its own pairs.
	other, err := pmd.Open(&pmd.Env{Pool: pool}, "mem:x/0")
	require.NoError(t, err)
	require.NoError(t, other.Close())

	require.NoError(t, a.Close())
	_, err = pmd.Open(env, "mem:x/0")
	require.ErrorIs(t, err, mem.ErrEndInUse, "the pair lives until both ends closed")
	require.NoError(t, b.Close())

	a, err = pmd.Open(env, "mem:x/0")
	require.NoError(t, err, "name reusable once both ends closed")
	require.Equal(t, 1, a.Info().Queues, "a fresh pair")
	require.NoError(t, a.Close())
	a, err = pmd.Open(env, "mem:x/0?queues=3")
	require.NoError(t, err, "closing the only opened end frees the name")
	require.NoError(t, a.Close())

	for _, tc := range []struct{ spec, want string }{
		{"mem:x/0?qeues=2", `unknown parameter "qeues" in "mem:x/0?qeues=2" (valid parameters: queues, size, mtu, steer)`},
		{"mem:x/2", "not PAIR/END with END 0 or 1"},
		{"mem:x", "not PAIR/END"},
		{"mem:/0", "not PAIR/END"},
		{"mem:x/0?size=1000", "Size 1000 is not a power of two (use 1024)"},
		{"mem:x/0?size=abc", `size="abc" is not an integer`},
		{"mem:x/0?queues=0", "queues=0 is out of range (use 1..256)"},
	} {
		_, err := pmd.Open(env, tc.spec)
		require.ErrorContains(t, err, tc.want, tc.spec)
	}
	_, err = pmd.Open(&pmd.Env{}, "mem:y/0")
	require.ErrorIs(t, err, pmd.ErrNoPool)
	require.NoError(t, pool.CheckLeaks())
}

func TestZeroAllocs(t *testing.T) {
	pool := newPool(t, 256)
	a, b, err := mem.NewPair(pool, mem.PairOptions{})
	require.NoError(t, err)
	defer a.Close()
	defer b.Close()
	for _, burst := range []int{1, 32, 64} {
		hs := make([]mbuf.Handle, burst)
		require.Equal(t, burst, pool.AllocBulk(hs))
		allocs := testing.AllocsPerRun(100, func() {
			if a.TxBurst(0, hs) != burst || b.RxBurst(0, hs) != burst {
				panic("mem: burst lost")
			}
		})
		require.Zero(t, allocs, "burst %d", burst)
		pool.Free(hs)
	}
}

// TestStatsRace reads Stats while both queues run; -race checks the
// counters are published safely.
func TestStatsRace(t *testing.T) {
	pool := newPool(t, 1024)
	a, b, err := mem.NewPair(pool, mem.PairOptions{Size: 256})
	require.NoError(t, err)
	defer a.Close()
	defer b.Close()
	const total = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs := make([]mbuf.Handle, 32)
		for sent := 0; sent < total; {
			if pool.AllocBulk(hs) != len(hs) {
				continue
			}
			n := 0
			for n < len(hs) {
				n += a.TxBurst(0, hs[n:])
			}
			sent += len(hs)
		}
	}()
	bufs := make([]mbuf.Handle, 32)
	got := 0
	for got < total {
		n := b.RxBurst(0, bufs)
		pool.Free(bufs[:n])
		got += n
		_ = a.Stats()
	}
	<-done
	require.Equal(t, uint64(total), a.Stats().TxPackets)
	require.Equal(t, uint64(total), b.Stats().RxPackets)
}

// BenchmarkPair moves bursts through a pair; /bell with a ring on the
// receiving queue (SetRxBell), as a Doorbell loop's, here a no-op: what a
// burst pays for waking a sleeping consumer while it is awake.
func BenchmarkPair(b *testing.B) {
	for _, bell := range []bool{false, true} {
		for _, burst := range []int{1, 32, 64} {
			name := fmt.Sprintf("burst=%d", burst)
			if bell {
				name += "/bell"
			}
			b.Run(name, func(b *testing.B) { benchPair(b, burst, bell) })
		}
	}
}

func benchPair(b *testing.B, burst int, bell bool) {
	pool := newPool(b, 1024)
	tx, rx, err := mem.NewPair(pool, mem.PairOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Close()
	defer rx.Close()
	if bell {
		var asleep atomic.Bool // as lcore.Loop.Ring reads its loop's
		rx.SetRxBell(0, func() { _ = asleep.Load() })
	}
	hs := make([]mbuf.Handle, burst)
	if pool.AllocBulk(hs) != burst {
		b.Fatal(errors.New("pool too small"))
	}
	defer pool.Free(hs)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tx.TxBurst(0, hs)
		rx.RxBurst(0, hs)
	}
	b.StopTimer()
	pkts := float64(b.N) * float64(burst)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
	b.ReportMetric(pkts/b.Elapsed().Seconds(), "pkts/s")
}

// TxBurst rings the loop that consumes the receiving queue, once per burst
// that enqueued frames for it, and stops once the ring is taken back; a
// burst the ring refuses whole rings nothing.
func TestTxBurstRingsTheReceivingQueue(t *testing.T) {
	for _, steer := range []mem.Steer{mem.SteerQueue, mem.SteerHash} {
		pool := newPool(t, 256)
		a, b, err := mem.NewPair(pool, mem.PairOptions{Name: "bell", Queues: 2, Size: 4, Steer: steer})
		require.NoError(t, err)
		var rung [2]int
		for q := range 2 {
			b.SetRxBell(q, func() { rung[q]++ })
		}
		send := func(n int) int {
			hs := make([]mbuf.Handle, n)
			require.Equal(t, n, pool.AllocBulk(hs))
			for _, h := range hs {
				pool.SetLen(h, 64)
			}
			sent := a.TxBurst(1, hs)
			pool.Free(hs[sent:]) // refused frames are still ours
			return sent
		}
		drain := func() {
			got := make([]mbuf.Handle, 16)
			for q := range 2 {
				for n := b.RxBurst(q, got); n > 0; n = b.RxBurst(q, got) {
					pool.Free(got[:n])
				}
			}
		}
		require.Equal(t, 2, send(2))
		if steer == mem.SteerQueue {
			require.Equal(t, [2]int{0, 1}, rung, "queue 1's consumer rung once for the burst")
		} else {
			require.Positive(t, rung[0]+rung[1])
		}
		before := rung
		for send(4) > 0 { // until the rings are full
			before = rung
		}
		require.Equal(t, before, rung, "a burst that enqueued nothing rang")
		b.SetRxBell(0, nil)
		b.SetRxBell(1, nil)
		drain()
		require.Positive(t, send(1))
		require.Equal(t, before, rung, "rung after the ring was taken back")
		drain()
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		require.Zero(t, pool.InUse())
	}
}
