package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	benchcapture "github.com/peregrine-net/peregrine/bench/capture"
)

func newBenchCaptureCommand() *cobra.Command {
	var packets, rounds int
	cmd := &cobra.Command{
		Use:   "capture",
		Short: "What a port's capture=FILE costs per packet: off (the plain port) and on (a pcap mirror) against a pcapgo write floor",
		Long: `capture measures, in one run on this machine, 64-byte frames in bursts of 32
through a mem pair opened by app.New as a user opens ports:

  capture_off_wrapped_ports         ports without capture= that are not the driver's own (goal 0: off is the plain path)
  capture_on_added_vs_pcapgo_write  (on - off) ns/packet / pcapgo.Writer into a buffered file (goal <= 1.5)
  capture_allocs_per_packet         heap allocations per packet, on and off (goal 0)

and prints each ns/packet as a FIGURE line, and off against mem.NewPair's own port
(no goal: the same code, so the ratio is the machine's noise, 0.85..1.13 run to run). Takes seconds.`,
		Example: `  peregrine bench capture
  peregrine bench capture --packets 65536 --rounds 1   # a quick look`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return usage(checkInt("packets", packets, burstOfCapture, 1<<30), checkInt("rounds", rounds, 1, 100))
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := benchcapture.Run(ctx, benchcapture.Options{Out: cmd.OutOrStdout(), Packets: packets, Rounds: rounds})
			return err
		},
	}
	cmd.Flags().IntVar(&packets, "packets", 1<<20, "packets per measurement")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "alternating measurements of each, the best kept")
	return cmd
}

// burstOfCapture is the scenario's burst: the fewest packets a
// measurement moves.
const burstOfCapture = 32
