package vstestpmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/bench/anchor"
	"github.com/peregrine-net/peregrine/bench/kgen"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// Defaults and limits of Options.
const (
	DefaultRounds   = 3
	DefaultDuration = 3 * time.Second
	MaxRounds       = 15
	MinDuration     = 100 * time.Millisecond
	MaxDuration     = time.Minute
	topologyMTU     = netns.BenchMTU
	// genCPU and dutCPU: the generator and the kernel work it causes on
	// CPU 0 (with testpmd's main lcore), the device under test on CPU 1
	// (testpmd's forwarding lcore).
	genCPU = 0
	dutCPU = 1
	// maxAllocsPerPkt is the allocation goal: the loop allocates nothing
	// per packet or per burst (that would be >= 1/256), while the Go
	// runtime may allocate a few times a second on its own (new threads).
	maxAllocsPerPkt = 1e-4
)

// DefaultSizes are the frame lengths compared, without FCS (testpmd's
// --txpkts counts the same way).
var DefaultSizes = []int{64, 1518}

// Options configure Run. Zero fields take their defaults.
type Options struct {
	// Out receives the report (required).
	Out io.Writer
	// Rounds is how many times each side is measured per comparison,
	// alternating, 1..MaxRounds. Default DefaultRounds.
	Rounds int
	// Duration is each measurement's forwarding time, MinDuration..
	// MaxDuration. Default DefaultDuration.
	Duration time.Duration
	// Sizes are the frame lengths without FCS, each 60..1518. Default
	// DefaultSizes.
	Sizes []int
	// Comparisons, when set, limits the run to these comparisons (names as
	// in Comparisons()). Default all.
	Comparisons []string
	// Prefix names the namespaces PREFIX-gen, PREFIX-fwd, PREFIX-sink; at
	// most 12 characters of letters, digits and '-'. Default "pgvs" and
	// the process id.
	Prefix string
	// KeepDisturbed keeps every round as first measured, even when other
	// work took more than 5 % of a pinned thread's CPU (by default such a
	// round is measured again, up to twice). For quick runs whose figures
	// do not matter.
	KeepDisturbed bool
}

// comparison is one row of the report: a driver in a testpmd mode.
type comparison struct {
	driver string // "afxdp" or "afpacket"
	mode   string // "rxonly", "txonly" or "io"
}

func (c comparison) name() string { return c.driver + "_" + c.mode }

// comparisons are run in this order.
var comparisons = []comparison{
	{"afxdp", "rxonly"},
	{"afxdp", "txonly"},
	{"afxdp", "io"},
	{"afpacket", "rxonly"},
	{"afpacket", "io"},
}

// Comparisons returns the names Options.Comparisons accepts.
func Comparisons() []string {
	names := make([]string, len(comparisons))
	for i, c := range comparisons {
		names[i] = c.name()
	}
	return names
}

// ErrNotRoot is returned when the process lacks the privileges the run
// needs.
var ErrNotRoot = errors.New("vstestpmd: needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN for namespaces and veth, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK for the ports)")

func (o *Options) validate() error {
	if o.Out == nil {
		return errors.New("vstestpmd: Options.Out is nil (pass os.Stdout or a buffer)")
	}
	if o.Rounds == 0 {
		o.Rounds = DefaultRounds
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if len(o.Sizes) == 0 {
		o.Sizes = DefaultSizes
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("pgvs%d", os.Getpid())
	}
	if o.Rounds < 1 || o.Rounds > MaxRounds {
		return fmt.Errorf("vstestpmd: Options.Rounds %d is out of range (use 1..%d)", o.Rounds, MaxRounds)
	}
	if o.Duration < MinDuration || o.Duration > MaxDuration {
		return fmt.Errorf("vstestpmd: Options.Duration %v is out of range (use %v..%v, e.g. 2s)", o.Duration, MinDuration, MaxDuration)
	}
	for _, s := range o.Sizes {
		if s < kgen.MinFrameSize || s > topologyMTU+14 {
			return fmt.Errorf("vstestpmd: Options.Sizes: frame size %d is out of range (use %d..%d bytes without FCS)", s, kgen.MinFrameSize, topologyMTU+14)
		}
	}
	for _, name := range o.Comparisons {
		if !slices.Contains(Comparisons(), name) {
			return fmt.Errorf("vstestpmd: Options.Comparisons: unknown comparison %q (use %s)", name, strings.Join(Comparisons(), ", "))
		}
	}
	if len(o.Prefix) > 12 {
		return fmt.Errorf("vstestpmd: Options.Prefix %q is longer than 12 characters (interface names must fit 15)", o.Prefix)
	}
	for _, c := range o.Prefix {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("vstestpmd: Options.Prefix %q may hold only letters, digits and '-'", o.Prefix)
		}
	}
	return nil
}

// Run builds the topology, measures every comparison for every size in
// alternating rounds, prints the report and deletes the topology. It
// returns the pass and fail counts; err is set when the run could not be
// carried out (not root, testpmd missing, topology or a port failing to
// come up, ctx ended).
func Run(ctx context.Context, opts Options) (pass, fail int, err error) {
	if err := opts.validate(); err != nil {
		return 0, 0, err
	}
	if os.Geteuid() != 0 {
		return 0, 0, ErrNotRoot
	}
	if runtime.NumCPU() < 2 {
		return 0, 0, fmt.Errorf("vstestpmd: needs two CPUs (the generator on CPU %d, the device under test on CPU %d); this machine has %d", genCPU, dutCPU, runtime.NumCPU())
	}
	testpmdPath, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		return 0, 0, fmt.Errorf("vstestpmd: dpdk-testpmd not found (run hack/install-deps.sh as root): %w", anchor.ErrNotInstalled)
	}

	topo, err := netns.BenchThreeNS(opts.Prefix, opts.Prefix)
	if err != nil {
		return 0, 0, fmt.Errorf("vstestpmd: building the topology: %w", err)
	}
	defer func() {
		if derr := topo.Delete(); derr != nil {
			err = errors.Join(err, fmt.Errorf("vstestpmd: deleting the topology: %w", derr))
		}
	}()
	sink, err := kgen.AttachSink(topo.Sink, topo.SinkIf)
	if err != nil {
		return 0, 0, fmt.Errorf("vstestpmd: attaching the sink: %w", err)
	}
	defer func() { err = errors.Join(err, sink.Detach()) }()

	out := opts.Out
	fmt.Fprintf(out, "# bench vs-testpmd: %s, GOMAXPROCS %d, %s (DPDK %s)\n", runtime.Version(), runtime.GOMAXPROCS(0), testpmdPath, dpdkVersion())
	fmt.Fprintf(out, "# topology %s-{gen,fwd,sink}: %s -> %s | %s -> %s (veth, GRO on, MTU %d); generator CPU %d, device under test CPU %d\n",
		opts.Prefix, topo.GenIf, topo.FwdGenIf, topo.FwdSinkIf, topo.SinkIf, topologyMTU, genCPU, dutCPU)
	fmt.Fprintf(out, "# peregrine: ports afxdp:IF?netns=%s%s and afpacket:IF?netns=%s%s (DPDK's own defaults: net_af_xdp busy_budget=64, net_af_packet qdisc_bypass=1), core/fwd forwarders (app/traffic generator for txonly) on one busy-polling lcore.Loop on CPU %d\n",
		topo.Fwd.Name, driverParams["afxdp"], topo.Fwd.Name, driverParams["afpacket"], dutCPU)
	fmt.Fprintf(out, "# testpmd: ip netns exec %s dpdk-testpmd --no-huge --no-pci --no-shconf --no-telemetry -m 1024 -l %d,%d --vdev net_af_xdp0,iface=IF,start_queue=0,queue_count=1 | --vdev net_af_packet0,iface=IF -- -i --forward-mode=MODE [--txpkts=SIZE]\n",
		topo.Fwd.Name, genCPU, dutCPU)
	fmt.Fprintf(out, "# %d round(s) of %v per side, alternating peregrine/testpmd; ratio = median peregrine / median testpmd\n", opts.Rounds, opts.Duration)

	began := time.Now()
	b := &bench{topo: topo, sink: sink, dur: opts.Duration, prof: profiler{dir: os.Getenv(ProfileEnv)}}
	rep := report.New(out)
	if b.prof.dir != "" {
		if err := os.MkdirAll(b.prof.dir, 0o755); err != nil {
			return 0, 0, fmt.Errorf("vstestpmd: %s: %w", ProfileEnv, err)
		}
		rep.Note("%s=%s: recording perf (CPU %d) and Go CPU profiles of every measurement window", ProfileEnv, b.prof.dir, dutCPU)
	}
	var allocs, allocPkts uint64
	newThreads := 0
	for _, c := range comparisons {
		if len(opts.Comparisons) > 0 && !slices.Contains(opts.Comparisons, c.name()) {
			continue
		}
		for _, size := range opts.Sizes {
			var ours, theirs []float64
			for round := 1; round <= opts.Rounds; round++ {
				// One retry per measurement: re-binding a queue just after
				// the other tool closed its socket can fail for a moment.
				measure := func(side string, run func(context.Context, comparison, int) (result, error)) (result, error) {
					b.window = fmt.Sprintf("%s_%dB_r%d_%s", c.name(), size, round, side)
					r, err := run(ctx, c, size)
					if err == nil || ctx.Err() != nil {
						return r, err
					}
					first, _, _ := strings.Cut(err.Error(), "\n")
					rep.Note("%s %dB round %d: %s failed, retrying once: %s", c.name(), size, round, side, first)
					return run(ctx, c, size)
				}
				var o, t result
				for redo := 0; ; redo++ {
					if o, err = measure("peregrine", b.peregrine); err != nil {
						return 0, 0, fmt.Errorf("vstestpmd: %s %dB round %d, peregrine: %w", c.name(), size, round, err)
					}
					if t, err = measure("testpmd", b.testpmd); err != nil {
						return 0, 0, fmt.Errorf("vstestpmd: %s %dB round %d, testpmd: %w", c.name(), size, round, err)
					}
					if opts.KeepDisturbed || !o.disturbed() && !t.disturbed() {
						break
					}
					if redo == stolenRedos {
						rep.Note("%s %dB round %d: other work still took the pinned CPUs after %d repeats; kept", c.name(), size, round, redo)
						break
					}
					rep.Note("%s %dB round %d: other work took the pinned CPUs (peregrine %.3f Mpps%s; testpmd %.3f Mpps%s); measuring the round again",
						c.name(), size, round, o.pps/1e6, o.stealDetail(), t.pps/1e6, t.stealDetail())
				}
				ours, theirs = append(ours, o.pps), append(theirs, t.pps)
				allocs, allocPkts, newThreads = allocs+o.allocs, allocPkts+o.windowPkts, newThreads+o.newThreads
				rep.Note("%s %dB round %d: peregrine %.3f Mpps (%s), testpmd %.3f Mpps (%s)",
					c.name(), size, round, o.pps/1e6, o.detail, t.pps/1e6, t.detail)
			}
			mo, mt := median(ours), median(theirs)
			// --report's figure of the comparison: Mpps against frame size.
			for _, side := range []struct {
				name string
				mpps float64
			}{{"peregrine", mo / 1e6}, {"testpmd", mt / 1e6}} {
				fmt.Fprintln(out, report.Point{Figure: c.name() + "_vs_testpmd", Series: side.name, X: float64(size), Y: side.mpps,
					XLabel: "frame_size_B", YLabel: "median_Mpps"}.Line())
			}
			rep.Add(report.Ratio{
				Name: fmt.Sprintf("%s_%dB_vs_testpmd", c.name(), size), Value: mo / mt, Op: report.AtLeast, Target: 1.0,
				Detail: fmt.Sprintf("median Mpps: peregrine %.3f %s, testpmd %.3f %s", mo/1e6, mppsList(ours), mt/1e6, mppsList(theirs)),
			})
		}
	}
	perPkt := float64(allocs) / float64(allocPkts)
	rep.Add(report.Ratio{Name: "fwd_loop_heap_allocs_per_pkt", Value: perPkt, Op: report.AtMost, Target: maxAllocsPerPkt,
		Detail: fmt.Sprintf("%d heap allocations (process-wide runtime.MemStats.Mallocs) while peregrine's loops moved %d packets after warm-up: %.3g per packet; the Go runtime created %d threads meanwhile (a few allocations each). One allocation per burst of 32 would be 0.03", allocs, allocPkts, perPkt, newThreads)})
	rep.Note("measured in %.0fs", time.Since(began).Seconds())
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// dpdkVersion reads the installed DPDK version from pkg-config, or "?".
func dpdkVersion() string {
	out, err := exec.Command("pkg-config", "--modversion", "libdpdk").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mppsList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x/1e6)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
