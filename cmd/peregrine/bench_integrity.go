package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/bench/integrity"
)

func newBenchIntegrityCommand() *cobra.Command {
	var (
		duration time.Duration
		seed     uint64
	)
	cmd := &cobra.Command{
		Use:   "integrity",
		Short: "Retransmissions against the losses they recover, and in-order operations under loss, in the deterministic simulator",
		Long: `integrity runs the demo's traffic (its fabric profile, its mix of pushes,
pulls and Sends, its transport settings) on the virtual clock, so every
figure is exact and repeats with the seed, and compares it with the same
run as before duplicate reports (the receiver telling the sender of a
packet it had already, which widens the sender's reordering window):

  retransmits_per_loss             every resend per frame the fabric dropped  <= 1.2
  spurious_resends_per_loss        copies a receiver had already, per drop    <= 0.2
  goodput_vs_before                goodput / goodput as before                >= 1.0
  inorder_2pct_loss_ops_abandoned  operations not completed OK with every
                                   data packet in order, windows of 128, 2% loss  <= 0

Takes about ten seconds at the default duration.`,
		Example: `  peregrine bench integrity
  peregrine bench integrity --duration 50ms --seed 7`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return usage(checkPositiveDuration("duration", duration, time.Millisecond))
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := integrity.Run(ctx, integrity.Options{Out: cmd.OutOrStdout(), Duration: duration, Seed: seed})
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&duration, "duration", integrity.DefaultDuration, "virtual time the load posts before it drains")
	f.Uint64Var(&seed, "seed", integrity.DefaultSeed, "seed of the fabric and the endpoints")
	return cmd
}
