package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/bench/rxflows"
)

func newBenchRxFlowsCommand() *cobra.Command {
	var frames, rounds, flows int
	cmd := &cobra.Command{
		Use:   "rxflows",
		Short: "What gen --rx --per-flow costs per frame against the plain gen --rx, at 10,000 flows",
		Long: `rxflows measures, in one run on this machine, 64-byte stamped frames of
consecutive flows in bursts of 32 from a generator through a mem pair into the
receiver of gen --rx: plain, with --per-flow, and with --per-flow
--per-flow-histograms. Only the receivers' polls are timed.

  gen_rx_per_flow_cost_vs_plain     per-flow receiver ns/frame / plain receiver ns/frame (goal <= 1.2)
  gen_rx_per_flow_allocs_per_frame  heap allocations per frame with per-flow statistics, either mode (goal 0)

It prints each receiver's ns/frame as a FIGURE line, and the histogram
mode's cost against plain as FIGURE gen_rx_per_flow_histograms_cost_vs_plain
(for information: no goal). A round measures the three receivers back to
back (in rotating order) and gives one ratio of each; a RATIO is the median
of the rounds' ratios, which a machine whose speed drifts over seconds moves
less than a ratio of each receiver's fastest. Takes seconds.`,
		Example: `  peregrine bench rxflows
  peregrine bench rxflows --frames 65536 --rounds 1   # a quick look`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return usage(checkInt("frames", frames, 32, 1<<30), checkInt("rounds", rounds, 1, 100), checkInt("flows", flows, 1, 65535))
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err := rxflows.Run(ctx, rxflows.Options{Out: cmd.OutOrStdout(), Frames: frames, Rounds: rounds, Flows: flows})
			return err
		},
	}
	cmd.Flags().IntVar(&frames, "frames", 1<<20, "frames per measurement")
	cmd.Flags().IntVar(&rounds, "rounds", 9, "rounds of the three receivers, each giving a ratio; the median is reported")
	cmd.Flags().IntVar(&flows, "flows", 10000, "flows (UDP source ports) the frames cycle through")
	return cmd
}
