package fabric

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
)

// typicalProfile is the "typical" impaired link of the benchmarks.
const typicalProfile = "loss=1%,reorder=1%/100us,delay=50us,jitter=5us"

// pump is a sender and a receiver around a fabric, with every buffer
// allocated up front, for the allocation test and the benchmarks.
type pump struct {
	pool     *mbuf.Pool
	a, b     port.Port
	f        *Fabric
	tx, rx   []mbuf.Handle
	template []byte
	now      clock.Time
	seq      uint32
	received int
}

func newPump(tb testing.TB, pool *mbuf.Pool, burst int, opts Options) *pump {
	tb.Helper()
	opts.Burst = max(burst, 32)
	a, b, f, err := Link(pool, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		require.NoError(tb, f.Close())
		require.NoError(tb, a.Close())
		require.NoError(tb, b.Close())
	})
	return &pump{pool: pool, a: a, b: b, f: f, tx: make([]mbuf.Handle, burst), rx: make([]mbuf.Handle, 256),
		template: expectedFrame(0, 1, 64)}
}

// step sends one burst, advances the clock by gap, polls the fabric until
// it is idle and frees what arrived.
func (p *pump) step(gap clock.Time) {
	n := p.pool.AllocBurst(p.tx)
	for _, h := range p.tx[:n] {
		copy(p.pool.Append(h, len(p.template)), p.template)
		p.seq++
	}
	sent := p.a.TxBurst(0, p.tx[:n])
	p.pool.Free(p.tx[sent:n])
	p.now += gap
	for p.f.Poll(p.now) > 0 {
		p.drain()
	}
	p.drain()
}

func (p *pump) drain() {
	for {
		n := p.b.RxBurst(0, p.rx)
		if n == 0 {
			return
		}
		p.received += n
		p.pool.Free(p.rx[:n])
	}
}

func TestPollDoesNotAllocate(t *testing.T) {
	profiles := []string{
		"",
		typicalProfile,
		"loss=1%,burst=1%/30%,dup=2%,reorder=5%/200us,corrupt=1%,delay=50us,jitter=10us,dist=normal,order=free," +
			"rate=1gbit,queue=64KiB,paths=4,spread=20us,spray=random",
		"dup=5%,rate=10gbit,overhead=24,queue=100,paths=8,spread=1us",
		"rate=4gbit,paths=4,path-rate=1gbit,path-queue=64,path-loss=1%,path-delay=0/2us/5us/10us,spray=adaptive",
		"paths=4,path-rate=1gbit/2gbit/1gbit/500mbit,spray=entropy",
	}
	for _, s := range profiles {
		t.Run(s, func(t *testing.T) {
			p, err := ParseProfile(s)
			require.NoError(t, err)
			pool := newPool(t, 4096)
			classify := func(frame []byte) (uint32, bool) { return FlowHash(frame), frameSeq(frame)%2 == 0 }
			pp := newPump(t, pool, 32, Options{AtoB: p, BtoA: p, Seed: 1, Classify: classify})
			for range 2000 { // reach steady state: the delay line is as full as it gets
				pp.step(5 * us)
			}
			allocs := testing.AllocsPerRun(1000, func() { pp.step(5 * us) })
			if allocs != 0 {
				t.Fatalf("Poll allocates: %v allocations per burst", allocs)
			}
			require.Positive(t, pp.received)
		})
	}
}

// TestRealClockLoop runs the fabric in an lcore loop on the real clock,
// with a sender and a receiver on other goroutines and Stats read
// concurrently, as the fabric subcommand does between real ports.
func TestRealClockLoop(t *testing.T) {
	const n = 20_000
	pool := newPool(t, 4096)
	p, err := ParseProfile("loss=1%,delay=20us,jitter=5us,dup=1%")
	require.NoError(t, err)
	a, b, f, err := Link(pool, Options{AtoB: p, Seed: 1})
	require.NoError(t, err)
	defer func() {
		require.NoError(t, f.Close())
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	}()
	loop, err := lcore.New(lcore.Options{CPU: -1, Clock: clock.NewReal(), Idle: lcore.IdlePolicy{Mode: lcore.IdleYield}, Stages: []lcore.Stage{f}})
	require.NoError(t, err)
	require.NoError(t, loop.Start())

	var wg sync.WaitGroup
	var sent atomic.Int64
	wg.Go(func() {
		hs := make([]mbuf.Handle, 16)
		for sent.Load() < n {
			k := pool.AllocBurst(hs[:min(len(hs), n-int(sent.Load()))])
			for i, h := range hs[:k] {
				writeFrame(pool.Append(h, 64), uint32(int(sent.Load())+i), 1)
			}
			acc := a.TxBurst(0, hs[:k])
			pool.Free(hs[acc:k])
			sent.Add(int64(acc))
			if acc == 0 {
				runtime.Gosched()
			}
		}
	})
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				st := f.Stats().AtoB
				if st.Sent > st.Received+st.Duplicated {
					t.Errorf("stats inconsistent: %+v", st)
				}
				runtime.Gosched()
			}
		}
	})
	// Everything sent is either lost or arrives; wait for the fabric to
	// account for all n, then for its output to be drained.
	rx := make([]mbuf.Handle, 64)
	received := 0
	for {
		k := b.RxBurst(0, rx)
		received += k
		pool.Free(rx[:k])
		st := f.Stats().AtoB
		if st.Received == n && st.Held == 0 && uint64(received) == st.Sent {
			break
		}
		if k == 0 {
			runtime.Gosched()
		}
	}
	close(stop)
	loop.Stop()
	require.NoError(t, loop.Wait())
	wg.Wait()
	st := f.Stats().AtoB
	requireBalanced(t, st)
	require.EqualValues(t, n, st.Received)
	require.InDelta(t, 0.01, float64(st.LossRandom)/n, 0.005)
	require.Zero(t, st.Flushed)
}

// BenchmarkFabric measures frames per second through the A→B direction,
// per burst size, with no impairment ("none") and with a typical impaired
// link ("typical": typicalProfile). The figures include the sender's alloc
// and the receiver's free, as a simulation pays them.
// Sends are spaced so that 32 frames take 1µs of virtual time: at that
// rate a 50µs delay keeps about 1600 frames in flight.
func BenchmarkFabric(b *testing.B) {
	for _, bench := range []struct{ name, profile string }{{"none", ""}, {"typical", typicalProfile}} {
		name, profile := bench.name, bench.profile
		for _, burst := range []int{1, 8, 32, 64} {
			b.Run(fmt.Sprintf("%s/burst=%d", name, burst), func(b *testing.B) {
				p, err := ParseProfile(profile)
				require.NoError(b, err)
				pool := newPool(b, 8192)
				pp := newPump(b, pool, burst, Options{AtoB: p, Seed: 1})
				gap := clock.Time(burst) * clock.Time(time.Microsecond) / 32
				for range 4096 / burst {
					pp.step(gap)
				}
				b.ReportAllocs()
				start := pp.seq
				b.ResetTimer()
				for range b.N {
					pp.step(gap)
				}
				b.StopTimer()
				frames := float64(pp.seq - start)
				b.ReportMetric(frames/b.Elapsed().Seconds(), "pkts/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/frames, "ns/pkt")
			})
		}
	}
}
