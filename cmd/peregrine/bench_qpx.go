package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	benchqpx "github.com/peregrine-net/peregrine/bench/qpx"
)

func newBenchQPXCommand() *cobra.Command {
	var passes int
	cmd := &cobra.Command{
		Use:   "qpx",
		Short: "QP translation CAM vs Go map, ICRC vs crc32, RoCEv2 stage cost vs a parse+crc32 floor",
		Long: `qpx measures, in one run on this machine:

  qpx_lookup_vs_map_64, _65536  Translate per packet vs map[uint32]int32, same QPNs, same order (goal >= 2)
  icrc_vs_crc32_ieee            RoCEv2 ICRC bytes/s vs hash/crc32 IEEE over the same bytes (goal >= 0.90)
  roce_stage_cost_vs_floor      the RoCEv2 stage per packet vs parsing + crc32 over the ICRC-covered bytes (goal <= 1.5)
  allocs_per_packet             heap allocations per packet of the stage's Poll (goal 0)

and prints the stage's Mpps per core at 64 B and 1 KiB and the cost of
retiring a QP and opening another on a full table.`,
		Example: `  peregrine bench qpx`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return usage(checkInt("passes", passes, 1, 1<<20)) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := benchqpx.Run(ctx, benchqpx.Options{Out: cmd.OutOrStdout(), Passes: passes})
			return err
		},
	}
	cmd.Flags().IntVar(&passes, "passes", 400, "passes over the frame set per stage measurement")
	return cmd
}
