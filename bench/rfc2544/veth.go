package rfc2544

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
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

// Defaults of VethOptions.
const (
	DefaultVethMaxRate = 1e6
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
	// second (default 1 Mfps: about what one AF_XDP copy-mode generator
	// sends over veth).
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
	if o.MaxRate == 0 {
		o.MaxRate = DefaultVethMaxRate
	}
	if !(o.MaxRate >= 100) || o.MaxRate > 100e6 {
		return fmt.Errorf("rfc2544: MaxRate %g: give 100 to 1e8 frames per second", o.MaxRate)
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
	m.Search.MaxRate = o.MaxRate
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
		for _, d := range opts.DUTs {
			res, err := r.measure(ctx, d, size)
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
		"duts": strings.Join(opts.DUTs, ","), "sizes": strings.Join(sizes, ","), "max_rate_fps": opts.MaxRate,
		"trial_duration": s.Duration.String(), "initial_trial_duration": s.InitialDuration.String(), "width": s.Width,
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

// measure sets DUT d up, runs the method at one size and tears it down.
func (r *vethRun) measure(ctx context.Context, d string, size FrameSize) (*Result, error) {
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
	m.Repeats = 1
	if d == DUTFwd {
		m.Repeats = r.opts.Repeats
	}
	m.Progress = func(s string) { say("%s", s) }
	if on := r.opts.OnTrial; on != nil {
		m.Search.OnTrial = func(t TrialRecord) { on(d, size, t) }
	}
	return Run(ctx, r, d, m)
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
	sizes, err := sizesOf(spec.Size)
	if err != nil {
		return TrialResult{}, err
	}
	r.trial++
	srcPort := uint16(traffic.BaseSrcPort + r.trial%4096)
	gen, err := traffic.NewGenerator(traffic.GeneratorOptions{
		Port: r.tp.Port(0), Pool: r.tp.Pool(), Cache: r.tp.Cache(0), Sizes: sizes, Rate: spec.Rate, Count: spec.Count(),
		SrcMAC: r.srcMAC, DstMAC: r.dstMAC,
		Addressing: &traffic.Addressing{SrcPort: srcPort, SrcIP: traffic.IPRange{Lo: r.srcIP, Hi: r.srcIP}, DstIP: traffic.IPRange{Lo: r.dstIP, Hi: r.dstIP}},
	})
	if err != nil {
		return TrialResult{}, err
	}
	a := &armed{gen: gen, srcPort: srcPort}
	r.stage.next.Store(a)
	want := time.Duration(float64(spec.Count()) / spec.Rate * float64(time.Second))
	bound := time.Now().Add(5*want + 2*time.Second)
	for !gen.Done() {
		if err := wait(ctx, bound, time.Millisecond); err != nil {
			if ctx.Err() != nil {
				r.close()
				return TrialResult{}, err
			}
			// The generator cannot keep the rate (its CPU is taken, or
			// the DUT's side holds the veth back): end the trial with what
			// it sent; its send time says so (GeneratorLimited).
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
			return TrialResult{}, err
		}
		if n := a.rx.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	closed := r.close()
	// The loop's clock: from the first poll (whose burst goes at once, the
	// rate limiter's allowance) to the last frame handed over.
	res := TrialResult{Sent: sent, Received: closed.received, SendTime: closed.doneAt.Sub(closed.startAt)}
	if spec.Latency {
		res.Latency = &closed.lat
	}
	return res, nil
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
	ndr := func(d string, s FrameSize) float64 {
		if res := results[d]; res != nil {
			if sr := res.Size(s); sr != nil {
				return sr.NDR
			}
		}
		return 0
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
		if results[DUTTestpmd] != nil {
			f, tp := ndr(DUTFwd, s), ndr(DUTTestpmd, s)
			ratio(fmt.Sprintf("ndr_%db_fwd_vs_testpmd", int(s)), f, tp, report.AtLeast, 1, fmt.Sprintf("NDR fwd %.0f fps, testpmd %.0f fps", f, tp))
		}
		if s == 64 && results[DUTKernel] != nil {
			f, k := ndr(DUTFwd, s), ndr(DUTKernel, s)
			ratio("ndr_64b_fwd_vs_kernel_bridge", f, k, report.AtLeast, 2, fmt.Sprintf("NDR fwd %.0f fps, Linux bridge %.0f fps", f, k))
		}
	}
	if res := results[DUTFwd]; res != nil {
		if sr := res.Size(r.opts.Method.RepeatSize); sr != nil && len(sr.Searches) > 1 {
			var n []string
			for _, s := range sr.Searches {
				n = append(n, fmt.Sprintf("%.0f", s.NDR()))
			}
			add(report.Ratio{Name: "search_repeatability", Value: sr.Repeatability, Op: report.AtMost, Target: 1.10,
				Detail: fmt.Sprintf("fwd %s NDR of %d searches: %s fps", sr.Size, len(sr.Searches), strings.Join(n, ", "))})
		}
	}
	out.Summary()
}
