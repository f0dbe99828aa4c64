package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// jsonLines parses every line of out as a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var o map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &o), l)
		objs = append(objs, o)
	}
	return objs
}

// run --json prints a transport target's READY as transport target --json
// does: a "ready" object with the key, length, MAC and IP.
func TestRunJSONKeepsReady(t *testing.T) {
	out, code := runCLI(t, "run", "-c", "../../configs/demo.yaml", "--json", "--duration", "300ms")
	require.Equal(t, 0, code, out)
	var ready map[string]any
	for _, o := range jsonLines(t, out) {
		if o["type"] == "ready" {
			ready = o
		}
	}
	require.NotNil(t, ready, "no ready object: %s", out)
	for _, k := range []string{"key", "len", "mac", "ip"} {
		require.Contains(t, ready, k)
	}
	require.NotZero(t, ready["key"])
}

// configs/gen-sink.yaml runs the generator and the sink on one loop: the
// one-way latency is a real figure, not the 0 of a shared loop timestamp.
func TestGenSinkLatencyIsMeasured(t *testing.T) {
	out, code := runCLI(t, "run", "-c", "../../configs/gen-sink.yaml", "--quiet")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `one-way latency p50 [1-9][0-9.]* ?(ns|µs|ms|s) p99 [1-9]`, out)
}
