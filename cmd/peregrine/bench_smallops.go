package main

import (
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/bench/smallops"
	"github.com/peregrine-net/peregrine/core/rt"
)

func newBenchSmallOpsCommand() *cobra.Command {
	var (
		duration time.Duration
		window   int
		seed     uint64
		prefix   string
		minCwnd  float64
		minRTO   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "smallops",
		Short: "64 B pushes and Sends, as many in flight as the window allows: ops/s per core in memory, over AF_XDP veth, through the fabric at 1 % loss",
		Long: `smallops runs a transport initiator and a target, each on its own pinned
busy-polling loop (two cores), and counts the 64 B operations completed
per second with --window in flight, for each row:

  ` + strings.Join(smallops.Rows(), ", ") + `

(mem: an in-memory port pair; afxdp: an AF_XDP veth pair between two
network namespaces, 198.18.0.0/15, root only, skipped otherwise; fabric1:
in memory through the fabric emulator at 1 % loss each way). Each row
prints ops/s, ops per CPU-second of the busier loop, the retransmissions
of both endpoints, the fabric's losses, the timeouts found spurious (and
how many of them asked the peer for an ACK instead of resending) and each
loop's stalls longer than the timeout floor. The same run measures
mem-port io forwarding. Ratios:

  smallops_push64_per_core           (64 B pushes in memory, goal >= 4e6 ops/s)
  smallops_retransmits_without_loss  (goal = 0)

and FIGURE smallops_push64_vs_mem_forwarding (the push rate over the
forwarding rate of two packets: a push and its ACK) and FIGURE
smallops_crosscore_pingpong_ns (one cache line's round trip between the
two CPUs, the floor under the two-core rows). The mem push row runs once
more with both endpoints on one pinned loop (FIGURE
smallops_mem_push64_one_loop_ops_per_s and _ops_per_cpu_s): the CPU a
push costs both ends, apart from the cross-core exchange. The namespaces are
deleted at the end, also on error or SIGINT/SIGTERM.`,
		Example: `  sudo peregrine bench smallops
  peregrine bench smallops --duration 500ms --window 64   # a quick look
  peregrine bench smallops --min-cwnd 128                 # the whole window in flight, past Swift's delay target
  sudo peregrine bench smallops --min-rto 50ms            # a timeout floor above this host's loop stalls`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return usage(
				checkPositiveDuration("duration", duration, 10*time.Millisecond),
				checkInt("window", window, 1, 2*rt.MaxWindowSize),
				flagged("min-cwnd", config.CheckMinCwnd(minCwnd)),
				checkPositiveDuration("min-rto", minRTO, time.Microsecond),
			)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := smallops.Run(ctx, smallops.Options{
				Out: cmd.OutOrStdout(), Duration: duration, Window: window, Seed: seed, Prefix: prefix, MinCwnd: minCwnd, MinRTO: minRTO,
			})
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&duration, "duration", 2*time.Second, "each row's measured window (after a fifth of it of warm-up)")
	f.IntVar(&window, "window", smallops.DefaultWindow, "operations kept in flight (on two connections; Sends on one)")
	f.Uint64Var(&seed, "seed", 1, "seeds the fabric's losses and the endpoints")
	f.Float64Var(&minCwnd, "min-cwnd", 0, "the initiator's least congestion window per connection in packets (0: the transport stage's default, 8); 128 keeps the whole window in flight")
	f.DurationVar(&minRTO, "min-rto", app.DefaultMinRTO, "both endpoints' shortest retransmit timeout; the rows count their loops' stalls longer than it, which a lossless row's timeouts follow")
	f.StringVar(&prefix, "netns-prefix", "", "name the namespaces PREFIX-a and PREFIX-b (default pgso<pid>)")
	return cmd
}
