package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/bench/foundation"
	"github.com/peregrine-net/peregrine/bench/transportcore"
	"github.com/peregrine-net/peregrine/bench/vstestpmd"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench SCENARIO",
		Short: "Run a benchmark scenario that compares peregrine with baselines measured in the same run",
		Long: `bench runs a scripted scenario and prints one line per comparison,

  RATIO <name> <value> goal <op> <target> <PASS|FAIL>

each followed by a comment line with the raw figures (SKIP instead of the
verdict, with the reason: a row that cannot run here, e.g. without root),
and last

  BENCH-SUMMARY pass=<n> fail=<m> [skip=<k>]

It exits 0 when the scenario ran, whatever the verdicts (read the summary);
non-zero when it could not run.`,
	}
	cmd.AddCommand(newBenchFoundationCommand(), newBenchTransportCoreCommand(), newBenchVsTestpmdCommand())
	cmd.AddCommand(newBenchIOICommand())
	cmd.AddCommand(newBenchDixCommand(), newBenchQPXCommand())
	cmd.AddCommand(newBenchMCSQCommand())
	cmd.AddCommand(newBenchCaptureCommand())
	cmd.AddCommand(newBenchLatencyCommand())
	cmd.AddCommand(newBenchSmallOpsCommand())
	cmd.AddCommand(newBenchScaleCommand())
	cmd.AddCommand(newBenchIntegrityCommand())
	cmd.AddCommand(newBenchRFC2544Command())
	cmd.AddCommand(newBenchRPCCommand())
	cmd.AddCommand(newBenchRxFlowsCommand())
	addReportFlag(cmd)
	// Without this a missing or misspelt scenario printed the help and
	// exited 0, as if a benchmark had run.
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		if len(args) == 0 {
			return usage(fmt.Errorf("bench needs a scenario: %s, e.g. peregrine bench foundation", strings.Join(names, ", ")))
		}
		return usage(fmt.Errorf("bench: unknown scenario %q: use %s", args[0], strings.Join(names, ", ")))
	}
	return cmd
}

func newBenchVsTestpmdCommand() *cobra.Command {
	var (
		rounds     int
		duration   time.Duration
		sizes      string
		frameSizes []int
		only       []string
		prefix     string
	)
	cmd := &cobra.Command{
		Use:   "vs-testpmd",
		Short: "AF_XDP and AF_PACKET ports over veth against dpdk-testpmd's, same topology, same run",
		Long: `vs-testpmd builds gen -> fwd -> sink across three network namespaces
(veth, 198.18.0.0/15), then measures peregrine and dpdk-testpmd (net_af_xdp,
net_af_packet) in alternating rounds on the same interfaces, CPUs,
generator and sink:

  afxdp_rxonly     receive and free while an in-kernel generator floods
  afxdp_txonly     send as fast as possible into an XDP sink
  afxdp_io         forward gen -> fwd -> sink (counted at the sink)
  afpacket_rxonly  as afxdp_rxonly over AF_PACKET
  afpacket_io      as afxdp_io over AF_PACKET

The device under test runs on CPU 1 (testpmd -l 0,1), the generator on
CPU 0. Each line's ratio is median peregrine / median testpmd; a last ratio
checks heap allocations per packet in peregrine's forwarding loop. The
namespaces are deleted at the end, also on error or SIGINT/SIGTERM.
Needs root and Debian's DPDK (hack/install-deps.sh).`,
		Example: `  sudo peregrine bench vs-testpmd
  sudo peregrine bench vs-testpmd --rounds 5 --duration 3s --sizes 64
  sudo peregrine bench vs-testpmd --only afxdp_io,afpacket_io`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var err error
			if frameSizes, err = parseByteSizes(sizes, 60, 1518); err != nil {
				return usage(fmt.Errorf("--sizes: %w", err))
			}
			return usage(
				checkInt("rounds", rounds, 1, 1000),
				checkPositiveDuration("duration", duration, 10*time.Millisecond),
			)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := vstestpmd.Run(ctx, vstestpmd.Options{
				Out: cmd.OutOrStdout(), Rounds: rounds, Duration: duration, Sizes: frameSizes,
				Comparisons: only, Prefix: prefix,
			})
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&rounds, "rounds", vstestpmd.DefaultRounds, "measurements per side and comparison, alternating peregrine/testpmd")
	f.DurationVar(&duration, "duration", vstestpmd.DefaultDuration, "forwarding time of each measurement")
	f.StringVar(&sizes, "sizes", formatInts(vstestpmd.DefaultSizes), "frame sizes without FCS, comma-separated (60..1518 bytes, e.g. 64,1518 or 1KiB)")
	f.StringSliceVar(&only, "only", nil, "run only these comparisons: "+strings.Join(vstestpmd.Comparisons(), ", "))
	f.StringVar(&prefix, "netns-prefix", "", "name the namespaces PREFIX-gen, PREFIX-fwd, PREFIX-sink (default pgvs<pid>)")
	return cmd
}

func newBenchFoundationCommand() *cobra.Command {
	var (
		cpus    string
		cpuList []int
		fwdDur  time.Duration
		install bool
	)
	cmd := &cobra.Command{
		Use:   "foundation",
		Short: "Rings, pool and io-forwarding against DPDK's ring_perf, mempool_perf and testpmd",
		Long: `foundation measures, in one run on this machine:

  rte_ring SP/SC and MP/MC bulk-32 on two cores   vs peregrine's rings
  rte_mempool cached get/put bulk-32               vs peregrine's pool cache
  testpmd io-forward over two net_null vdevs       vs peregrine's io forwarder
                                                     (null ports, and mem port pairs)

DPDK's side needs Debian's dpdk-dev (dpdk-test, dpdk-testpmd, libdpdk);
with --install (the default when root) it is installed with apt when
missing. Takes about two minutes.`,
		Example: `  peregrine bench foundation
  peregrine bench foundation --cpus 0,1 --fwd-duration 5s`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var err error
			if cpuList, err = parseCPUs("cpus", cpus); err != nil {
				return usage(err)
			}
			if len(cpuList) != 2 {
				return usage(fmt.Errorf("--cpus %s: name exactly two CPUs, e.g. 0,1", cpus))
			}
			return usage(checkPositiveDuration("fwd-duration", fwdDur, 10*time.Millisecond))
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if install {
				ensureDPDK(ctx, cmd.ErrOrStderr())
			}
			_, _, err := foundation.Run(ctx, foundation.Options{Out: cmd.OutOrStdout(), CPUs: cpuList, FwdDuration: fwdDur})
			return err
		},
	}
	cmd.Flags().StringVar(&cpus, "cpus", "0,1", "the two CPUs to measure on (DPDK's lcores 0 and 1)")
	cmd.Flags().DurationVar(&fwdDur, "fwd-duration", 3*time.Second, "length of each io-forwarding measurement")
	cmd.Flags().BoolVar(&install, "install", os.Geteuid() == 0, "install Debian's dpdk-dev with apt-get when dpdk-test is missing (needs root)")
	return cmd
}

// ensureDPDK installs Debian's DPDK tools when they are missing. Failure is
// reported, not fatal: the scenario then prints the anchors as unavailable.
func ensureDPDK(ctx context.Context, log io.Writer) {
	if _, err := exec.LookPath("dpdk-test"); err == nil {
		return
	}
	fmt.Fprintln(log, "bench: dpdk-test not found; installing dpdk-dev with apt-get")
	for _, argv := range [][]string{
		{"apt-get", "update"},
		{"apt-get", "install", "-y", "--no-install-recommends", "dpdk-dev", "pkg-config", "gcc"},
	} {
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		c.Stdout, c.Stderr = log, log
		if err := c.Run(); err != nil {
			fmt.Fprintf(log, "bench: %v failed: %v\n", argv, err)
			return
		}
	}
}

func newBenchTransportCoreCommand() *cobra.Command {
	var cpu int
	cmd := &cobra.Command{
		Use:   "transport-core",
		Short: "CAM vs Go map, simulator speed, transport RX cost vs mem-port forwarding",
		Long: `transport-core measures, in one run on this machine:

  cam lookups and delete+insert churn at 64 and 64K entries  vs map[key]uint32 with the same keys
  transport packets simulated per second on one core          (goal: at least 1 M)
  the transport's receive path per packet                     vs mem-port io forwarding per packet

Takes about a minute.`,
		Example: `  peregrine bench transport-core`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return usage(checkCPU("cpu", cpu)) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := transportcore.Run(ctx, transportcore.Options{Out: cmd.OutOrStdout(), CPU: cpu})
			return err
		},
	}
	cmd.Flags().IntVar(&cpu, "cpu", 1, "CPU for the forwarding baseline's poll loop")
	return cmd
}
