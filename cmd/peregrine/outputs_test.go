package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
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

// A demo interrupted before anything could complete has lost nothing: the
// checks that something happened are not reached, not failed, and the run
// passes; a check that fails says why in its text.
func TestDemoInterruptedEarlyPasses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // interrupted before the first operation
	for _, w := range []string{"transport", "forward", "roce"} {
		var out bytes.Buffer
		ok, err := runDemo(ctx, demoConfig{workload: w, duration: 5 * time.Second, window: 32, size: "64", burst: 32, idle: "sleep", frames: 16384,
			profile: app.DemoProfile, seed: 1, target: 200 * time.Microsecond, minRTO: time.Millisecond, quiet: true}, &out)
		require.NoError(t, err, w)
		require.True(t, ok, "%s: %s", w, out.String())
		require.Contains(t, out.String(), "verification passed", w)
		require.NotContains(t, out.String(), "[FAIL]", w)
		require.NotContains(t, out.String(), "<nil>", w)
	}

	c := coverCheck("mcsq: ", false, 3862, 3862, "give --drain more time (e.g. --drain 10s)")
	require.False(t, c.ok)
	require.Contains(t, c.what, "(3862 posted, 3862 covered): every WR has its CQE, but the drain ended before the send queues were seen empty")
	require.Contains(t, c.what, "give --drain more time (e.g. --drain 10s); a second signal")
	c = coverCheck("", true, 10, 7, "raise it")
	require.Contains(t, c.what, ": 3 WR(s) had no CQE when the drain ended")
}

// demo --workload roce honours --json, --metrics and --capture as the
// other workloads do.
func TestDemoRoCEJSONAndCapture(t *testing.T) {
	capture := t.TempDir() + "/roce.pcap"
	out, code := runCLI(t, "demo", "--workload", "roce", "--duration", "300ms", "--json", "--capture", capture)
	require.Equal(t, 0, code, out)
	objs := jsonLines(t, out)
	require.NotEmpty(t, objs, out)
	last := objs[len(objs)-1]
	require.Equal(t, "summary", last["type"])
	require.Equal(t, true, last["ok"])
	require.NotZero(t, last["totals"].(map[string]any)["to_host_forwarded"])
	var d bytes.Buffer
	require.NoError(t, decodeFile(capture, 0, 0, &d))
	require.Contains(t, d.String(), "roce RC SEND Only", "the requests the stage received")
	require.Contains(t, d.String(), "roce RC Acknowledge", "and the ACKs it sent back")

	out, code = runCLI(t, "demo", "--workload", "roce", "--duration", "300ms", "--metrics", "127.0.0.1:0", "--quiet")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "metrics on http://127.0.0.1:")
}

// --json interval lines give rates of counters only: a gauge (the pool's
// frames in use, an RTT) has no rate.
func TestJSONNoRatesOfGauges(t *testing.T) {
	out, code := runCLI(t, "demo", "--workload", "forward", "--duration", "2500ms", "--json")
	require.Equal(t, 0, code, out)
	n := 0
	for _, o := range jsonLines(t, out) {
		if o["type"] != "interval" {
			continue
		}
		n++
		rates := o["rates"].(map[string]any)
		require.Contains(t, rates, "generated_frames_per_s")
		require.NotContains(t, rates, "pool_in_use_per_s")
	}
	require.Positive(t, n, out)
	require.True(t, isGauge("initiator.srtt_seconds"))
	require.False(t, isGauge("0:mem:a.rx_packets"))
}

// Live lines and summaries read the same in every subcommand: the elapsed
// time in brackets, latencies as "176 ms", not raw Go durations.
func TestOneLook(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--workload", "forward", "--duration", "1500ms"},
		{"demo", "--workload", "roce", "--duration", "1500ms"},
		{"demo", "--duration", "1500ms"},
		{"run", "-c", "../../configs/demo.yaml", "--duration", "1500ms"},
	} {
		out, code := runCLI(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, out)
		require.Regexp(t, `(?m)^\[ +\d+\.\ds\] `, out, "%v: the live line", args)
		require.NotRegexp(t, `\d+\.\d{3,}(ns|µs|ms|s)\b|\d{4,}(ns|µs|ms)\b`, out, "%v: a raw Go duration", args)
		if strings.Contains(out, "latency") {
			require.Regexp(t, `latency[^\n]* p50 (n/a|[\d.]+ (ns|µs|ms|s)) `, out, "%v: latencies in one format", args)
		}
	}
	require.Equal(t, "[  1.0s] to-host x", liveLine(time.Second, "to-host x"))
}
