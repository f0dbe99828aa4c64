package rfc2544

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// The DUTs RunVeth knows.
const (
	DUTFwd     = "fwd"     // peregrine fwd: io forwarding between two AF_XDP ports
	DUTKernel  = "kernel"  // a Linux bridge between the two interfaces
	DUTTestpmd = "testpmd" // dpdk-testpmd io forwarding over net_af_xdp
	// DUTExternal is the user's own device between VethOptions.TxPort and
	// RxPort: no topology is built and nothing is set up.
	DUTExternal = "external"
)

// DUTs lists the DUTs of the created topology in the order each size
// measures them.
var DUTs = []string{DUTKernel, DUTFwd, DUTTestpmd}

// External addresses: what the generator sends with an external DUT (both
// in 198.18.0.0/15, the benchmarking range of RFC 2544 appendix C).
var (
	ExternalSrcIP = netip.MustParseAddr("198.18.0.1")
	ExternalDstIP = netip.MustParseAddr("198.19.0.1")
)

// Placement of the loops.
const (
	// trafficCPU runs the generator and the receiver; dutCPU the DUT's
	// forwarding loop (testpmd: its forwarding lcore).
	trafficCPU = 0
	dutCPU     = 1
)

// VethOptions configure RunVeth. Zero fields take their defaults.
type VethOptions struct {
	// Out gets progress lines, the RATIO lines and BENCH-SUMMARY
	// (required).
	Out io.Writer
	// Method is the measurement (sizes, search, loads); its MaxRate and
	// Repeats are set here.
	Method Options
	// MaxRate is the highest load offered at every size, frames per
	// second; 0 (the default) offers up to the generator's ceiling,
	// measured before each size (see Ceiling).
	MaxRate float64
	// Repeats searches at Method.RepeatSize for peregrine fwd, for
	// search_repeatability (default 3); the other DUTs search once.
	Repeats int
	// DUTs to measure (default all three; testpmd is left out, and said
	// so, when dpdk-testpmd is not installed).
	DUTs []string
	// Prefix names the namespaces PREFIX-gen, -fwd and -sink (default
	// "pg2544" and the process id).
	Prefix string
	// TxPort and RxPort are the port specs (afxdp:IF, afpacket:IF, ...)
	// the traffic leaves by and comes back on when DUTs is
	// [DUTExternal]: the user's device sits between them. Frames go from
	// the TX port's MAC to DstMAC (default the RX port's MAC: right for a
	// bridge or a switch; give a router's), ExternalSrcIP to
	// ExternalDstIP.
	TxPort, RxPort string
	DstMAC         net.HardwareAddr
	// OnTrial, when set, gets every search trial, with its DUT and size
	// (streamed results).
	OnTrial func(dut string, size FrameSize, t TrialRecord)
}

// ErrNotRoot is returned without the privileges the run needs.
var ErrNotRoot = errors.New("rfc2544: needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN for namespaces, veth and the bridge; CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK for AF_XDP)")

func (o *VethOptions) validate() error {
	if o.Out == nil {
		return errors.New("rfc2544: VethOptions.Out is nil (pass os.Stdout or a buffer)")
	}
	if o.MaxRate != 0 && (!(o.MaxRate >= 100) || o.MaxRate > 100e6) {
		return fmt.Errorf("rfc2544: MaxRate %g: give 100 to 1e8 frames per second, or 0 for the generator's ceiling", o.MaxRate)
	}
	if o.Repeats == 0 {
		o.Repeats = 3
	}
	if len(o.DUTs) == 0 {
		o.DUTs = slices.Clone(DUTs)
	}
	external := slices.Contains(o.DUTs, DUTExternal)
	for _, d := range o.DUTs {
		if !slices.Contains(DUTs, d) && d != DUTExternal {
			return fmt.Errorf("rfc2544: DUT %q: give %s or %s", d, strings.Join(DUTs, ", "), DUTExternal)
		}
	}
	switch {
	case external && len(o.DUTs) > 1:
		return fmt.Errorf("rfc2544: DUT %s runs alone: its ports are the user's, the others' are the created topology's", DUTExternal)
	case external && (o.TxPort == "" || o.RxPort == ""):
		return fmt.Errorf("rfc2544: DUT %s needs TxPort and RxPort: the ports on either side of it", DUTExternal)
	case !external && (o.TxPort != "" || o.RxPort != "" || o.DstMAC != nil):
		return fmt.Errorf("rfc2544: TxPort, RxPort and DstMAC name the ports around DUT %s: the other DUTs use the topology they create", DUTExternal)
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("pg2544%d", os.Getpid())
	}
	if len(o.Prefix) > 12 {
		return fmt.Errorf("rfc2544: Prefix %q: at most 12 characters", o.Prefix)
	}
	m := o.Method
	// Auto: each size's ceiling, measured later; any rate checks the rest.
	m.Search.MaxRate = cmp.Or(o.MaxRate, 1e6)
	m.Repeats = o.Repeats
	if err := m.validate(); err != nil {
		return err
	}
	o.Method = m
	return nil
}

// Validated returns opts with its defaults filled in, as RunVeth will use
// them (for Parameters before the run).
func Validated(opts VethOptions) (VethOptions, error) {
	err := opts.validate()
	return opts, err
}

// vethRun is one run's topology (nil with an external DUT) and traffic
// pipeline, and how its frames are addressed.
type vethRun struct {
	opts           VethOptions
	topo           *netns.Topology3
	tp             *app.Pipeline
	stage          *trialStage
	trial          int
	srcMAC, dstMAC net.HardwareAddr
	srcIP, dstIP   netip.Addr
}

// RunVeth builds gen ↔ fwd ↔ sink (three namespaces, two veth pairs,
// addresses in 198.18.0.0/15), opens the traffic pipeline (AF_XDP ports in
// gen and sink on one loop pinned to CPU 0), and for each frame size sets
// up each DUT in the fwd namespace (its loop or forwarding lcore on CPU 1),
// measures it with Run and tears it down. It prints the ratios and returns
// the report; the topology is deleted on return.
func RunVeth(ctx context.Context, opts VethOptions) (rep *Report, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	// The traffic loop and a peregrine fwd DUT each hold a P while they
	// busy-poll: with GOMAXPROCS at two CPUs the controller and the
	// runtime got one only when the scheduler preempted a loop, every 10
	// ms or so, holding that loop — the generator's or the DUT's — back
	// for as long. With Ps to spare they run as threads of their own,
	// which the kernel slots in for microseconds.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 4)))
	if slices.Contains(opts.DUTs, DUTTestpmd) {
		if _, lerr := exec.LookPath("dpdk-testpmd"); lerr != nil {
			fmt.Fprintf(opts.Out, "# dpdk-testpmd is not installed (hack/install-deps.sh installs it): measuring without it\n")
			opts.DUTs = slices.DeleteFunc(opts.DUTs, func(d string) bool { return d == DUTTestpmd })
		}
	}
	r := &vethRun{opts: opts}
	ports := [2]string{opts.TxPort, opts.RxPort}
	if opts.DUTs[0] != DUTExternal {
		ifPrefix := "r" + opts.Prefix[max(0, len(opts.Prefix)-8):]
		r.topo, err = netns.BenchThreeNS(opts.Prefix, ifPrefix)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, r.topo.Delete()) }()
		t := r.topo
		ports = [2]string{fmt.Sprintf("afxdp:%s?netns=%s", t.GenIf, t.Gen.Name), fmt.Sprintf("afxdp:%s?netns=%s", t.SinkIf, t.Sink.Name)}
		r.srcMAC, r.dstMAC, r.srcIP, r.dstIP = t.GenMAC, t.SinkMAC, t.GenAddr.Addr(), t.SinkAddr.Addr()
	}
	if err := r.openTraffic(ports); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.tp.Stop()) }()
	if r.topo == nil {
		r.srcMAC, r.dstMAC, r.srcIP, r.dstIP = r.tp.Port(0).Info().MAC, r.tp.Port(1).Info().MAC, ExternalSrcIP, ExternalDstIP
		if opts.DstMAC != nil {
			r.dstMAC = opts.DstMAC
		}
		if len(r.srcMAC) != 6 || len(r.dstMAC) != 6 {
			return nil, fmt.Errorf("rfc2544: the ports %s and %s have no Ethernet address to send from and to: give DstMAC and Ethernet ports", opts.TxPort, opts.RxPort)
		}
	}

	results := map[string]*Result{}
	for _, d := range opts.DUTs {
		results[d] = &Result{DUT: d}
	}
	for _, size := range opts.Method.Sizes {
		ceiling, err := r.ceiling(ctx, size)
		if err != nil {
			return nil, fmt.Errorf("rfc2544: the generator's ceiling at %s: %w", size, err)
		}
		for _, d := range opts.DUTs {
			res, err := r.measure(ctx, d, size, ceiling)
			if err != nil {
				return nil, fmt.Errorf("rfc2544: %s at %s: %w", d, size, err)
			}
			results[d].Sizes = append(results[d].Sizes, res.Sizes...)
			results[d].Elapsed += res.Elapsed
		}
	}
	rep = &Report{Parameters: r.parameters()}
	for _, d := range opts.DUTs {
		rep.Results = append(rep.Results, results[d])
	}
	r.ratios(rep, results)
	return rep, nil
}

// parameters records every setting that shaped the figures.
func (r *vethRun) parameters() map[string]any {
	p := Parameters(r.opts)
	if r.topo == nil {
		p["topology"] = fmt.Sprintf("%s; frames %s -> %s, %s -> %s", p["topology"], r.srcMAC, r.dstMAC, r.srcIP, r.dstIP)
	}
	return p
}

// Parameters lists the settings of opts (validated) that shape the
// figures: the report's parameters, and what every streamed record
// carries.
func Parameters(opts VethOptions) map[string]any {
	m, s := opts.Method, opts.Method.Search
	sizes := make([]string, len(m.Sizes))
	for i, x := range m.Sizes {
		sizes[i] = x.String()
	}
	p := map[string]any{
		"duts": strings.Join(opts.DUTs, ","), "sizes": strings.Join(sizes, ","), "max_rate_fps": cmp.Or(any(opts.MaxRate), any("the generator's ceiling")),
		"generator_ceiling": "per size, before the DUTs: the best of " + fmt.Sprint(ceilingTrials) + " trials at no rate limit for the trial duration through the direct path (native XDP redirect between fwd's two ends; an external DUT: what the generator offered through it)",
		"offered_tolerance": s.OfferedTolerance,
		"trial_duration":    s.Duration.String(), "initial_trial_duration": s.InitialDuration.String(), "width": s.Width,
		"pdr_loss": s.PDRLoss, "exceed_ratio": s.ExceedRatio, "sum_factor": s.SumFactor, "max_trials": s.MaxTrials,
		"repeats_fwd": opts.Repeats, "repeat_size": m.RepeatSize.String(), "latency_loads_of_ndr": fmt.Sprint(m.LatencyLoads),
		"loss_loads_of_max": fmt.Sprint(m.LossLoads), "burst_trials": m.BurstTrials, "burst_duration": m.BurstDuration.String(),
		"measures": fmt.Sprint(m.Measures), "topology": "gen ↔ fwd ↔ sink, 3 namespaces, veth, MTU 1504, GRO on, 198.18.0.0/30 and 198.18.0.4/30",
		"traffic": "peregrine generator and receiver, AF_XDP copy mode, one loop on CPU 0", "dut_cpu": dutCPU,
		"frame_size": "on the wire with FCS; frames are 4 bytes shorter", "imix": "7:4:1 of 64/594/1518",
	}
	if slices.Contains(opts.DUTs, DUTExternal) {
		p["topology"] = fmt.Sprintf("external DUT between %s and %s", opts.TxPort, opts.RxPort)
		p["traffic"] = "peregrine generator and receiver, one loop on CPU 0"
		delete(p, "dut_cpu")
	}
	return p
}

// openTraffic opens the generator's port (ports[0]) and the receiver's
// (ports[1]) and starts their loop.
func (r *vethRun) openTraffic(ports [2]string) error {
	p, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "rfc2544-traffic", Frames: 16384},
		Ports:  ports[:],
		Lcores: []app.Lcore{{Name: "rfc2544-traffic", CPU: trafficCPU}},
		Idle:   lcore.IdlePolicy{Mode: lcore.IdleBusy},
	})
	if err != nil {
		return err
	}
	r.tp = p
	r.stage = newTrialStage(p.Pool(), p.Port(1), p.Cache(0))
	q := func(i int) []app.Queue { return []app.Queue{{Port: p.Port(i), Queue: 0}} }
	if err := p.Add(app.Stage{Stage: r.stage, Rx: q(1), Tx: q(0)}); err != nil {
		return errors.Join(err, p.Stop())
	}
	if err := p.Start(); err != nil {
		return errors.Join(err, p.Stop())
	}
	return nil
}

// measure sets DUT d up, runs the method at one size, offering up to
// ceiling unless MaxRate is set, and tears it down.
func (r *vethRun) measure(ctx context.Context, d string, size FrameSize, ceiling float64) (*Result, error) {
	say := func(format string, a ...any) { fmt.Fprintf(r.opts.Out, "# "+format+"\n", a...) }
	say("%s %s: setting up", d, size)
	teardown, err := r.setUp(ctx, d)
	if err != nil {
		return nil, err
	}
	defer teardown()
	if err := r.warmUp(ctx, size); err != nil {
		return nil, fmt.Errorf("the DUT forwards nothing: %w", err)
	}
	m := r.opts.Method
	m.Sizes = []FrameSize{size}
	m.Search.MaxRate = r.opts.MaxRate
	if r.opts.MaxRate == 0 {
		m.Search.MaxRate, m.MaxRate = ceiling, nil
	}
	m.Repeats = 1
	if d == DUTFwd {
		m.Repeats = r.opts.Repeats
	}
	m.Progress = func(s string) { say("%s", s) }
	if on := r.opts.OnTrial; on != nil {
		m.Search.OnTrial = func(t TrialRecord) { on(d, size, t) }
	}
	res, err := Run(ctx, r, d, m)
	if res != nil {
		for i := range res.Sizes {
			sr := &res.Sizes[i]
			sr.Ceiling = ceiling
			// Within the resolution of the ceiling the search cannot tell
			// the DUT's limit from the generator's.
			if len(sr.Searches) > 0 && sr.NDR >= ceiling*(1-m.Search.Width) {
				sr.GeneratorLimited = true
			}
		}
	}
	return res, err
}

// ceilingTrials is how many max-rate trials measure a ceiling: noise only
// lowers what a generator manages, so the best counts.
const ceilingTrials = 2

// ceiling measures what the traffic side offers and receives at size with
// nothing in the way: frames as fast as the generator's port takes them,
// for the search's Duration, through the direct path, received frames per
// second of send time, the best of ceilingTrials. With an external DUT
// there is no path of ours to measure: it is what the generator offered
// through the user's device.
func (r *vethRun) ceiling(ctx context.Context, size FrameSize) (float64, error) {
	if r.topo != nil {
		remove, err := r.directPath()
		if err != nil {
			return 0, err
		}
		defer func() {
			if err := remove(); err != nil {
				fmt.Fprintf(r.opts.Out, "# removing the direct path: %v\n", err)
			}
		}()
		if err := r.warmUp(ctx, size); err != nil {
			return 0, fmt.Errorf("the direct path forwards nothing: %w", err)
		}
	}
	var best float64
	for range ceilingTrials {
		offered, received, err := r.maxRateTrial(ctx, size, r.opts.Method.Search.Duration)
		if err != nil {
			return 0, err
		}
		if r.topo == nil {
			received = offered
		}
		best = max(best, received)
	}
	if !(best >= 100) {
		return 0, fmt.Errorf("the traffic side moved %.0f frames per second", best)
	}
	fmt.Fprintf(r.opts.Out, "# %s: the generator's ceiling is %.0f fps (offered and received at no rate limit, %v, %s)\n",
		size, best, r.opts.Method.Search.Duration, map[bool]string{true: "through the direct path", false: "offered through the external DUT"}[r.topo != nil])
	return best, nil
}

// maxRateTrial sends frames of size at no rate limit for d and returns the
// rates offered and received, per second of the loop's send time.
func (r *vethRun) maxRateTrial(ctx context.Context, size FrameSize, d time.Duration) (offered, received float64, err error) {
	a, err := r.arm(size, 0, 0)
	if err != nil {
		return 0, 0, err
	}
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		if err := wait(ctx, stop.Add(time.Second), time.Millisecond); err != nil {
			r.close()
			return 0, 0, err
		}
	}
	a.gen.StopSending()
	closed, err := r.finish(ctx, a, time.Now().Add(time.Second))
	if err != nil {
		return 0, 0, err
	}
	secs := closed.doneAt.Sub(closed.startAt).Seconds()
	if !(secs > 0) {
		return 0, 0, errors.New("the generator sent nothing")
	}
	return float64(a.gen.Stats().Sent) / secs, float64(closed.received) / secs, nil
}

// warmUp offers a few frames until some arrive: the DUT is forwarding.
func (r *vethRun) warmUp(ctx context.Context, size FrameSize) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		res, err := r.Trial(ctx, TrialSpec{Size: size, Rate: 10000, Frames: 64})
		if err != nil {
			return err
		}
		if res.Received > 0 {
			return nil
		}
	}
	return errors.New("no frame of the warm-up arrived in 10 s")
}

// Trial implements Trialer over the veth topology: a fresh generator
// sends spec.Count() frames of one flow whose source port is new to this
// trial, at spec.Rate; the trial ends once the generator is done and the
// receiver has seen every frame or none for drainQuiet.
func (r *vethRun) Trial(ctx context.Context, spec TrialSpec) (TrialResult, error) {
	refused := r.tp.Port(0).Stats().TxDropped
	a, err := r.arm(spec.Size, spec.Rate, spec.Count())
	if err != nil {
		return TrialResult{}, err
	}
	want := time.Duration(float64(spec.Count()) / spec.Rate * float64(time.Second))
	closed, err := r.finish(ctx, a, time.Now().Add(5*want+2*time.Second))
	if err != nil {
		return TrialResult{}, err
	}
	// The loop's clock: from the first poll (whose burst goes at once, the
	// rate limiter's allowance) to the last frame handed over.
	res := TrialResult{Sent: a.gen.Stats().Sent, Received: closed.received, SendTime: closed.doneAt.Sub(closed.startAt),
		Refused: r.tp.Port(0).Stats().TxDropped - refused}
	if spec.Latency {
		res.Latency = &closed.lat
	}
	return res, nil
}

// arm hands the loop a fresh generator of count frames (0: until stopped)
// of one flow whose source port is new to this trial, at rate (0: as fast
// as the port takes them).
func (r *vethRun) arm(size FrameSize, rate float64, count uint64) (*armed, error) {
	sizes, err := sizesOf(size)
	if err != nil {
		return nil, err
	}
	r.trial++
	srcPort := uint16(traffic.BaseSrcPort + r.trial%4096)
	gen, err := traffic.NewGenerator(traffic.GeneratorOptions{
		Port: r.tp.Port(0), Pool: r.tp.Pool(), Cache: r.tp.Cache(0), Sizes: sizes, Rate: rate, Count: count,
		SrcMAC: r.srcMAC, DstMAC: r.dstMAC,
		Addressing: &traffic.Addressing{SrcPort: srcPort, SrcIP: traffic.IPRange{Lo: r.srcIP, Hi: r.srcIP}, DstIP: traffic.IPRange{Lo: r.dstIP, Hi: r.dstIP}},
	})
	if err != nil {
		return nil, err
	}
	a := &armed{gen: gen, srcPort: srcPort}
	r.stage.next.Store(a)
	return a, nil
}

// finish waits until a's generator is done (stopping it at bound: it
// could not keep its rate, and its send time says so), drains the
// receiver and closes the trial.
func (r *vethRun) finish(ctx context.Context, a *armed, bound time.Time) (*armed, error) {
	gen := a.gen
	for !gen.Done() {
		if err := wait(ctx, bound, time.Millisecond); err != nil {
			if ctx.Err() != nil {
				r.close()
				return nil, err
			}
			// The generator cannot keep the rate (its CPU is taken, or
			// the DUT's side holds the veth back): end the trial with what
			// it sent; its send time says so (a held-back trial).
			gen.StopSending()
			bound = time.Now().Add(time.Second)
		}
	}
	sent := gen.Stats().Sent
	// Drain: stop when every frame is in, or none came for drainQuiet —
	// longer than the worst latency seen on a loaded machine (tens of
	// ms), or late frames would count as lost.
	const drainQuiet = 200 * time.Millisecond
	last, since := a.rx.Load(), time.Now()
	for a.rx.Load() < sent && time.Since(since) < drainQuiet {
		if err := wait(ctx, time.Now().Add(time.Second), time.Millisecond); err != nil {
			r.close()
			return nil, err
		}
		if n := a.rx.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	return r.close(), nil
}

// close asks the loop to close the current trial and waits for it.
func (r *vethRun) close() *armed {
	r.stage.closeReq.Store(true)
	return <-r.stage.closed
}

// wait sleeps step unless ctx ended or deadline passed.
func wait(ctx context.Context, deadline time.Time, step time.Duration) error {
	if time.Now().After(deadline) {
		return errors.New("timed out")
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(step):
		return nil
	}
}

// sizesOf turns an on-wire size into the generator's (without FCS).
func sizesOf(s FrameSize) (traffic.Sizes, error) {
	if s == IMIX {
		return traffic.ParseSizes("imix", traffic.MaxFrame)
	}
	return traffic.FixedSize(int(s) - 4), nil
}

// ratios prints the RATIO lines and BENCH-SUMMARY and records them.
func (r *vethRun) ratios(rep *Report, results map[string]*Result) {
	out := report.New(r.opts.Out)
	add := func(x report.Ratio) {
		out.Add(x)
		rep.Ratios = append(rep.Ratios, RatioLine{Name: x.Name, Value: x.Value, Goal: fmt.Sprintf("%s %g", x.Op, x.Target), Pass: x.Pass()})
	}
	ndr := func(d string, s FrameSize) (float64, string) {
		if res := results[d]; res != nil {
			if sr := res.Size(s); sr != nil {
				return sr.NDR, sr.NDRText()
			}
		}
		return 0, "0"
	}
	ratio := func(name string, a, b float64, op report.Op, target float64, detail string) {
		v := math.NaN()
		if b > 0 {
			v = a / b
		}
		add(report.Ratio{Name: name, Value: v, Op: op, Target: target, Detail: detail})
	}
	for _, s := range []FrameSize{64, 1518} {
		if !slices.Contains(r.opts.Method.Sizes, s) {
			continue
		}
		f, fs := ndr(DUTFwd, s)
		if results[DUTTestpmd] != nil {
			tp, tps := ndr(DUTTestpmd, s)
			ratio(fmt.Sprintf("ndr_%db_fwd_vs_testpmd", int(s)), f, tp, report.AtLeast, 1, fmt.Sprintf("NDR fwd %s fps, testpmd %s fps", fs, tps))
		}
		if s == 64 && results[DUTKernel] != nil {
			k, ks := ndr(DUTKernel, s)
			ratio("ndr_64b_fwd_vs_kernel_bridge", f, k, report.AtLeast, 2, fmt.Sprintf("NDR fwd %s fps, Linux bridge %s fps", fs, ks))
		}
	}
	if res := results[DUTFwd]; res != nil {
		if sr := res.Size(r.opts.Method.RepeatSize); sr != nil && len(sr.Searches) > 1 {
			var n []string
			for _, s := range sr.Searches {
				x := fmt.Sprintf("%.0f", s.NDR())
				if s.GeneratorLimited && s.Goals[0].AtMax || sr.Ceiling > 0 && s.NDR() >= sr.Ceiling*(1-r.opts.Method.Search.Width) {
					x = "≥ " + x + " (generator-limited)"
				}
				n = append(n, x)
			}
			add(report.Ratio{Name: "search_repeatability", Value: sr.Repeatability, Op: report.AtMost, Target: 1.10,
				Detail: fmt.Sprintf("fwd %s NDR of %d searches: %s fps", sr.Size, len(sr.Searches), strings.Join(n, ", "))})
		}
	}
	out.Summary()
}
