package afpacket_test

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/afpacket"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

const benchFrameLen = 60 // the smallest Ethernet frame without FCS

// TestZeroAllocsPerBurst: a steady-state round trip (TxBurst of a burst,
// RxBurst until it is back) allocates nothing, with either ring layout.
func TestZeroAllocsPerBurst(t *testing.T) {
	for _, ring := range []afpacket.RingVersion{afpacket.RingV2, afpacket.RingV3} {
		t.Run(ring.String(), func(t *testing.T) { zeroAllocsPerBurst(t, ring) })
	}
}

func zeroAllocsPerBurst(t *testing.T, ring afpacket.RingVersion) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 1024)
	// Small blocks fill (and reach us) without waiting for the timeout.
	tx, rx := openPair(t, pool, topo, afpacket.Options{BlockSize: 4096, BlockCount: 64, Ring: ring})
	const burst = 32
	out := make([]mbuf.Handle, burst)
	in := make([]mbuf.Handle, burst)
	src := pool.NewCache()
	defer src.Close()
	roundTrip := func() {
		require.Equal(t, burst, src.AllocBulk(out))
		for i, h := range out {
			pool.SetLen(h, benchFrameLen)
			testFrame(pool.Data(h), topo.MACB, topo.MACA, uint32(i))
		}
		sent := tx.TxBurst(0, out)
		src.Free(out[sent:])
		for got, spins := 0, 0; got < sent && spins < 1<<26; spins++ {
			n := rx.RxBurst(0, in)
			src.Free(in[:n])
			got += n
		}
	}
	for range 20 {
		roundTrip()
	}
	before := rx.Stats().RxPackets
	allocs := testing.AllocsPerRun(200, roundTrip)
	require.Zero(t, allocs, "allocations per TxBurst+RxBurst round trip")
	require.Equal(t, uint64(201*burst), rx.Stats().RxPackets-before, "every burst made the round trip")
}

// generator sends minimum-size frames on port until stop is set, from its
// own goroutine and mbuf cache.
type generator struct {
	stop atomic.Bool
	wg   sync.WaitGroup
	sent atomic.Uint64
}

func startGenerator(pool *mbuf.Pool, p *afpacket.Port, dst, src net.HardwareAddr) *generator {
	g := &generator{}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		cache := pool.NewCache()
		defer cache.Close()
		hs := make([]mbuf.Handle, 64)
		for seq := uint32(0); !g.stop.Load(); {
			n := cache.AllocBurst(hs)
			for _, h := range hs[:n] {
				pool.SetLen(h, benchFrameLen)
				testFrame(pool.Data(h), dst, src, seq)
				seq++
			}
			k := p.TxBurst(0, hs[:n])
			cache.Free(hs[k:n])
			g.sent.Add(uint64(k))
		}
	}()
	return g
}

func (g *generator) halt() {
	g.stop.Store(true)
	g.wg.Wait()
}

func reportRate(b *testing.B, packets int, elapsed time.Duration) {
	b.ReportMetric(float64(packets)/elapsed.Seconds(), "pkts/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(packets), "ns/pkt")
}

// BenchmarkRxOnly receives b.N frames that a generator in the peer
// namespace sends as fast as it can over the veth pair (testpmd rxonly).
func BenchmarkRxOnly(b *testing.B) {
	topo := netnstest.TwoNS(b, netns.VethOptions{GRO: true})
	pool := newPool(b, 8192)
	for _, burst := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprint(burst), func(b *testing.B) {
			tx, rx := openPair(b, pool, topo, afpacket.Options{QdiscBypass: true})
			gen := startGenerator(pool, tx, topo.MACB, topo.MACA)
			defer gen.halt()
			cache := pool.NewCache()
			defer cache.Close()
			bufs := make([]mbuf.Handle, burst)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for got := 0; got < b.N; {
				n := rx.RxBurst(0, bufs)
				cache.Free(bufs[:n])
				got += n
			}
			elapsed := time.Since(start)
			b.StopTimer()
			reportRate(b, b.N, elapsed)
			st := rx.Stats()
			b.ReportMetric(float64(st.RxDropped)/float64(st.RxPackets+st.RxDropped), "drop-ratio")
		})
	}
}

// BenchmarkIOForward forwards b.N frames from one port to another in the
// middle namespace of gen ↔ fwd ↔ sink (testpmd io forwarding), while a
// generator floods the first link.
func BenchmarkIOForward(b *testing.B) {
	topo := netnstest.ThreeNS(b, netns.VethOptions{GRO: true})
	pool := newPool(b, 8192)
	for _, burst := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprint(burst), func(b *testing.B) {
			opts := afpacket.Options{QdiscBypass: true}
			open := func(ns *netns.NS, ifname string) *afpacket.Port {
				o := opts
				o.Interface, o.Netns = ifname, ns.Name
				p, err := afpacket.New(pool, o)
				require.NoError(b, err)
				return p
			}
			gen := open(topo.Gen, topo.GenIf)
			defer gen.Close()
			in := open(topo.Fwd, topo.FwdGenIf)
			defer in.Close()
			out := open(topo.Fwd, topo.FwdSinkIf)
			defer out.Close()
			g := startGenerator(pool, gen, topo.FwdGenMAC, topo.GenMAC)
			defer g.halt()
			cache := pool.NewCache()
			defer cache.Close()
			bufs := make([]mbuf.Handle, burst)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			forwarded := 0
			for forwarded < b.N {
				n := in.RxBurst(0, bufs)
				for _, h := range bufs[:n] {
					d := pool.Data(h)
					copy(d[0:6], topo.SinkMAC)
					copy(d[6:12], topo.FwdSinkMAC)
				}
				k := out.TxBurst(0, bufs[:n])
				cache.Free(bufs[k:n])
				forwarded += n
			}
			elapsed := time.Since(start)
			b.StopTimer()
			reportRate(b, forwarded, elapsed)
			st := out.Stats()
			b.ReportMetric(float64(st.TxDropped)/float64(forwarded), "txfull-ratio")
		})
	}
}

// TestUseCachesCyclesFramesThroughCallerCache: with UseCaches, TxBurst frees
// the mbufs it copied to the caller's cache and RxBurst allocates from it,
// so a forwarder's frames come back LIFO: the frames received are the ones
// just sent. The round trip allocates nothing.
func TestUseCachesCyclesFramesThroughCallerCache(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
	pool := newPool(t, 1024)
	tx, rx := openPair(t, pool, topo, afpacket.Options{BlockSize: 4096, BlockCount: 64})
	cache := pool.NewCache()
	defer cache.Close()
	require.NoError(t, tx.UseCaches(0, nil, cache))
	require.NoError(t, rx.UseCaches(0, cache, nil))
	require.ErrorContains(t, rx.UseCaches(1, cache, nil), "out of range")

	const burst = 32
	out := make([]mbuf.Handle, burst)
	in := make([]mbuf.Handle, burst)
	sentSet := make(map[mbuf.Handle]bool, burst)
	outside := 0
	roundTrip := func() {
		require.Equal(t, burst, cache.AllocBulk(out))
		for i, h := range out {
			pool.SetLen(h, benchFrameLen)
			testFrame(pool.Data(h), topo.MACB, topo.MACA, uint32(i))
			sentSet[h] = true
		}
		require.Equal(t, burst, tx.TxBurst(0, out))
		for got, spins := 0, 0; got < burst && spins < 1<<26; spins++ {
			n := rx.RxBurst(0, in)
			for _, h := range in[:n] {
				if !sentSet[h] {
					outside++
				}
			}
			cache.Free(in[:n])
			got += n
		}
		clear(sentSet)
	}
	for range 10 {
		roundTrip()
	}
	require.Zero(t, outside, "received frames that were not the ones just sent: the ports did not use the caller's cache")
	require.Zero(t, testing.AllocsPerRun(100, roundTrip), "allocations per round trip with UseCaches")
	require.Zero(t, outside)

	// nil restores the port's own caches.
	require.NoError(t, tx.UseCaches(0, nil, nil))
	require.NoError(t, rx.UseCaches(0, nil, nil))
	roundTrip()
	require.Equal(t, burst, outside, "with their own caches the ports receive into other frames")
}
