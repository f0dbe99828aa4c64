package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDemoShardedVerifies: demo --shards 2 and 4 in memory complete every
// operation exactly once, print a line per shard whose operations sum to
// the total, and carry the same per-shard figures in --json.
func TestDemoShardedVerifies(t *testing.T) {
	shardLine := regexp.MustCompile(`(?m)^  shard (\d+) \(queue \d+, lcore \d+\): (\d+) ops, .* goodput, retransmissions \d+, steered_in_software (\d+)`)
	sumLine := regexp.MustCompile(`(?m)^  sum of (\d+) shards: (\d+) ops, .* goodput, retransmissions \d+, steered_in_software (\d+)`)
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			cfg := demoConfig{
				duration: 400 * time.Millisecond, workload: "transport", window: 16, seed: 3, target: 200 * time.Microsecond, minRTO: time.Millisecond,
				lcores: "0,1", idle: "sleep", frames: 16384, quiet: true, drain: time.Minute, shards: n,
			}
			var out bytes.Buffer
			ok, err := runDemo(context.Background(), cfg, &out)
			require.NoError(t, err)
			text := out.String()
			require.True(t, ok, text)
			require.Contains(t, text, "[ok  ] every operation completed exactly once with no error")
			require.Contains(t, text, "[ok  ] every Send landed byte-exact")
			require.Contains(t, text, "0 in use after stop")
			lines := shardLine.FindAllStringSubmatch(text, -1)
			require.Len(t, lines, n, text)
			var sum uint64
			for i, l := range lines {
				require.Equal(t, strconv.Itoa(i), l[1])
				ops, _ := strconv.ParseUint(l[2], 10, 64)
				require.NotZero(t, ops, "shard %d completed operations", i)
				require.Equal(t, "0", l[3], "shard %d: every frame arrived on its shard's queue", i)
				sum += ops
			}
			s := sumLine.FindStringSubmatch(text)
			require.NotNil(t, s, text)
			require.Equal(t, strconv.Itoa(n), s[1])
			require.Equal(t, strconv.FormatUint(sum, 10), s[2], "the sum line is the shards' sum")

			cfg.obs.json = true
			out.Reset()
			ok, err = runDemo(context.Background(), cfg, &out)
			require.NoError(t, err)
			require.True(t, ok, out.String())
			jl := strings.Split(strings.TrimSpace(out.String()), "\n")
			var summary struct {
				Totals struct {
					Completed uint64 `json:"ops_completed"`
					PerShard  []struct {
						Ops uint64 `json:"ops"`
					} `json:"per_shard"`
					Sum struct {
						Ops uint64 `json:"ops"`
					} `json:"sum"`
				} `json:"totals"`
			}
			require.NoError(t, json.Unmarshal([]byte(jl[len(jl)-1]), &summary), jl[len(jl)-1])
			require.Len(t, summary.Totals.PerShard, n)
			var js uint64
			for _, p := range summary.Totals.PerShard {
				js += p.Ops
			}
			require.Equal(t, summary.Totals.Completed, js)
			require.Equal(t, summary.Totals.Completed, summary.Totals.Sum.Ops)
		})
	}
}

// TestDemoShardsFlagErrors: a shard count that is not a power of two in
// range, or --shards with a flag whose mechanism cannot run sharded, is a
// usage error (exit 2) naming the flags.
func TestDemoShardsFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--shards", "3"}, []string{"--shards 3", "power of two"}},
		{[]string{"--shards", "0"}, []string{"--shards 0", "power of two"}},
		{[]string{"--shards", "1024"}, []string{"--shards 1024"}},
		{[]string{"--shards", "2", "--profile", "loss=1%"}, []string{"--shards 2", "--profile", "fabric"}},
		{[]string{"--shards", "2", "--veth"}, []string{"--shards 2", "--veth"}},
		{[]string{"--shards", "2", "--capture", "x.pcap"}, []string{"--shards 2", "--capture"}},
		{[]string{"--shards", "2", "--workload", "forward"}, []string{"--shards 2", "--workload forward"}},
	} {
		out, code := runCLI(t, append([]string{"demo", "--duration", "100ms"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, out)
		for _, w := range tc.want {
			require.Contains(t, out, w, tc.args)
		}
	}
}
