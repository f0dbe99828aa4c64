package latency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/hist"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/pmd/netns"

	// The rows open afxdp and afpacket ports by spec.
	_ "github.com/peregrine-net/peregrine/pmd/afpacket"
	_ "github.com/peregrine-net/peregrine/pmd/afxdp"
)

// Options configure a run.
type Options struct {
	Out io.Writer
	// Count is the round trips of each row (0: DefaultCount); the
	// AF_PACKET TPACKET_V3 rows, a few milliseconds a round trip, make
	// Count/20 (at least 10).
	Count int
	// KernelTime is how long each sockperf row runs, whole seconds (0: 2s;
	// sockperf warms up for 400 ms of it).
	KernelTime time.Duration
	// IdleWindow is how long each idle policy's CPU use is measured
	// (0: 1s).
	IdleWindow time.Duration
	// Prefix names the namespaces PREFIX-a and PREFIX-b ("": pglat<pid>).
	Prefix string
}

// DefaultCount is Options.Count's default.
const DefaultCount = 20000

// Sizes are the push sizes measured.
var Sizes = []int{64, 4096}

// Addresses: the kernel's (sockperf, TCP) on the veth ends, and the
// transport endpoints', which the kernel does not own, so it drops their
// frames rather than answering them.
var (
	kernelA = netip.MustParsePrefix("198.18.0.1/24")
	kernelB = netip.MustParsePrefix("198.18.0.2/24")
	rtA     = netip.MustParseAddr("198.18.0.101")
	rtB     = netip.MustParseAddr("198.18.0.102")
)

const (
	ifA = "lat0"
	ifB = "lat1"
)

// row is one way of moving a push: a port spec and an idle policy.
type row struct {
	name   string
	driver string // afxdp or afpacket
	params string // spec parameters after netns=
	idle   lcore.IdleMode
	v3     bool // the block-wait ring: fewer round trips
}

// Rows returns the peregrine rows' names, in order, for --help and tests.
func Rows() []string {
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	return append(names, "kernel_udp", "kernel_tcp")
}

var rows = []row{
	{name: "afxdp", driver: "afxdp", idle: lcore.IdleAdaptive},
	{name: "afxdp_busy", driver: "afxdp", idle: lcore.IdleBusy},
	{name: "afxdp_busypoll", driver: "afxdp", params: "&busy_poll=20&busy_budget=64", idle: lcore.IdleBusy},
	{name: "afpacket", driver: "afpacket", idle: lcore.IdleAdaptive},
	{name: "afpacket_busy", driver: "afpacket", idle: lcore.IdleBusy},
	{name: "afpacket_v3", driver: "afpacket", params: "&ring=v3", idle: lcore.IdleAdaptive, v3: true},
}

// quantiles of one row, in microseconds.
type quantiles struct{ p50, p99, p999 float64 }

func (q quantiles) String() string {
	return fmt.Sprintf("p50 %.1f µs, p99 %.1f µs, p99.9 %.1f µs", q.p50, q.p99, q.p999)
}

// topology is the veth pair between the two namespaces.
type topology struct {
	a, b       *netns.NS
	cpuA, cpuB int
}

// Run builds the namespaces, measures every row and prints the report; it
// returns the pass and fail counts. The namespaces are deleted at the end.
func Run(ctx context.Context, o Options) (pass, fail int, err error) {
	if o.Count == 0 {
		o.Count = DefaultCount
	}
	if o.KernelTime == 0 {
		o.KernelTime = 2 * time.Second
	}
	if o.IdleWindow == 0 {
		o.IdleWindow = time.Second
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("pglat%d", os.Getpid())
	}
	if os.Geteuid() != 0 {
		return 0, 0, errors.New("bench latency: needs root (namespaces, veth, AF_XDP and AF_PACKET sockets)")
	}
	if err := checkTools(); err != nil {
		return 0, 0, err
	}
	// Two pinned loops hold a P each; the measuring goroutine and Go's TCP
	// ping-pong need more.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 4)))
	topo, err := build(o.Prefix)
	if err != nil {
		return 0, 0, err
	}
	defer topo.delete()

	rep := report.New(o.Out)
	rep.Note("bench latency: push round trips, 1 in flight, between namespaces %s-a (initiator, CPU %d) and %s-b (target, CPU %d) over one veth pair (MTU 1500); %d round trips a row (%d for afpacket_v3), kernel rows %v each; %s, GOMAXPROCS %d",
		o.Prefix, topo.cpuA, o.Prefix, topo.cpuB, o.Count, v3Count(o.Count), o.KernelTime, runtime.Version(), runtime.GOMAXPROCS(0))
	got := map[string]quantiles{}
	for _, size := range Sizes {
		for _, r := range rows {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			n := o.Count
			if r.v3 {
				n = v3Count(n)
			}
			q, err := topo.transport(ctx, r, size, n)
			if err != nil {
				return 0, 0, fmt.Errorf("bench latency: %s %d B: %w", r.name, size, err)
			}
			got[key(r.name, size)] = q
			printRow(o.Out, r.name, size, q)
		}
		q, err := topo.sockperf(ctx, size, o.KernelTime)
		if err != nil {
			return 0, 0, fmt.Errorf("bench latency: kernel_udp %d B: %w", size, err)
		}
		got[key("kernel_udp", size)] = q
		printRow(o.Out, "kernel_udp", size, q)
		q, err = topo.tcpPingPong(ctx, size, o.Count)
		if err != nil {
			return 0, 0, fmt.Errorf("bench latency: kernel_tcp %d B: %w", size, err)
		}
		got[key("kernel_tcp", size)] = q
		printRow(o.Out, "kernel_tcp", size, q)
	}
	idle := map[lcore.IdleMode]float64{}
	for _, m := range []lcore.IdleMode{lcore.IdleAdaptive, lcore.IdleBusy, lcore.IdleYield, lcore.IdleSleep} {
		share, err := topo.idleCPU(ctx, m, o.IdleWindow)
		if err != nil {
			return 0, 0, fmt.Errorf("bench latency: idle CPU of %s: %w", m, err)
		}
		idle[m] = share
		fmt.Fprintf(o.Out, "FIGURE idle_cpu_%s %.4f\n", m, share)
	}

	xdp, udp, pkt := got[key("afxdp", 64)], got[key("kernel_udp", 64)], got[key("afpacket", 64)]
	rep.Add(report.Ratio{Name: "latency_64b_p50_afxdp_vs_kernel_udp", Value: xdp.p50 / udp.p50, Op: report.AtMost, Target: 0.3,
		Detail: fmt.Sprintf("64 B push over AF_XDP, default idle policy (%s): %s; sockperf ping-pong (kernel UDP, full round trip): %s", lcore.IdleAdaptive, xdp, udp)})
	rep.Add(report.Ratio{Name: "latency_64b_p99_afxdp_vs_kernel_udp", Value: xdp.p99 / udp.p99, Op: report.AtMost, Target: 0.5,
		Detail: fmt.Sprintf("p99 %.1f µs against %.1f", xdp.p99, udp.p99)})
	rep.Add(report.Ratio{Name: "latency_64b_p50_afpacket_vs_afxdp", Value: pkt.p50 / xdp.p50, Op: report.AtMost, Target: 1.5,
		Detail: fmt.Sprintf("64 B push over AF_PACKET (TPACKET_V2), default idle policy: %s; over AF_XDP %s", pkt, xdp)})
	fmt.Fprintf(o.Out, "FIGURE idle_cpu_default_policy %.4f\n", idle[lcore.IdleAdaptive])
	rep.Note("idle_cpu_default_policy: the share of a CPU an idle target's loop (%s) used over %v (its thread's time in /proc/self/task/TID/schedstat); busy %.3f, yield %.3f, sleep %.3f",
		lcore.IdleAdaptive, o.IdleWindow, idle[lcore.IdleBusy], idle[lcore.IdleYield], idle[lcore.IdleSleep])
	pass, fail = rep.Summary()
	return pass, fail, nil
}

func v3Count(n int) int { return max(10, n/20) }

func key(name string, size int) string { return fmt.Sprintf("%s/%d", name, size) }

// printRow prints one row's quantiles as FIGURE lines, e.g.
// FIGURE latency_64b_afxdp_p50_us 21.3.
func printRow(w io.Writer, name string, size int, q quantiles) {
	s := sizeName(size)
	fmt.Fprintf(w, "FIGURE latency_%s_%s_p50_us %.2f\n", s, name, q.p50)
	fmt.Fprintf(w, "FIGURE latency_%s_%s_p99_us %.2f\n", s, name, q.p99)
	fmt.Fprintf(w, "FIGURE latency_%s_%s_p999_us %.2f\n", s, name, q.p999)
}

func sizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%dkib", size/1024)
	}
	return fmt.Sprintf("%db", size)
}

func fromHist(h *hist.Histogram) quantiles {
	us := func(q float64) float64 { return float64(h.Quantile(q)) / 1e3 }
	return quantiles{us(0.5), us(0.99), us(0.999)}
}

// build creates the namespaces and the veth pair (GRO on: AF_PACKET
// receives on a veth only with it) and picks the CPUs.
func build(prefix string) (*topology, error) {
	t := &topology{}
	var err error
	if t.a, err = netns.Create(prefix + "-a"); err != nil {
		return nil, fmt.Errorf("bench latency: %w", err)
	}
	if t.b, err = netns.Create(prefix + "-b"); err != nil {
		t.delete()
		return nil, fmt.Errorf("bench latency: %w", err)
	}
	if err := netns.Veth(t.a, ifA, t.b, ifB, netns.VethOptions{GRO: true, AddrA: kernelA, AddrB: kernelB}); err != nil {
		t.delete()
		return nil, fmt.Errorf("bench latency: %w", err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.delete()
		return nil, fmt.Errorf("bench latency: allowed CPUs: %w", err)
	}
	var cpus []int
	for c := 0; c < lcore.MaxCPU+1 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	t.cpuA, t.cpuB = cpus[0], cpus[len(cpus)-1]
	return t, nil
}

func (t *topology) delete() {
	for _, ns := range []*netns.NS{t.a, t.b} {
		if ns != nil {
			_ = ns.Delete()
		}
	}
}

func (t *topology) open(ns *netns.NS, iface string, r row, cpu int) (*app.Pipeline, error) {
	return app.New(app.Options{
		Pool:   mbuf.Options{Name: "bench-latency-" + iface, Frames: 8192},
		Ports:  []string{fmt.Sprintf("%s:%s?netns=%s%s", r.driver, iface, ns.Name, r.params)},
		Lcores: []app.Lcore{{Name: iface, CPU: cpu}},
		Idle:   lcore.IdlePolicy{Mode: r.idle},
		Clock:  clock.NewReal(),
	})
}

// transport measures n push round trips of size bytes, one in flight, from
// an initiator in namespace a to a target in b, both ports as r says.
func (t *topology) transport(ctx context.Context, r row, size, n int) (quantiles, error) {
	target, err := t.open(t.b, ifB, r, t.cpuB)
	if err != nil {
		return quantiles{}, err
	}
	defer target.Stop()
	tgt, err := target.AddTransport(app.TransportOptions{Role: "target", LocalIP: rtB, Window: 1, Sizes: []int{size}})
	if err != nil {
		return quantiles{}, err
	}
	initiator, err := t.open(t.a, ifA, r, t.cpuA)
	if err != nil {
		return quantiles{}, err
	}
	defer initiator.Stop()
	ini, err := initiator.AddTransport(app.TransportOptions{
		Role: "initiator", LocalIP: rtA, Window: 1, Sizes: []int{size}, Conns: 1, Count: uint64(n),
		RegionKey: tgt.Region.Key, Peer: rt.PeerAddr{MAC: [6]byte(target.Port(0).Info().MAC), IP: rtB},
	})
	if err != nil {
		return quantiles{}, err
	}
	if err := target.Start(); err != nil {
		return quantiles{}, err
	}
	if err := initiator.Start(); err != nil {
		return quantiles{}, err
	}
	load := ini.Load
	done := func() bool {
		s := load.Stats()
		return load.Down() || s.Completed+s.Failed >= uint64(n)
	}
	// Generous: a loaded machine or the V3 ring's block wait.
	limit := 30*time.Second + time.Duration(n)*5*time.Millisecond
	for start := time.Now(); !done(); {
		if err := ctx.Err(); err != nil {
			return quantiles{}, err
		}
		if time.Since(start) > limit {
			s := load.Stats()
			return quantiles{}, fmt.Errorf("%d of %d round trips done after %v", s.Completed+s.Failed, n, limit)
		}
		time.Sleep(time.Millisecond)
	}
	ini.Drain()
	if err := initiator.StopLoops(); err != nil {
		return quantiles{}, err
	}
	s := load.Stats()
	if s.Failed > 0 || s.Completed < uint64(n) {
		return quantiles{}, fmt.Errorf("%d of %d round trips failed (%v)", s.Failed, n, ini.ConnErr())
	}
	if err := target.StopLoops(); err != nil {
		return quantiles{}, err
	}
	return fromHist(&load.Latency), nil
}

// idleCPU opens a target with idle policy m on an idle port and returns
// the share of a CPU its loop's thread used over window, once the policy
// has settled (the adaptive one sleeps after DefaultYieldFor).
func (t *topology) idleCPU(ctx context.Context, m lcore.IdleMode, window time.Duration) (float64, error) {
	pipe, err := t.open(t.b, ifB, row{driver: "afxdp", idle: m}, t.cpuB)
	if err != nil {
		return 0, err
	}
	defer pipe.Stop()
	if _, err := pipe.AddTransport(app.TransportOptions{Role: "target", LocalIP: rtB, Window: 1, Sizes: []int{64}}); err != nil {
		return 0, err
	}
	if err := pipe.Start(); err != nil {
		return 0, err
	}
	loop := pipe.Loops()[0]
	settle := time.NewTimer(10 * lcore.DefaultYieldFor)
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-settle.C:
	}
	before, err := loop.ThreadCPU()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	after, err := loop.ThreadCPU()
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(time.Since(start)), pipe.StopLoops()
}

// kernelAddr is the target namespace's kernel address, for sockperf and
// TCP.
func kernelAddr() string { return kernelB.Addr().String() }

func lines(b []byte) []string { return strings.Split(strings.TrimSpace(string(b)), "\n") }
