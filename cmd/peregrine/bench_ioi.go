package main

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/bench/ioi"
	"github.com/peregrine-net/peregrine/internal/units"
)

// parseBitRate reads a flag's bit rate (1gbit, 200mbit).
func parseBitRate(flag, s string) (uint64, error) {
	r, err := units.ParseRate(s)
	if err != nil || r.Bits < 1 {
		return 0, fmt.Errorf("--%s %q is not a bit rate such as 1gbit or 200mbit", flag, s)
	}
	return uint64(math.Round(r.Bits)), nil
}

// maxBenchDelay bounds --delay: the fabric takes path delays up to an
// hour, and a scenario of such delays would not end.
const maxBenchDelay = time.Second

func newBenchIOICommand() *cobra.Command {
	var (
		rate   string
		r      uint64
		delay  time.Duration
		window int
	)
	cmd := &cobra.Command{
		Use:   "ioi",
		Short: "IOI forwarding against all-in-order and all-sprayed delivery, in the deterministic simulator",
		Long: `ioi pushes 64 KiB, 1 MiB and 16 MiB messages on an ordered connection over
a fabric of 4 paths of equal rate R and one-way delays d, d+2, d+5, d+10 us,
on the virtual clock (completion times are exact), with three policies in
the same run: every packet in order (one path), every packet sprayed, and
IOI (in-order head and tail, sprayed middle; docs/ioi.md). Ratios:

  ioi_vs_inorder_speedup_1MiB, _16MiB    completion in order / IOI      >= 3.0
  ioi_vs_sprayed_completion_1MiB, _16MiB completion IOI / all sprayed   <= 1.10
  below_threshold_unchanged_64KiB        IOI / in order, below the threshold <= 1.01
  ioi_loss1pct_vs_noloss_16MiB           goodput with 1% loss on every path / without >= 0.80
  ioi_one_path_dead_vs_three_paths_rr, _random, _entropy, _adaptive, _inorder
                                         goodput of 2 messages of 16 MiB with the ordered
                                         path of 4 black-holed mid-run / over 3 healthy paths >= 0.7
                                         (IOI under each spraying policy; wholly in order)
  messages_abandoned_with_healthy_path   messages of those runs not completed OK  <= 0
  (frames_into_dead_path_after_detection is printed for each policy)
  ioi_sender_cost_vs_plain               the sender's ns per packet with IOI / without  <= 1.10
  ioi_sender_allocs_per_packet           heap allocations per packet    <= 0

The sender's cost is on the real clock: the sending endpoint's Poll only,
IOI on and off in 31 interleaved rounds, the median of the round ratios;
measure it on a quiet machine (PEREGRINE_IOI_COST=1 go test ./bench/ioi
-run SenderCostStable checks that it is stable). Takes about a minute.`,
		Example: `  peregrine bench ioi
  peregrine bench ioi --path-rate 200mbit --delay 20us`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			var err error
			if r, err = parseBitRate("path-rate", rate); err != nil {
				return usage(err)
			}
			var far error
			if delay > maxBenchDelay {
				far = fmt.Errorf("--delay %v is too long: use at most %v", delay, maxBenchDelay)
			}
			return usage(checkDuration("delay", delay, "give the fastest path no delay"), far, checkInt("window", window, 1, 4096))
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := ioi.Run(ctx, ioi.Options{Out: cmd.OutOrStdout(), PathRate: r, Delay: delay, Window: window})
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&rate, "path-rate", "1gbit", "R, each path's rate")
	f.DurationVar(&delay, "delay", ioi.DefaultDelay, "d, the fastest path's one-way delay")
	f.IntVar(&window, "window", ioi.DefaultWindow, "packets a connection keeps outstanding")
	return cmd
}
