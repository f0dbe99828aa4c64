package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	benchmcsq "github.com/peregrine-net/peregrine/bench/mcsq"
)

func newBenchMCSQCommand() *cobra.Command {
	var (
		duration   time.Duration
		goroutines []int
		targets    int
		sqs        int
		rounds     int
	)
	cmd := &cobra.Command{
		Use:   "mcsq",
		Short: "multi-channel send queue (64 DC SQs) vs one connection per target, same network, same run",
		Long: `mcsq measures the multi-channel send queue (sched/mcsq) against a naive design
built in the same run (one RC connection per target, all kept open), in memory,
an initiator and 16 target hosts on the fabric emulator's switch:

  mcsq_vs_per_target_ops_gN_burst8     WRs/s, N posting goroutines, 1,000 targets,
                                       bursts of 8 WRs per target             (goal >= 1.0)
  mcsq_vs_per_target_ops_gN_random     a target drawn per WR                 (printed)
  mcsq_vs_per_target_bytes_per_target  connection state per target           (goal <= 0.10)
  dc_10k_targets_complete              10,000 targets via 64 DC SQs, all WRs
                                       completed (virtual time)              (goal = 1)
  mcsq_lookahead_vs_strict_virtual_X   virtual time, queue kept full: the
                                       distributor's plain wait (StrictHOL) /
                                       its lookahead (exact)                 (goal >= 1.0)
  ordered_cq_cost_vs_unordered         CPU ns per WR, ordered CQ / unordered  (goal <= 1.20)
  allocs_per_wr                        heap allocations per WR, steady state (goal = 0)`,
		Example: `  peregrine bench mcsq
  peregrine bench mcsq --duration 200ms --goroutines 1,4`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if err := usage(
				checkPositiveDuration("duration", duration, 10*time.Millisecond),
				checkInt("targets", targets, 1, 100000),
				checkInt("dc-sqs", sqs, 1, 4096),
				checkInt("rounds", rounds, 1, 100),
			); err != nil {
				return err
			}
			if len(goroutines) == 0 {
				return usage(fmt.Errorf("--goroutines: give at least one count, e.g. 1,4"))
			}
			for _, g := range goroutines {
				if err := usage(checkInt("goroutines", g, 1, 1024)); err != nil {
					return err
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := benchmcsq.Run(ctx, benchmcsq.Options{Out: cmd.OutOrStdout(), Duration: duration,
				Goroutines: goroutines, Targets: targets, DCSQs: sqs, Rounds: rounds})
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&duration, "duration", benchmcsq.DefaultDuration, "time of each throughput measurement")
	f.IntSliceVar(&goroutines, "goroutines", []int{1, 4, 16, 64}, "posting goroutine counts")
	f.IntVar(&targets, "targets", benchmcsq.DefaultTargets, "targets of the throughput runs")
	f.IntVar(&sqs, "dc-sqs", benchmcsq.DefaultDCSQs, "DC SQs of the MCSQ")
	f.IntVar(&rounds, "rounds", 3, "alternating rounds per real-clock comparison (the ratio is of the medians)")
	return cmd
}
