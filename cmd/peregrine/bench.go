package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/bench/foundation"
	"github.com/peregrine-net/peregrine/core/lcore"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench SCENARIO",
		Short: "Run a benchmark scenario that compares peregrine with baselines measured in the same run",
		Long: `bench runs a scripted scenario and prints one line per comparison,

  RATIO <name> <value> goal <op> <target> <PASS|FAIL>

each followed by a comment line with the raw figures, and last

  BENCH-SUMMARY pass=<n> fail=<m>

It exits 0 when the scenario ran, whatever the verdicts (read the summary);
non-zero when it could not run.`,
	}
	cmd.AddCommand(newBenchFoundationCommand())
	return cmd
}

func newBenchFoundationCommand() *cobra.Command {
	var (
		cpus    string
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			cpuList, err := lcore.ParseCPUList(cpus)
			if err != nil {
				return fmt.Errorf("--cpus: %w", err)
			}
			if len(cpuList) != 2 {
				return fmt.Errorf("--cpus %s: name exactly two CPUs, e.g. 0,1", cpus)
			}
			if install {
				ensureDPDK(ctx, cmd.ErrOrStderr())
			}
			_, _, err = foundation.Run(ctx, foundation.Options{Out: cmd.OutOrStdout(), CPUs: cpuList, FwdDuration: fwdDur})
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
