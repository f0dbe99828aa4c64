package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	benchdix "github.com/peregrine-net/peregrine/bench/dix"
)

func newBenchDixCommand() *cobra.Command {
	var (
		sends int
		seed  uint64
	)
	cmd := &cobra.Command{
		Use:   "dix",
		Short: "Sends placed by delivery index vs a receiver that holds until in order (simulated), the index's wrap, the Send receive cost",
		Long: `dix runs, in the deterministic simulator on the virtual clock, many
concurrent two-sided Sends of 4 KiB-256 KiB sprayed over four paths of
different delays (and again with 1% loss), once with a 16-bit delivery
index and once without (the baseline receiver, which holds every packet
that comes before its turn), same seed, same workload:

  dix_vs_buffered_peak_rx_bytes   peak bytes held outside receive WQEs     (goal <= 0.10)
  dix_vs_buffered_p99_completion  p99 last packet sent -> receive completion (goal <= 0.50;
                                  judged: the part of a Send's life the receiver decides)
  dix_vs_buffered_p99_completion_from_post
                                  p99 posting -> receive completion (goal <= 1.0: never
                                  slower; both p99s are the sender's queueing, see
                                  go doc ./bench/dix)
  dix_copies_per_byte             bytes copied per byte placed              (goal 1.0)

then an 8-bit relative index through 1,000,000 one-packet Sends through the
whole stack on a reordering, lossy fabric (relative_8bit_wrap_misplaced,
goal 0) and through 1,000,000 transactions at the core/dix level with late,
reordered ACKs (relative_8bit_wrap_misplaced_core, goal 0), and the
receiver's cost per Send packet against a push packet on the real clock
(dix_rx_cost_vs_push_rx, goal <= 1.20). Takes under a minute.`,
		Example: `  peregrine bench dix
  peregrine bench dix --sends 3000 --seed 7`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return usage(checkInt("sends", sends, 1, 1<<20)) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := benchdix.Run(ctx, benchdix.Options{Out: cmd.OutOrStdout(), Sends: sends, Seed: seed})
			return err
		},
	}
	cmd.Flags().IntVar(&sends, "sends", 1500, "Sends per simulated run")
	cmd.Flags().Uint64Var(&seed, "seed", 14, "simulation seed")
	return cmd
}
