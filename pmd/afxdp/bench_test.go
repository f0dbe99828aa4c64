package afxdp

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/bench/anchor"
	"github.com/peregrine-net/peregrine/bench/kgen"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

var (
	benchSizes  = []int{64, 1518}
	benchBursts = []int{1, 8, 32, 64}
)

// udpFrame returns a size-byte Ethernet/IPv4/UDP frame from src to dst.
func udpFrame(t testing.TB, dst, src net.HardwareAddr, size int) []byte {
	t.Helper()
	f, err := kgen.UDPFrame(kgen.FrameOptions{Size: size, Dst: dst, Src: src})
	require.NoError(t, err)
	return f
}

// startGenerator floods ifname in ns with frame from bench/kgen's in-kernel
// generator, pinned to CPU 0 (the poll loop under test takes CPU 1, as
// testpmd's forwarding lcore does); it can outpace the receiver under test.
func startGenerator(t testing.TB, ns *netns.NS, ifname string, frame []byte) *kgen.Gen {
	t.Helper()
	gen, err := kgen.Start(ns, ifname, frame, kgen.Options{CPU: 0})
	require.NoError(t, err, "starting the generator")
	return gen
}

func stopGenerator(t testing.TB, gen *kgen.Gen) {
	t.Helper()
	_, err := gen.Stop()
	require.NoError(t, err)
}

// pinToCPU1 locks the calling goroutine to its thread and pins that thread
// to CPU 1, like testpmd's forwarding lcore. The thread is never unlocked:
// it ends with the benchmark goroutine instead of returning to the pool
// with a changed mask.
func pinToCPU1(b *testing.B) {
	runtime.LockOSThread()
	var cpu1 unix.CPUSet
	cpu1.Set(1)
	require.NoError(b, unix.SchedSetaffinity(0, &cpu1))
}

// BenchmarkRxOnly receives and frees frames on an afxdp port on B while a
// kernel generator floods A → B; pkts/s is what the port delivered,
// drops/s what the kernel dropped because the port did not keep up.
func BenchmarkRxOnly(b *testing.B) {
	tp := topo(b, 1)
	pool := newPoolWith(b, mbuf.Options{Name: b.Name(), Frames: 16384}) // no Debug: its per-frame checks would be measured
	rx := openPort(b, pool, Options{Interface: tp.IfB, Namespace: tp.B})
	cache := pool.NewCache()
	defer cache.Close()
	// The fill ring is stocked from the receiving goroutine's cache, where
	// it frees what it received: the kernel copies into CPU-cache-hot frames.
	require.NoError(b, rx.UseCaches(0, cache, nil))
	bufs := make([]mbuf.Handle, 64)
	for _, size := range benchSizes {
		frame := udpFrame(b, tp.MACB, tp.MACA, size)
		gen := startGenerator(b, tp.A, tp.IfA, frame)
		for _, burst := range benchBursts {
			b.Run(fmt.Sprintf("%dB/burst=%d", size, burst), func(b *testing.B) {
				pinToCPU1(b)
				b.ReportAllocs()
				before := rx.Stats()
				b.ResetTimer()
				start := time.Now()
				got := 0
				for got < b.N {
					if n := rx.RxBurst(0, bufs[:burst]); n > 0 {
						cache.Free(bufs[:n])
						got += n
					}
				}
				elapsed := time.Since(start).Seconds()
				b.StopTimer()
				after := rx.Stats()
				b.ReportMetric(float64(got)/elapsed, "pkts/s")
				b.ReportMetric(float64(after.RxDropped-before.RxDropped)/elapsed, "drops/s")
				b.ReportMetric(float64(after.RxNoBuf-before.RxNoBuf)/elapsed, "fill-empty/s")
			})
		}
		stopGenerator(b, gen)
		for range 1 << 12 { // drain before the next size
			cache.Free(bufs[:rx.RxBurst(0, bufs)])
		}
	}
}

// BenchmarkTxOnly allocates, stamps and sends frames on an afxdp port on A;
// B drops them in a native XDP program, so the receiver costs little.
func BenchmarkTxOnly(b *testing.B) {
	tp := topo(b, 1)
	pool := newPoolWith(b, mbuf.Options{Name: b.Name(), Frames: 16384}) // no Debug: its per-frame checks would be measured
	tx := openPort(b, pool, Options{Interface: tp.IfA, Namespace: tp.A})
	attachDrop(b, tp.B, tp.IfB)
	cache := pool.NewCache()
	defer cache.Close()
	// Completed frames go back to the sending goroutine's cache, LIFO, so
	// the next allocations reuse frames still in the CPU cache.
	require.NoError(b, tx.UseCaches(0, nil, cache))
	hs := make([]mbuf.Handle, 64)
	for _, size := range benchSizes {
		frame := udpFrame(b, tp.MACB, tp.MACA, size)
		header := frame[:42]
		for _, burst := range benchBursts {
			b.Run(fmt.Sprintf("%dB/burst=%d", size, burst), func(b *testing.B) {
				pinToCPU1(b)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				sent := 0
				for sent < b.N {
					n := cache.AllocBulk(hs[:burst])
					for _, h := range hs[:n] {
						pool.SetLen(h, len(frame))
						copy(pool.Data(h), header) // like testpmd txonly: headers per packet
					}
					k := tx.TxBurst(0, hs[:n])
					cache.Free(hs[k:n])
					sent += k
				}
				b.ReportMetric(float64(sent)/time.Since(start).Seconds(), "pkts/s")
			})
		}
	}
}

// BenchmarkTestpmdAnchor measures dpdk-testpmd's AF_XDP PMD on the same
// topology, generator and sink as BenchmarkRxOnly and BenchmarkTxOnly, so
// the two can be compared within one run. It takes ~20 s, so it runs only
// with PEREGRINE_TESTPMD=1 (and dpdk-testpmd installed:
// hack/install-deps.sh). bench/vs-testpmd.sh makes the full comparison.
func BenchmarkTestpmdAnchor(b *testing.B) {
	if os.Getenv("PEREGRINE_TESTPMD") != "1" {
		b.Skip("set PEREGRINE_TESTPMD=1 to run dpdk-testpmd for comparison")
	}
	toolstest.Require(b, "dpdk-testpmd")
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("rxonly/%dB", size), func(b *testing.B) {
			tp := topo(b, 1)
			gen := startGenerator(b, tp.A, tp.IfA, udpFrame(b, tp.MACB, tp.MACA, size))
			defer stopGenerator(b, gen)
			res := runTestpmd(b, tp.B, tp.IfB, "rxonly", size)
			b.ReportMetric(float64(res.RxPackets)/res.Elapsed.Seconds(), "pkts/s")
		})
	}
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("txonly/%dB", size), func(b *testing.B) {
			tp := topo(b, 1)
			attachDrop(b, tp.B, tp.IfB)
			res := runTestpmd(b, tp.A, tp.IfA, "txonly", size)
			b.ReportMetric(float64(res.TxPackets)/res.Elapsed.Seconds(), "pkts/s")
		})
	}
}

// runTestpmd runs testpmd's AF_XDP PMD in mode on ifname for 3 s, with its
// forwarding lcore on CPU 1.
func runTestpmd(b *testing.B, ns *netns.NS, ifname, mode string, size int) anchor.TestpmdResult {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := anchor.Testpmd(ctx, anchor.TestpmdOptions{
		Netns: ns.Name, Vdevs: []string{"net_af_xdp0,iface=" + ifname + ",start_queue=0,queue_count=1"},
		ForwardMode: mode, TxPktLen: size, Lcores: "0,1", Duration: 3 * time.Second,
	})
	require.NoError(b, err)
	return res
}

// attachDrop attaches bench/kgen's native XDP drop program to ifname: a
// sink that costs the receiving side almost nothing.
func attachDrop(t testing.TB, ns *netns.NS, ifname string) {
	t.Helper()
	detach, err := kgen.AttachDrop(ns, ifname)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, detach()) })
}
