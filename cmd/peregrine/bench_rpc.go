package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine"
	benchrpc "github.com/peregrine-net/peregrine/bench/rpc"
)

func newBenchRPCCommand() *cobra.Command {
	var (
		count    int
		rounds   int
		rowTime  time.Duration
		fileSize int
		idle     string
		noPin    bool
		only     []string
		prefix   string
		mode     peregrine.Idle
	)
	cmd := &cobra.Command{
		Use:   "rpc",
		Short: "Request-response through the raw transaction API, the public API, the sidecar and kernel TCP, in memory and over AF_XDP veth",
		Long: `rpc measures request-response round trips of 64 B and 1 KiB messages,
1 and 32 in flight on one connection, ops/s and p50/p99/p99.9, through
each door, in one run:

  raw      core/rt/txn Sends, both endpoints polled by the measuring
           goroutine (the floor)
  raw-loops  the same, each endpoint polled by its own goroutine pinned to
           its CPU: the public API's layout
  api      the public package in-process (Host, Endpoint, Conn Send/Recv),
           each endpoint on its own poll loop (pinned with four CPUs or
           more; on fewer unpinned, the API's default, as two pinned busy
           loops would leave the callers no CPU)
  api-caller  the same, the endpoints polled by their callers (Options.Poll:
           PollCaller): no hand-off between goroutines
  sidecar  an endpoint from peregrine.Attach through the appliance's host.Server,
           what peregrine serve runs; the echo server in-process
  tcp      kernel TCP with Go's net, length-prefixed messages

in memory (mem: ports; kernel TCP over loopback) and over a veth pair
between two network namespaces the bench creates (AF_XDP; kernel TCP over
the same pair; root only, skipped otherwise), the endpoints' loops on the
same two CPUs. Rows are named WHERE_DOOR_SIZE_xDEPTH, e.g.
` + strings.Join(benchrpc.Rows()[:2], ", ") + `. Ratios:

  api_vs_raw_cost_1k            ns per 1 KiB round trip in memory, public API ÷ raw-loops (goal <= 1.15;
                                the faster of api and api-caller, both printed; raw beside it)
  sidecar_vs_inprocess_cost_1k  the same, sidecar ÷ in-process (its faster mode)  (goal <= 1.3)
  rpc_1k_vs_kernel_tcp_ops      32 in flight over veth, sidecar ÷ kernel TCP ops/s  (goal >= 2.0)
  rpc_1k_p99_vs_kernel_tcp      1 in flight over veth, sidecar ÷ kernel TCP p99     (goal <= 0.5)
  sidecar_allocs_per_op         heap allocations a round trip, whole process        (goal = 0)
  file_transfer_1gib_vs_kernel_tcp
                                --file-size bytes over veth, sidecar ÷ kernel TCP goodput
                                (goal >= 1.0; named by the size when it is not 1 GiB)

With --rounds N every row and file transfer runs N times, one round
after another (each round's rows printed as notes); the FIGURE lines
are each row's medians, and a ratio of two rows is taken within each
round, the median round's printed with every round's value: on a shared
or virtual machine a row's wall time drifts by tens of percent from
minute to minute, and rounds put the doors a ratio compares through the
same drift. Before and after each round a cache line crosses between the
two CPUs 100,000 times (FIGURE rpc_crosscore_pingpong_ns, their median;
each round's beside its ratios): the drift's measure.

The namespaces are deleted at the end, also on error or SIGINT/SIGTERM.`,
		Example: `  sudo peregrine bench rpc
  peregrine bench rpc --count 2000 --file-size 16MiB   # a quick look
  peregrine bench rpc --only raw,api,api-caller --count 20000   # the public API's cost alone
  sudo peregrine bench rpc --rounds 3 --row-time 2s   # medians of three rounds`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if err := usage(
				checkInt("count", count, 10, 100_000_000),
				checkInt("rounds", rounds, 1, 100),
				checkPositiveDuration("row-time", rowTime, 100*time.Millisecond),
				checkInt("file-size", fileSize, 1, 1<<30),
				checkIdle(idle),
			); err != nil {
				return err
			}
			switch idle {
			case "adaptive":
				mode = peregrine.IdleAdaptive
			case "busy":
				mode = peregrine.IdleBusy
			case "sleep":
				mode = peregrine.IdleSleep
			default:
				return usage(fmt.Errorf("--idle %s: the public API's endpoints idle adaptive, busy or sleep", idle))
			}
			for _, d := range only {
				if !slices.Contains(benchrpc.Doors, d) {
					return usage(fmt.Errorf("--only %s: no such door: use %s", d, strings.Join(benchrpc.Doors, ", ")))
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := benchrpc.Run(ctx, benchrpc.Options{
				Out: cmd.OutOrStdout(), Count: count, Rounds: rounds, RowTime: rowTime, FileSize: int64(fileSize), Idle: mode, NoPin: noPin, Only: only, Prefix: prefix,
			})
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", benchrpc.DefaultCount, "round trips measured per row (after a tenth of it of warm-up)")
	f.IntVar(&rounds, "rounds", 1, "run every row (and the file transfers) this many times, round after round; figures are each row's medians, ratios of two rows the median round's (3 on a shared or virtual machine, whose rows drift by tens of percent from minute to minute)")
	f.DurationVar(&rowTime, "row-time", benchrpc.DefaultRowTime, "longest a row measures: it ends after --count round trips or this, whichever comes first (its warm-up after a tenth of either)")
	sizeVar(f, &fileSize, "file-size", benchrpc.DefaultFileSize, "bytes the file transfer moves (1GiB; smaller for a quick run)")
	idleVar(f, &idle)
	f.BoolVar(&noPin, "no-pin", false, "leave the endpoints' poll loops unpinned (default: one on each of the first two allowed CPUs)")
	f.StringSliceVar(&only, "only", nil, "run only these doors: "+strings.Join(benchrpc.Doors, ", ")+" (ratios needing another door are not printed)")
	f.StringVar(&prefix, "netns-prefix", "", "name the namespaces PREFIX-a and PREFIX-b (default pgrpc<pid>)")
	return cmd
}
