package kgen

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

var (
	macA = net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x00, 0x0a}
	macB = net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x00, 0x0b}
)

func TestUDPFrameHeaders(t *testing.T) {
	for _, size := range []int{60, 64, 1518} {
		f, err := UDPFrame(FrameOptions{Size: size, Dst: macB, Src: macA})
		require.NoError(t, err)
		require.Len(t, f, size)
		require.Equal(t, []byte(macB), f[0:6])
		require.Equal(t, []byte(macA), f[6:12])
		require.Equal(t, uint16(0x0800), binary.BigEndian.Uint16(f[12:]))
		ip := f[14:34]
		require.Equal(t, uint16(size-14), binary.BigEndian.Uint16(ip[2:]))
		require.Zero(t, wire.IPv4HeaderChecksum(ip), "a correct header checksums to zero")
		require.Equal(t, []byte{198, 18, 0, 1}, ip[12:16])
		require.Equal(t, []byte{198, 18, 0, 2}, ip[16:20])
		require.Equal(t, uint16(9), binary.BigEndian.Uint16(f[36:]))
		require.Equal(t, uint16(size-34), binary.BigEndian.Uint16(f[38:]))
	}
	// The bytes UDPFrame built before it used core/wire's builder.
	f, err := UDPFrame(FrameOptions{Size: 64, Dst: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Src: net.HardwareAddr{2, 0, 0, 0, 0, 1}})
	require.NoError(t, err)
	require.Equal(t, "020000000002020000000001080045000032000040004011ae93c6120001c612000200090009001e000000000000000000000000000000000000000000000000", hex.EncodeToString(f))
}

func TestUDPFrameRejectsBadOptions(t *testing.T) {
	for name, c := range map[string]struct {
		opts FrameOptions
		want string
	}{
		"short":     {FrameOptions{Size: 59, Dst: macB, Src: macA}, "Size 59 is out of range"},
		"huge":      {FrameOptions{Size: MaxFrameSize + 1, Dst: macB, Src: macA}, "out of range"},
		"no dst":    {FrameOptions{Src: macA}, "FrameOptions.Dst"},
		"bad src":   {FrameOptions{Dst: macB, Src: macA[:4]}, "FrameOptions.Src"},
		"public ip": {FrameOptions{Dst: macB, Src: macA, DstIP: netip.MustParseAddr("8.8.8.8")}, "198.18.0.0/15"},
		"ipv6":      {FrameOptions{Dst: macB, Src: macA, SrcIP: netip.MustParseAddr("2001:db8::1")}, "not an IPv4 address"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := UDPFrame(c.opts)
			require.ErrorContains(t, err, c.want)
		})
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	frame := make([]byte, 64)
	_, err := Start(nil, "lo", frame, Options{CallTime: -time.Second})
	require.ErrorContains(t, err, "Options.CallTime -1s")
	_, err = Start(nil, "lo", frame, Options{CPU: -2})
	require.ErrorContains(t, err, "Options.CPU -2")
	_, err = Start(nil, "lo", frame[:10], Options{})
	require.ErrorContains(t, err, "shorter than an Ethernet header")
	_, err = Start(nil, "", frame, Options{})
	require.ErrorContains(t, err, "no interface")
}

// topo is a veth pair with GRO on, so frames redirected into A reach B
// whether or not B runs XDP.
func topo(t *testing.T) *netnstest.Topology {
	t.Helper()
	return netnstest.TwoNS(t, netns.VethOptions{GRO: true, MACA: macA, MACB: macB})
}

func TestGeneratorFramesReachTheSink(t *testing.T) {
	tp := topo(t)
	sink, err := AttachSink(tp.B, tp.IfB)
	require.NoError(t, err)
	defer func() { require.NoError(t, sink.Detach()) }()
	frame, err := UDPFrame(FrameOptions{Dst: tp.MACB, Src: tp.MACA})
	require.NoError(t, err)

	gen, err := Start(tp.A, tp.IfA, frame, Options{CPU: -1, CallTime: MinCallTime})
	require.NoError(t, err)
	const want = 1 << 18
	for gen.Sent() < want { // bounded: the first call alone adds 2^16 frames
		runtime.Gosched() // the generator needs a P between its calls
	}
	sent, err := gen.Stop()
	require.NoError(t, err)
	require.GreaterOrEqual(t, sent, uint64(want))
	_, err = gen.Stop()
	require.ErrorIs(t, err, ErrStopped)

	got, err := sink.Count()
	require.NoError(t, err)
	require.Positive(t, got, "the sink counted the generated frames")
	require.LessOrEqual(t, got, sent, "the sink saw only what was generated")
	t.Logf("generated %d, sink counted %d", sent, got)

	require.NoError(t, sink.Detach())
	require.NoError(t, sink.Detach(), "Detach is idempotent")
	_, err = sink.Count()
	require.ErrorContains(t, err, "detached")
}

func TestStartFailsOnMissingInterface(t *testing.T) {
	tp := topo(t)
	_, err := Start(tp.A, "pg-nonexistent", make([]byte, 64), Options{CPU: -1})
	require.ErrorContains(t, err, `interface "pg-nonexistent"`)
}

func TestAttachDropRefusesASecondProgram(t *testing.T) {
	tp := topo(t)
	detach, err := AttachDrop(tp.B, tp.IfB)
	require.NoError(t, err)
	_, err = AttachSink(tp.B, tp.IfB)
	require.ErrorContains(t, err, "is another XDP program there?")
	require.NoError(t, detach())
	require.NoError(t, detach(), "detach is idempotent")
	sink, err := AttachSink(tp.B, tp.IfB)
	require.NoError(t, err, "the interface is free again after detach")
	require.NoError(t, sink.Detach())
}

// The generating loop's one call per batch must not allocate: benchmarks
// count heap allocations over whole runs with the generator going.
func TestTestRunDoesNotAllocate(t *testing.T) {
	tp := topo(t)
	frame, err := UDPFrame(FrameOptions{Dst: tp.MACB, Src: tp.MACA})
	require.NoError(t, err)
	var allocs float64
	require.NoError(t, tp.A.Do(func() error { // no require inside: it would end Do's goroutine
		ifc, err := net.InterfaceByName(tp.IfA)
		if err != nil {
			return err
		}
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.XDP, License: "Dual MIT/GPL",
			Instructions: asm.Instructions{
				asm.Mov.Imm(asm.R1, int32(ifc.Index)), asm.Mov.Imm(asm.R2, 0), asm.FnRedirect.Call(), asm.Return(),
			},
		})
		if err != nil {
			return err
		}
		defer prog.Close()
		run := newTestRun(prog.FD(), frame)
		var runErr error
		allocs = testing.AllocsPerRun(20, func() {
			if err := run.do(64); err != nil {
				runErr = err
			}
		})
		return runErr
	}))
	require.Zero(t, allocs)
}

// BenchmarkGenerator measures how fast the generator fills a veth pair whose
// far end drops in XDP: the ceiling of every receive benchmark built on it.
func BenchmarkGenerator(b *testing.B) {
	netnstest.SkipUnlessRoot(b)
	tp := netnstest.TwoNS(b, netns.VethOptions{GRO: true, MACA: macA, MACB: macB, MTU: 1504})
	sink, err := AttachSink(tp.B, tp.IfB)
	require.NoError(b, err)
	defer func() { require.NoError(b, sink.Detach()) }()
	for _, size := range []int{64, 1518} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			frame, err := UDPFrame(FrameOptions{Size: size, Dst: tp.MACB, Src: tp.MACA})
			require.NoError(b, err)
			gen, err := Start(tp.A, tp.IfA, frame, Options{CPU: 0})
			require.NoError(b, err)
			// No ReportAllocs: polling the sink's map allocates here; the
			// generator's own loop is TestTestRunDoesNotAllocate's.
			first, err := sink.Count()
			require.NoError(b, err)
			b.ResetTimer()
			start := time.Now()
			got := uint64(0)
			for got < uint64(b.N) { // bounded: the generator never stops on its own
				n, err := sink.Count()
				require.NoError(b, err)
				got = n - first
				runtime.Gosched()
			}
			elapsed := time.Since(start)
			b.StopTimer()
			_, err = gen.Stop()
			require.NoError(b, err)
			b.ReportMetric(float64(got)/elapsed.Seconds(), "pkts/s")
		})
	}
}
