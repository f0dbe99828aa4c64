package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

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

	// Parsed by check.
	sizeList    []rfc2544.FrameSize
	dutList     []string
	measureList []rfc2544.Measure
	rate        units.Rate
}

func (c *rfc2544Config) check() error {
	var errs []error
	c.sizeList = nil
	for _, s := range strings.Split(c.sizes, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		if s == "imix" {
			c.sizeList = append(c.sizeList, rfc2544.IMIX)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(s, "b"))
		if err != nil || n < 64 || n > 1518 {
			errs = append(errs, fmt.Errorf("--sizes: %q: give on-wire frame sizes 64..1518 (with FCS) or imix, e.g. 64,128,256,512,1024,1280,1518,imix", s))
			break
		}
		c.sizeList = append(c.sizeList, rfc2544.FrameSize(n))
	}
	c.dutList = nil
	for _, d := range strings.Split(c.duts, ",") {
		if d = strings.TrimSpace(d); !slices.Contains(rfc2544.DUTs, d) {
			errs = append(errs, fmt.Errorf("--duts: %q: give some of %s", d, strings.Join(rfc2544.DUTs, ",")))
			break
		}
		c.dutList = append(c.dutList, d)
	}
	c.measureList = nil
	for _, m := range strings.Split(c.measures, ",") {
		if m = strings.TrimSpace(m); !slices.Contains(rfc2544.AllMeasures, rfc2544.Measure(m)) {
			errs = append(errs, fmt.Errorf("--measures: %q: give some of throughput,latency,frame-loss,back-to-back", m))
			break
		}
		c.measureList = append(c.measureList, rfc2544.Measure(m))
	}
	if slices.Contains(c.measureList, rfc2544.Latency) && !slices.Contains(c.measureList, rfc2544.Throughput) {
		errs = append(errs, errors.New("--measures: latency is measured at fractions of NDR: add throughput"))
	}
	r, err := units.ParseRate(c.maxRate)
	if err == nil && r.IsZero() {
		err = errors.New("a zero rate offers nothing")
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("--max-rate %q: %w; give e.g. 1mpps, 500kpps or 10gbit", c.maxRate, err))
	}
	c.rate = r
	if err == nil {
		for _, size := range c.sizeList {
			if fps := r.FramesPerSecond(size.MeanBytes() + 20); fps < 100 || fps > 100e6 {
				errs = append(errs, fmt.Errorf("--max-rate %q: %.0f frames/s at %s; give 100 to 100,000,000 frames per second", c.maxRate, fps, size))
				break
			}
		}
	}
	checkFloat := func(flag string, v, lo, hi float64, hint string) {
		if !(v >= lo && v <= hi) {
			errs = append(errs, fmt.Errorf("--%s %g: give %g..%g, %s", flag, v, lo, hi, hint))
		}
	}
	checkFloat("width", c.width, 1e-4, 0.25, "a relative resolution (0.005 is 0.5 %)")
	checkFloat("pdr-loss", c.pdrLoss, 1e-6, 0.5, "the loss ratio PDR tolerates (0.005 is 0.5 %)")
	checkFloat("exceed-ratio", c.exceed, 0, 0.99, "the share of a load's trial time that may fail (0.5: the majority decides)")
	checkFloat("sum-factor", c.sumFactor, 1, 100, "trial durations of evidence a load needs")
	if c.initial > c.duration {
		errs = append(errs, fmt.Errorf("--initial-duration %v: at most --duration %v", c.initial, c.duration))
	}
	if c.reportPath == "" || c.jsonPath == "" {
		errs = append(errs, errors.New("--markdown and --json: name the files to write (e.g. rfc2544.md, rfc2544.json)"))
	}
	errs = append(errs,
		checkPositiveDuration("duration", c.duration, time.Millisecond),
		checkDuration("initial-duration", c.initial, "--duration / 8"),
		checkDuration("burst-duration", c.burstDuration, ""),
		checkInt("max-trials", c.maxTrials, 10, 100000),
		checkInt("repeats", c.repeats, 1, 20),
		checkInt("burst-trials", c.burstTrials, 1, 100),
	)
	if len(c.prefix) > 12 {
		errs = append(errs, fmt.Errorf("--netns-prefix %q: at most 12 characters", c.prefix))
	}
	return usage(errs...)
}

func (c *rfc2544Config) options(cmd *cobra.Command) rfc2544.VethOptions {
	rate := c.rate
	return rfc2544.VethOptions{
		Out: cmd.OutOrStdout(), Repeats: c.repeats, DUTs: c.dutList, Prefix: c.prefix,
		MaxRate: rate.FramesPerSecond(84), // checked for range; each size's own is below
		Method: rfc2544.Options{
			Search: rfc2544.SearchOptions{Duration: c.duration, InitialDuration: c.initial, Width: c.width, PDRLoss: c.pdrLoss,
				ExceedRatio: c.exceed, SumFactor: c.sumFactor, MaxTrials: c.maxTrials},
			// A bit rate is a line rate: frames of the size plus the 20 B
			// of preamble and inter-frame gap per frame.
			MaxRate:       func(s rfc2544.FrameSize) float64 { return rate.FramesPerSecond(s.MeanBytes() + 20) },
			Sizes:         c.sizeList,
			Measures:      c.measureList,
			BurstTrials:   c.burstTrials,
			BurstDuration: c.burstDuration,
		},
	}
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

For each frame size (on the wire, with FCS; imix is 7:4:1 of 64/594/1518):
  throughput    NDR and PDR by an MLRsearch-style search: trials lengthen
                from --initial-duration to --duration while the bounds narrow
                to --width; a load fails only when more than --exceed-ratio of
                its trial time lost too much, so one noisy trial decides nothing
  latency       min/avg/p50/p99/p99.9/max at 10, 50, 90, 100 % of NDR
  frame-loss    loss ratio at 10 % to 100 % of --max-rate
  back-to-back  longest burst at --max-rate with no loss (--burst-trials)

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
  sudo peregrine bench rfc2544 --duts fwd --sizes 64 --measures throughput --duration 100ms   # a quick look`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return c.check() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := rfc2544.RunVeth(ctx, c.options(cmd))
			if err != nil {
				return err
			}
			rep.Parameters["max_rate"] = c.maxRate
			return writeRFC2544(rep, c.reportPath, c.jsonPath)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&c.duration, "duration", rfc2544.DefaultDuration, "final trial duration (the confirmation trials)")
	f.DurationVar(&c.initial, "initial-duration", 0, "first phase's trial duration (0: --duration / 8)")
	f.Float64Var(&c.width, "width", rfc2544.DefaultWidth, "resolution: the search ends when the bounds are this close, relative")
	f.Float64Var(&c.pdrLoss, "pdr-loss", rfc2544.DefaultPDRLoss, "loss ratio the partial-drop rate tolerates")
	f.Float64Var(&c.exceed, "exceed-ratio", rfc2544.DefaultExceedRatio, "share of a load's trial time that may exceed the loss goal")
	f.Float64Var(&c.sumFactor, "sum-factor", rfc2544.DefaultSumFactor, "trial time a load needs to be decided, in trial durations")
	f.IntVar(&c.maxTrials, "max-trials", rfc2544.DefaultMaxTrials, "give up a search after this many trials")
	f.IntVar(&c.repeats, "repeats", 3, "searches of peregrine fwd at 64 B, for search_repeatability")
	f.StringVar(&c.maxRate, "max-rate", "1mpps", "highest load offered: frames per second (1mpps) or a line rate (10gbit, per size with 20 B of preamble and gap)")
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
