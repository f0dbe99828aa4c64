package afxdp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

var (
	benchSizes  = []int{64, 1518}
	benchBursts = []int{1, 8, 32, 64}
)

// udpFrame returns a size-byte Ethernet/IPv4/UDP frame from src to dst.
func udpFrame(dst, src net.HardwareAddr, size int) []byte {
	f := make([]byte, size)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	copy(ip[12:], []byte{198, 18, 0, 1})
	copy(ip[16:], []byte{198, 18, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], 9)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
	return f
}

// generator floods an interface with one frame from inside the kernel:
// an XDP program that redirects to the interface, run with
// BPF_PROG_TEST_RUN in live-frame mode, so the sender costs no AF_XDP
// socket and can outpace the receiver under test.
type generator struct {
	stop atomic.Bool
	done chan error
}

func startGenerator(t testing.TB, ns *netns.NS, ifname string, frame []byte) *generator {
	t.Helper()
	g := &generator{done: make(chan error, 1)}
	started := make(chan error, 1)
	go func() {
		g.done <- ns.Do(func() error {
			ifc, err := net.InterfaceByName(ifname)
			if err != nil {
				started <- err
				return err
			}
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
				Name: "pg_trafficgen", Type: ebpf.XDP, License: "Dual MIT/GPL",
				Instructions: asm.Instructions{
					asm.Mov.Imm(asm.R1, int32(ifc.Index)),
					asm.Mov.Imm(asm.R2, 0),
					asm.FnRedirect.Call(),
					asm.Return(),
				},
			})
			if err != nil {
				started <- err
				return err
			}
			defer prog.Close()
			// Pinned to CPU 0 (the poll loop under test takes CPU 1, as
			// testpmd's forwarding lcore does); the thread's own mask is
			// restored before netns.Do unlocks it.
			var all unix.CPUSet
			if err := unix.SchedGetaffinity(0, &all); err != nil {
				started <- err
				return err
			}
			var cpu0 unix.CPUSet
			cpu0.Set(0)
			if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
				started <- err
				return err
			}
			defer unix.SchedSetaffinity(0, &all)
			started <- nil
			for !g.stop.Load() {
				if _, err := prog.Run(&ebpf.RunOptions{Data: frame, Repeat: 1 << 16, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES}); err != nil {
					return fmt.Errorf("live-frame test run: %w", err)
				}
			}
			return nil
		})
	}()
	require.NoError(t, <-started, "starting the generator")
	return g
}

func (g *generator) Stop(t testing.TB) {
	g.stop.Store(true)
	require.NoError(t, <-g.done)
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
		frame := udpFrame(tp.MACB, tp.MACA, size)
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
		gen.Stop(b)
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
		frame := udpFrame(tp.MACB, tp.MACA, size)
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
// the two can be compared within one run. It takes ~30 s, so it runs only
// with PEREGRINE_TESTPMD=1 (and dpdk-testpmd installed:
// hack/install-deps.sh).
func BenchmarkTestpmdAnchor(b *testing.B) {
	if os.Getenv("PEREGRINE_TESTPMD") != "1" {
		b.Skip("set PEREGRINE_TESTPMD=1 to run dpdk-testpmd for comparison")
	}
	path, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		b.Skip("dpdk-testpmd not installed (hack/install-deps.sh)")
	}
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("rxonly/%dB", size), func(b *testing.B) {
			tp := topo(b, 1)
			gen := startGenerator(b, tp.A, tp.IfA, udpFrame(tp.MACB, tp.MACA, size))
			defer gen.Stop(b)
			b.ReportMetric(runTestpmd(b, path, tp.B, tp.IfB, "rxonly", size), "pkts/s")
		})
	}
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("txonly/%dB", size), func(b *testing.B) {
			tp := topo(b, 1)
			attachDrop(b, tp.B, tp.IfB)
			b.ReportMetric(runTestpmd(b, path, tp.A, tp.IfA, "txonly", size), "pkts/s")
		})
	}
}

// runTestpmd runs testpmd in mode on ifname for a few seconds and returns
// the median of its per-second packet rates after the first two.
func runTestpmd(b *testing.B, path string, ns *netns.NS, ifname, mode string, size int) float64 {
	args := []string{"netns", "exec", ns.Name, path,
		"--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "--no-telemetry", "-l", "0,1", "--log-level=lib.eal:error",
		"--vdev", "net_af_xdp0,iface=" + ifname + ",start_queue=0,queue_count=1",
		"--", "--forward-mode=" + mode, "--stats-period", "1", "--txpkts=" + strconv.Itoa(size)}
	cmd := exec.Command("ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(b, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		b.Fatalf("testpmd exited early: %v\n%s", err, out.String())
	case <-time.After(12 * time.Second): // a fixed measurement window, not synchronisation
	}
	require.NoError(b, cmd.Process.Signal(os.Interrupt))
	<-done
	key := "Rx-pps:"
	if mode == "txonly" {
		key = "Tx-pps:"
	}
	var rates []float64
	for line := range strings.SplitSeq(out.String(), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == key {
			if v, err := strconv.ParseFloat(fields[1], 64); err == nil {
				rates = append(rates, v)
			}
		}
	}
	if len(rates) < 5 {
		b.Fatalf("testpmd printed %d rates:\n%s", len(rates), out.String())
	}
	rates = rates[2:]
	slices.Sort(rates)
	return rates[len(rates)/2]
}

// attachDrop attaches a native XDP program dropping everything to ifname:
// a sink that costs the receiving side almost nothing.
func attachDrop(t testing.TB, ns *netns.NS, ifname string) {
	t.Helper()
	drop, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "pg_drop", Type: ebpf.XDP, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1 /* XDP_DROP */), asm.Return()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { drop.Close() })
	require.NoError(t, ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: drop, Interface: ifc.Index, Flags: link.XDPDriverMode})
		if err == nil {
			t.Cleanup(func() { l.Close() })
		}
		return err
	}))
}
