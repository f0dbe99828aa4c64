package dix

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	coredix "github.com/peregrine-net/peregrine/core/dix"
)

// TestFromPostingMatrix reruns the workloads of the package doc's table
// (the p99 completion ratio from posting and from the last packet sent),
// index against baseline. It takes minutes: only with
// PEREGRINE_DIX_MATRIX=1.
func TestFromPostingMatrix(t *testing.T) {
	if os.Getenv("PEREGRINE_DIX_MATRIX") == "" {
		t.Skip("the from-posting workload matrix takes minutes: set PEREGRINE_DIX_MATRIX=1")
	}
	const path = "rate=10gbit,paths=4,spread=30us,delay=10us"
	type row struct {
		name    string
		profile string
		w       Workload
	}
	var rows []row
	for _, p := range []string{path, "loss=1%," + path} {
		rows = append(rows,
			row{"closed loop, 16 outstanding", p, Workload{Window: 16}},
			row{"open 20 %, interleaved", p, Workload{Window: 48, Load: 0.2}},
			row{"open 50 %, interleaved", p, Workload{Window: 48, Load: 0.5}},
			row{"open 80 %, interleaved", p, Workload{Window: 48, Load: 0.8}},
			row{"open 50 %, FIFO", p, Workload{Window: 48, Load: 0.5, FIFO: true}},
			row{"open 80 %, FIFO", p, Workload{Window: 48, Load: 0.8, FIFO: true}},
			row{"open 50 %, 99 % 4 KiB, interleaved", p, Workload{Window: 48, Load: 0.5, Mice: 0.99}},
			row{"open 50 %, 99 % 4 KiB, FIFO", p, Workload{Window: 48, Load: 0.5, Mice: 0.99, FIFO: true}},
			row{"open 50 %, 99.5 % 4 KiB, interleaved", p, Workload{Window: 48, Load: 0.5, Mice: 0.995}},
			row{"open 50 %, 99.5 % 4 KiB, FIFO", p, Workload{Window: 48, Load: 0.5, Mice: 0.995, FIFO: true}},
			row{"closed loop 16, baseline hold 1 MiB", p, Workload{Window: 16, HoldBytes: 1 << 20}},
		)
	}
	rows = append(rows,
		row{"closed loop 16, 5 % loss", "loss=5%," + path, Workload{Window: 16}},
		row{"open 50 %, FIFO, 5 % loss", "loss=5%," + path, Workload{Window: 48, Load: 0.5, FIFO: true}},
		row{"closed loop 16, paths 10-210 us, 1 % loss", "loss=1%,rate=10gbit,paths=4,spread=200us,delay=10us", Workload{Window: 16}},
	)
	for _, p := range []string{"paths=4,spread=30us,delay=10us", "loss=1%,paths=4,spread=30us,delay=10us"} {
		rows = append(rows,
			row{"closed loop 16, no line rate", p, Workload{Window: 16}},
			row{"open 5 Gbit/s, no line rate", p, Workload{Window: 48, Load: 0.5}},
			row{"open 5 Gbit/s, no line rate, FIFO", p, Workload{Window: 48, Load: 0.5, FIFO: true}},
			row{"closed loop 16, 100 Gbit/s", "rate=100gbit," + p, Workload{Window: 16}},
		)
	}
	for _, r := range rows {
		w := r.w
		w.Profile, w.Sends, w.Min, w.Max, w.LineRate, w.Seed = r.profile, 1500, minSend, maxSend, 10e9, 14
		w.Index = coredix.Config{Kind: coredix.FreeRunning, Width: 16}
		d, err := SimulateWorkload(w)
		require.NoError(t, err)
		w.Index = coredix.Config{}
		b, err := SimulateWorkload(w)
		require.NoError(t, err)
		require.Zero(t, d.Mismatches+b.Mismatches)
		t.Logf("%-42s %-52s from posting %.3f (%v / %v) | last packet sent %.3f (%v / %v) | errors %d / %d",
			r.name, r.profile, ratio(float64(d.PostP99), float64(b.PostP99)), d.PostP99, b.PostP99,
			ratio(float64(d.P99), float64(b.P99)), d.P99, b.P99, d.CompletionErr, b.CompletionErr)
	}
}
