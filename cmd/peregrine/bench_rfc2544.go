package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/bench/rfc2544"
	"github.com/peregrine-net/peregrine/internal/units"
)

// rfc2544Config is `peregrine bench rfc2544`'s flags.
type rfc2544Config struct {
	duration, initial    time.Duration
	width, pdrLoss       float64
	exceed, sumFactor    float64
	maxTrials, repeats   int
	maxRate              string
	sizes, duts          string
	measures             string
	burstTrials          int
	burstDuration        time.Duration
	reportPath, jsonPath string
	prefix               string
	file                 string
	txPort, rxPort       string
	dstMAC               string
	latencyLoads         string
	lossLoads            string
	format               string

	// Parsed by check.
	sizeList    []rfc2544.FrameSize
	dutList     []string
	measureList []rfc2544.Measure
	rate        units.Rate
	latLoads    []float64
	lossList    []float64
	mac         net.HardwareAddr
	// origin says which values came from -c FILE, for the errors.
	origin flagOrigin
}

// rfc2544Fields are the fields of `bench rfc2544 -c FILE`, each a flag.
var rfc2544Fields = []fileField{
	{"duts", "duts"}, {"tx_port", "tx-port"}, {"rx_port", "rx-port"}, {"dst_mac", "dst-mac"},
	{"netns_prefix", "netns-prefix"}, {"max_rate", "max-rate"}, {"sizes", "sizes"}, {"measures", "measures"},
	{"search.trial_duration", "duration"}, {"search.initial_trial_duration", "initial-duration"},
	{"search.resolution", "width"}, {"search.pdr_loss", "pdr-loss"}, {"search.exceed_ratio", "exceed-ratio"},
	{"search.sum_factor", "sum-factor"}, {"search.max_trials", "max-trials"}, {"search.repeats", "repeats"},
	{"latency.loads_of_ndr", "latency-loads"}, {"frame_loss.loads_of_max", "loss-loads"},
	{"back_to_back.trials", "burst-trials"}, {"back_to_back.max_duration", "burst-duration"},
	{"output.markdown", "markdown"}, {"output.json", "json"}, {"output.format", "format"},
}

// load merges -c FILE into the flags the command line left alone.
func (c *rfc2544Config) load(fs *pflag.FlagSet) error {
	c.origin = flagOrigin{}
	if c.file == "" {
		return nil
	}
	o, err := loadFlagFile(fs, c.file, rfc2544Fields)
	if err != nil {
		return usage(err)
	}
	c.origin = o
	return nil
}

// parseLoads parses a list of load fractions in (0, 1].
func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, x := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || !(f > 0 && f <= 1) {
			return nil, fmt.Errorf("%q: give fractions in (0, 1], comma-separated, e.g. 0.1,0.5,0.9,1", x)
		}
		out = append(out, f)
	}
	return out, nil
}

func (c *rfc2544Config) check() error {
	var errs []error
	add := func(flag string, err error) { errs = append(errs, c.origin.fix(flag, err)) }
	c.sizeList = nil
	for _, s := range strings.Split(c.sizes, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		if s == "imix" {
			c.sizeList = append(c.sizeList, rfc2544.IMIX)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(s, "b"))
		if err != nil || n < 64 || n > 1518 {
			add("sizes", fmt.Errorf("--sizes: %q: give on-wire frame sizes 64..1518 (with FCS) or imix, e.g. 64,128,256,512,1024,1280,1518,imix", s))
			break
		}
		c.sizeList = append(c.sizeList, rfc2544.FrameSize(n))
	}
	c.dutList = nil
	for _, d := range strings.Split(c.duts, ",") {
		if d = strings.TrimSpace(d); !slices.Contains(rfc2544.DUTs, d) && d != rfc2544.DUTExternal {
			add("duts", fmt.Errorf("--duts: %q: give some of %s, or %s alone with --tx-port and --rx-port", d, strings.Join(rfc2544.DUTs, ","), rfc2544.DUTExternal))
			break
		}
		c.dutList = append(c.dutList, d)
	}
	c.measureList = nil
	for _, m := range strings.Split(c.measures, ",") {
		if m = strings.TrimSpace(m); !slices.Contains(rfc2544.AllMeasures, rfc2544.Measure(m)) {
			add("measures", fmt.Errorf("--measures: %q: give some of throughput,latency,frame-loss,back-to-back", m))
			break
		}
		c.measureList = append(c.measureList, rfc2544.Measure(m))
	}
	if slices.Contains(c.measureList, rfc2544.Latency) && !slices.Contains(c.measureList, rfc2544.Throughput) {
		add("measures", errors.New("--measures: latency is measured at fractions of NDR: add throughput"))
	}
	var r units.Rate
	var err error
	auto := c.maxRate == maxRateAuto
	if !auto {
		r, err = units.ParseRate(c.maxRate)
		if err == nil && r.IsZero() {
			err = errors.New("a zero rate offers nothing")
		}
		if err != nil {
			add("max-rate", fmt.Errorf("--max-rate %q: %w; give e.g. auto, 1mpps, 500kpps or 10gbit", c.maxRate, err))
		}
	}
	c.rate = r
	if err == nil && !auto {
		for _, size := range c.sizeList {
			if fps := r.FramesPerSecond(size.MeanBytes() + 20); fps < 100 || fps > 100e6 {
				add("max-rate", fmt.Errorf("--max-rate %q: %.0f frames/s at %s; give 100 to 100,000,000 frames per second", c.maxRate, fps, size))
				break
			}
		}
	}
	checkFloat := func(flag string, v, lo, hi float64, hint string) {
		if !(v >= lo && v <= hi) {
			add(flag, fmt.Errorf("--%s %g: give %g..%g, %s", flag, v, lo, hi, hint))
		}
	}
	checkFloat("width", c.width, 1e-4, 0.25, "a relative resolution (0.005 is 0.5 %)")
	checkFloat("pdr-loss", c.pdrLoss, 1e-6, 0.5, "the loss ratio PDR tolerates (0.005 is 0.5 %)")
	checkFloat("exceed-ratio", c.exceed, 0, 0.99, "the share of a load's trial time that may fail (0.5: the majority decides)")
	checkFloat("sum-factor", c.sumFactor, 1, 100, "trial durations of evidence a load needs")
	if c.initial > c.duration {
		add("initial-duration", fmt.Errorf("--initial-duration %v: at most %s %v", c.initial, c.origin.name("duration"), c.duration))
	}
	if c.reportPath == "" {
		add("markdown", errors.New("--markdown: name the report to write (e.g. rfc2544.md)"))
	}
	if c.jsonPath == "" {
		add("json", errors.New("--json: name the JSON result to write (e.g. rfc2544.json)"))
	}
	add("duration", checkPositiveDuration("duration", c.duration, time.Millisecond))
	add("initial-duration", checkDuration("initial-duration", c.initial, "--duration / 8"))
	add("burst-duration", checkDuration("burst-duration", c.burstDuration, ""))
	add("max-trials", checkInt("max-trials", c.maxTrials, 10, 100000))
	add("repeats", checkInt("repeats", c.repeats, 1, 20))
	add("burst-trials", checkInt("burst-trials", c.burstTrials, 1, 100))
	if len(c.prefix) > 12 {
		add("netns-prefix", fmt.Errorf("--netns-prefix %q: at most 12 characters", c.prefix))
	}
	var err2 error
	if c.latLoads, err2 = parseLoads(c.latencyLoads); err2 != nil {
		add("latency-loads", fmt.Errorf("--latency-loads %w", err2))
	}
	if c.lossList, err2 = parseLoads(c.lossLoads); err2 != nil {
		add("loss-loads", fmt.Errorf("--loss-loads %w", err2))
	}
	add("format", checkFormat(c.format))
	external := slices.Contains(c.dutList, rfc2544.DUTExternal)
	switch {
	case external && len(c.dutList) > 1:
		add("duts", fmt.Errorf("--duts %s: the external DUT runs alone (its ports are yours; the others' are the topology this command creates)", c.duts))
	case external && (c.txPort == "" || c.rxPort == ""):
		add("duts", fmt.Errorf("--duts %s needs --tx-port and --rx-port: the ports on either side of your device, e.g. --tx-port afxdp:eth1 --rx-port afxdp:eth2", rfc2544.DUTExternal))
	case !external && (c.txPort != "" || c.rxPort != "" || c.dstMAC != ""):
		for _, fl := range []string{"tx-port", "rx-port", "dst-mac"} {
			if v := map[string]string{"tx-port": c.txPort, "rx-port": c.rxPort, "dst-mac": c.dstMAC}[fl]; v != "" {
				add(fl, fmt.Errorf("--%s %s: name the ports around your own device with --duts %s; %s use the topology this command creates", fl, v, rfc2544.DUTExternal, c.duts))
				break
			}
		}
	case external:
		add("tx-port", checkPorts("tx-port", c.txPort))
		add("rx-port", checkPorts("rx-port", c.rxPort))
		add("rx-port", samePorts("tx-port", c.txPort, "rx-port", c.rxPort))
	}
	c.mac = nil
	if c.dstMAC != "" {
		m, err := net.ParseMAC(c.dstMAC)
		if err != nil || len(m) != 6 {
			add("dst-mac", fmt.Errorf("--dst-mac %q: give an Ethernet address, e.g. 02:00:00:00:00:02 (your device's, when it routes)", c.dstMAC))
		}
		c.mac = m
	}
	return usage(errs...)
}

// maxRateAuto is --max-rate's value for the generator's ceiling.
const maxRateAuto = "auto"

func (c *rfc2544Config) options(out io.Writer) rfc2544.VethOptions {
	rate := c.rate
	lineRate := func(s rfc2544.FrameSize) float64 { return rate.FramesPerSecond(s.MeanBytes() + 20) }
	if c.maxRate == maxRateAuto {
		// Zero: each size's ceiling, measured before its DUTs.
		lineRate = nil
	}
	return rfc2544.VethOptions{
		Out: out, Repeats: c.repeats, DUTs: c.dutList, Prefix: c.prefix,
		TxPort: c.txPort, RxPort: c.rxPort, DstMAC: c.mac,
		MaxRate: rate.FramesPerSecond(84), // checked for range; each size's own is below
		Method: rfc2544.Options{
			Search: rfc2544.SearchOptions{Duration: c.duration, InitialDuration: c.initial, Width: c.width, PDRLoss: c.pdrLoss,
				ExceedRatio: c.exceed, SumFactor: c.sumFactor, MaxTrials: c.maxTrials},
			// A bit rate is a line rate: frames of the size plus the 20 B
			// of preamble and inter-frame gap per frame.
			MaxRate:       lineRate,
			Sizes:         c.sizeList,
			Measures:      c.measureList,
			BurstTrials:   c.burstTrials,
			BurstDuration: c.burstDuration,
			LatencyLoads:  c.latLoads,
			LossLoads:     c.lossList,
		},
	}
}

// rfc2544Columns are the CSV columns of --format csv: a trial's, then a
// result's (one per DUT and size), then the summary's.
var rfc2544Columns = []string{"dut", "size", "goal", "phase", "rate_fps", "offered_fps", "held_back", "duration_s", "sent", "received", "loss_ratio",
	"ndr_fps", "ndr_at_least_fps", "pdr_fps", "generator_limited", "pass", "fail"}

// runRFC2544 runs the benchmark: the text goes to out, or with --format
// jsonl|csv to errOut while out gets a record per trial, per DUT and size,
// and the summary, each with every parameter.
func (c *rfc2544Config) run(ctx context.Context, out, errOut io.Writer) error {
	opts := c.options(out)
	var stream *recordStream
	if streamed(c.format) {
		opts.Out = errOut
		// The parameters the run will record, defaults filled in: every
		// record carries them.
		v, err := rfc2544.Validated(opts)
		if err != nil {
			return err
		}
		params := rfc2544.Parameters(v)
		params["max_rate"] = c.maxRate
		stream = newRecordStream(c.format, out, params, rfc2544Columns...)
		var werr error
		opts.OnTrial = func(dut string, size rfc2544.FrameSize, t rfc2544.TrialRecord) {
			if werr == nil {
				werr = stream.write("trial", map[string]any{"dut": dut, "size": size.String(), "goal": t.Goal, "phase": t.Phase,
					"rate_fps": t.Rate, "offered_fps": t.Offered, "held_back": t.HeldBack, "duration_s": t.Duration.Seconds(), "sent": t.Sent,
					"received": t.Received, "loss_ratio": t.Loss})
			}
		}
		defer func() {
			if werr != nil {
				fmt.Fprintf(errOut, "# --format %s: writing: %v\n", c.format, werr)
			}
		}()
	}
	rep, err := rfc2544.RunVeth(ctx, opts)
	if err != nil {
		return err
	}
	rep.Parameters["max_rate"] = c.maxRate
	if err := writeRFC2544(rep, c.reportPath, c.jsonPath); err != nil {
		return err
	}
	for _, res := range rep.Results {
		for _, sz := range res.Sizes {
			f := map[string]any{"dut": res.DUT, "size": sz.Size.String(), "ndr_fps": sz.NDR, "pdr_fps": sz.PDR, "generator_limited": sz.GeneratorLimited}
			if sz.GeneratorLimited {
				// A lower bound, not the DUT's NDR.
				f["ndr_fps"], f["ndr_at_least_fps"] = nil, sz.NDR
			}
			if err := stream.write("result", f); err != nil {
				return err
			}
		}
	}
	var pass, fail int
	for _, r := range rep.Ratios {
		if r.Pass {
			pass++
		} else {
			fail++
		}
	}
	return stream.write("summary", map[string]any{"pass": pass, "fail": fail, "ratios": rep.Ratios})
}

func newBenchRFC2544Command() *cobra.Command {
	var c rfc2544Config
	cmd := &cobra.Command{
		Use:   "rfc2544",
		Short: "RFC 2544 with the NDR/PDR search against the Linux bridge, peregrine fwd and dpdk-testpmd over veth, same run",
		Long: `rfc2544 builds gen -> fwd -> sink across three network namespaces (veth,
198.18.0.0/15) and measures each device under test in the fwd namespace:
the kernel (a Linux bridge), peregrine fwd (AF_XDP io forwarding, one loop
on CPU 1) and dpdk-testpmd (io over net_af_xdp, when installed), size by
size, alternating. Traffic is peregrine's generator and receiver (AF_XDP,
one loop on CPU 0), one flow per trial.

Before each size the generator's ceiling is measured: frames at no rate
limit through a native XDP redirect between fwd's two ends, no DUT in the
way (with --duts external: what it offers through your device). --max-rate
auto offers up to it; a DUT whose NDR reaches it is reported as ">= ceiling
(generator-limited)", never as its NDR. A trial whose generator offered
less than 95 % of its rate (its CPU was taken) decides nothing and is run
again.

--duts external measures your own device instead: nothing is created, the
traffic leaves by --tx-port and comes back on --rx-port (any port spec),
198.18.0.1 -> 198.19.0.1, to --rx-port's MAC or --dst-mac. --dut is --duts.
-c FILE sets every flag from YAML (configs/bench/rfc2544.yaml lists them);
a flag given on the command line wins. --format jsonl|csv streams every
trial, each DUT and size's result and the summary on stdout, each with
every parameter (the text then goes to stderr).

For each frame size (on the wire, with FCS; imix is 7:4:1 of 64/594/1518):
  throughput    NDR and PDR by an MLRsearch-style search: trials lengthen
                from --initial-duration to --duration while the bounds narrow
                to --width; a load fails only when more than --exceed-ratio of
                its trial time lost too much, so one noisy trial decides nothing
  latency       min/avg/p50/p99/p99.9/max at 10, 50, 90, 100 % of NDR
  frame-loss    loss ratio at 10 % to 100 % of --max-rate (or the ceiling)
  back-to-back  longest burst at --max-rate (or the ceiling) with no loss

peregrine fwd searches --repeats times at 64 B. Writes --markdown (the
report, with text plots) and --json (every parameter, every trial), then
prints

  RATIO ndr_64b_fwd_vs_testpmd        (goal >= 1; also 1518 B)
  RATIO ndr_64b_fwd_vs_kernel_bridge  (goal >= 2)
  RATIO search_repeatability          (goal <= 1.10)
  BENCH-SUMMARY pass=<n> fail=<m>

Needs root; dpdk-testpmd from hack/install-deps.sh. With the defaults a
run takes tens of minutes (each DUT and size: a few dozen trials of up to
--duration, 14 more for latency and loss, and the burst searches). The
namespaces are deleted at the end, also on error or SIGINT/SIGTERM.`,
		Example: `  sudo peregrine bench rfc2544
  sudo peregrine bench rfc2544 --sizes 64,1518 --duration 2s --max-rate 2mpps
  sudo peregrine bench rfc2544 --duts fwd --sizes 64 --measures throughput --duration 100ms   # a quick look
  sudo peregrine bench rfc2544 --dut external --tx-port afxdp:eth1 --rx-port afxdp:eth2 --format jsonl
  sudo peregrine bench rfc2544 -c configs/bench/rfc2544.yaml`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.load(cmd.Flags()); err != nil {
				return err
			}
			return c.check()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.run(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&c.file, "config", "c", "", "YAML file of these settings (configs/rfc2544.yaml); a flag given on the command line wins over it")
	f.StringVar(&c.txPort, "tx-port", "", "with --duts external: the port the traffic leaves by, any port spec (afxdp:eth1, afpacket:eth1, ...)")
	f.StringVar(&c.rxPort, "rx-port", "", "with --duts external: the port it comes back on from your device")
	f.StringVar(&c.dstMAC, "dst-mac", "", "with --duts external: destination MAC of the frames (default --rx-port's: right for a bridge or switch; give your router's)")
	f.StringVar(&c.latencyLoads, "latency-loads", "0.1,0.5,0.9,1", "latency trials at these fractions of NDR")
	f.StringVar(&c.lossLoads, "loss-loads", "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1", "frame loss trials at these fractions of --max-rate")
	f.StringVar(&c.format, "format", formatText, "text, or stream every trial, each DUT and size's result and the summary as jsonl or csv on stdout, each record with every parameter (the text goes to stderr)")
	// --dut external reads as the brief way to name one device.
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "dut" {
			name = "duts"
		}
		return pflag.NormalizedName(name)
	})
	f.DurationVar(&c.duration, "duration", rfc2544.DefaultDuration, "final trial duration (the confirmation trials)")
	f.DurationVar(&c.initial, "initial-duration", 0, "first phase's trial duration (0: --duration / 8)")
	f.Float64Var(&c.width, "width", rfc2544.DefaultWidth, "resolution: the search ends when the bounds are this close, relative")
	f.Float64Var(&c.pdrLoss, "pdr-loss", rfc2544.DefaultPDRLoss, "loss ratio the partial-drop rate tolerates")
	f.Float64Var(&c.exceed, "exceed-ratio", rfc2544.DefaultExceedRatio, "share of a load's trial time that may exceed the loss goal")
	f.Float64Var(&c.sumFactor, "sum-factor", rfc2544.DefaultSumFactor, "trial time a load needs to be decided, in trial durations")
	f.IntVar(&c.maxTrials, "max-trials", rfc2544.DefaultMaxTrials, "give up a search after this many trials")
	f.IntVar(&c.repeats, "repeats", 3, "searches of peregrine fwd at 64 B, for search_repeatability")
	f.StringVar(&c.maxRate, "max-rate", maxRateAuto, "highest load offered: auto (the generator's ceiling, measured per size with no DUT in the way), frames per second (1mpps) or a line rate (10gbit, per size with 20 B of preamble and gap)")
	f.StringVar(&c.sizes, "sizes", "64,128,256,512,1024,1280,1518,imix", "frame sizes on the wire (with FCS), comma-separated, or imix")
	f.StringVar(&c.duts, "duts", strings.Join(rfc2544.DUTs, ","), "devices under test, comma-separated")
	f.StringVar(&c.measures, "measures", "throughput,latency,frame-loss,back-to-back", "measurements, comma-separated")
	f.IntVar(&c.burstTrials, "burst-trials", rfc2544.DefaultBurstTrials, "back-to-back searches averaged")
	f.DurationVar(&c.burstDuration, "burst-duration", 2*time.Second, "longest back-to-back burst tried, in time at --max-rate")
	f.StringVar(&c.reportPath, "markdown", "rfc2544.md", "Markdown report to write")
	f.StringVar(&c.jsonPath, "json", "rfc2544.json", "JSON result to write (every parameter and trial)")
	f.StringVar(&c.prefix, "netns-prefix", "", "name the namespaces PREFIX-gen, PREFIX-fwd, PREFIX-sink (default pg2544<pid>)")
	return cmd
}

func writeRFC2544(rep *rfc2544.Report, mdPath, jsonPath string) error {
	md, err := os.Create(mdPath)
	if err != nil {
		return fmt.Errorf("--markdown: %w", err)
	}
	err = errors.Join(rep.WriteMarkdown(md), md.Close())
	js, jerr := os.Create(jsonPath)
	if jerr != nil {
		return errors.Join(err, fmt.Errorf("--json: %w", jerr))
	}
	return errors.Join(err, rep.WriteJSON(js), js.Close())
}
