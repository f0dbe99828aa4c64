package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	benchlatency "github.com/peregrine-net/peregrine/bench/latency"
)

func newBenchLatencyCommand() *cobra.Command {
	var (
		count      int
		kernelTime time.Duration
		idleWindow time.Duration
		prefix     string
	)
	cmd := &cobra.Command{
		Use:   "latency",
		Short: "Push round trips over AF_XDP and AF_PACKET veth pairs against sockperf (kernel UDP) and kernel TCP, same pair, same run",
		Long: `latency builds two network namespaces joined by one veth pair
(198.18.0.0/15), runs a transport initiator in one and a target in the
other, each on its own pinned poll loop, and measures 64 B and 4 KiB push
round trips with one in flight — p50, p99 and p99.9 — for each row:

  ` + strings.Join(benchlatency.Rows(), ", ") + `

(afxdp and afpacket under the default idle policy, adaptive; _busy with
busy-polling loops; afxdp_busypoll adds socket busy polling; afpacket_v3 is
the TPACKET_V3 ring with its block wait), then the CPU share an idle
target's loop uses under each idle policy. Ratios:

  latency_64b_p50_afxdp_vs_kernel_udp   (goal <= 0.3)
  latency_64b_p99_afxdp_vs_kernel_udp   (goal <= 0.5)
  latency_64b_p50_afpacket_vs_afxdp     (goal <= 1.5)

and FIGURE idle_cpu_default_policy. Needs root and sockperf
(hack/install-deps.sh). The namespaces are deleted at the end, also on
error or SIGINT/SIGTERM.`,
		Example: `  sudo peregrine bench latency
  sudo peregrine bench latency --count 2000 --kernel-time 1s --idle-window 200ms   # a quick look`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if err := usage(
				checkInt("count", count, 10, 10_000_000),
				checkPositiveDuration("kernel-time", kernelTime, time.Second),
				checkPositiveDuration("idle-window", idleWindow, 10*time.Millisecond),
			); err != nil {
				return err
			}
			if kernelTime%time.Second != 0 {
				return usage(fmt.Errorf("--kernel-time %v: sockperf runs whole seconds (e.g. 2s)", kernelTime))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, _, err := benchlatency.Run(ctx, benchlatency.Options{
				Out: cmd.OutOrStdout(), Count: count, KernelTime: kernelTime, IdleWindow: idleWindow, Prefix: prefix,
			})
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", benchlatency.DefaultCount, "round trips per row (afpacket_v3: a twentieth)")
	f.DurationVar(&kernelTime, "kernel-time", 2*time.Second, "how long each sockperf row runs (whole seconds)")
	f.DurationVar(&idleWindow, "idle-window", time.Second, "how long each idle policy's CPU use is measured")
	f.StringVar(&prefix, "netns-prefix", "", "name the namespaces PREFIX-a and PREFIX-b (default pglat<pid>)")
	return cmd
}
