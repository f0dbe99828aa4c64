package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestTransportJSONAndMetricsOverVeth: `transport target` and two
// initiators — through the multi-channel send queue (--targets) and the
// conns workload — each a child process across two namespaces (AF_PACKET
// over veth) with --json and --metrics. Their standard output is JSON
// lines only (the target's READY as a "ready" object, "interval" objects,
// a last "summary" with every check passed); a scrape shows the MCSQ's
// counters and the RTT and window of every endpoint, the target's and the
// MCSQ initiator's included.
func TestTransportJSONAndMetricsOverVeth(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{})
	spec := func(ns *netns.NS, ifn string) string { return fmt.Sprintf("afpacket:%s?netns=%s", ifn, ns.Name) }
	common := []string{"--sizes", "512", "--target-delay", "1s", "--min-rto", "1ms", "--idle", "yield", "--frames", "16384",
		"--json", "--metrics", "127.0.0.1:0", "--log-level", "info"}
	target := startChild(t, append([]string{"transport", "target", "--port", spec(topo.B, topo.IfB), "--ip", "198.18.0.2",
		"--window", "64", "--duration", "0", "--lcores", "1", "--seed", "2"}, common...)...)
	tgtURL := metricsURL(t, target)
	var ready struct {
		Type string
		Key  uint32
		Len  int
		MAC  string
	}
	require.NoError(t, json.Unmarshal([]byte(target.waitLine(`^\{"ip":.*"type":"ready"`)), &ready))
	ini := func(extra ...string) *child {
		return startChild(t, append(append([]string{"transport", "initiator", "--port", spec(topo.A, topo.IfA), "--ip", "198.18.0.1",
			"--peer-mac", topo.MACB.String(), "--peer-ip", "198.18.0.2", "--region-key", fmt.Sprint(ready.Key),
			"--region-size", fmt.Sprint(ready.Len), "--window", "16", "--lcores", "0", "--seed", "1"}, common...), extra...)...)
	}

	mq := ini("--targets", "300", "--dc-sqs", "8", "--duration", "3s")
	url := metricsURL(t, mq)
	mq.waitLine(`^\{.*"type":"interval"`)
	body := scrape(t, url)
	for _, want := range []string{
		`peregrine_mcsq_wrs_ok_total{stage="initiator"}`,
		`peregrine_mcsq_dc_connects_total{stage="initiator"}`,
		`peregrine_transport_ops_completed_total{endpoint="initiator"}`,
		`peregrine_transport_srtt_seconds{endpoint="initiator"}`,
		`peregrine_transport_cwnd_packets{endpoint="initiator"}`,
		`peregrine_port_rx_packets_total{port="` + spec(topo.A, topo.IfA) + `",queue="0"}`,
	} {
		require.Contains(t, body, want)
	}
	require.Regexp(t, `peregrine_mcsq_wrs_ok_total\{stage="initiator"\} [1-9]`, body)
	require.Equal(t, 0, mq.wait(), mq.output())
	requireJSONRun(t, mq.output(), "wrs_ok", 1)

	// The target's connections have an RTT and a window too.
	body = scrape(t, tgtURL)
	require.Regexp(t, `peregrine_transport_srtt_seconds\{endpoint="target"\} [0-9.e-]+`, body)
	require.Contains(t, body, `peregrine_transport_connections{endpoint="target"}`)

	plain := ini("--count", "500", "--duration", "1m") // pushes: the MCSQ's pushes overwrote the pull half of the region
	require.Equal(t, 0, plain.wait(), plain.output())
	sum := requireJSONRun(t, plain.output(), "ops_completed", 0)
	require.EqualValues(t, 500, sum["totals"].(map[string]any)["ops"])

	require.NoError(t, target.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, target.wait(), target.output())
	requireJSONRun(t, target.output(), "requests_delivered", 1)
}

// metricsURL reads the metrics URL from the child's "serving metrics" log
// line (--json leaves the text line out).
func metricsURL(t *testing.T, c *child) string {
	t.Helper()
	m := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(c.waitLine(`serving metrics`))
	require.NotNil(t, m, c.output())
	return m[1]
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// requireJSONRun checks a child's standard output under --json: every
// line that is not a log line is a JSON object, at least minIntervals of
// them "interval" ones; the last is the summary, ok, with counter among
// its counters. It returns the summary.
func requireJSONRun(t *testing.T, out, counter string, minIntervals int) map[string]any {
	t.Helper()
	var last map[string]any
	intervals := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "time=") { // slog on standard error
			continue
		}
		last = nil
		require.NoError(t, json.Unmarshal([]byte(l), &last), "not a JSON line: %s\n%s", l, out)
		if last["type"] == "interval" {
			intervals++
		}
	}
	require.NotNil(t, last, out)
	require.Equal(t, "summary", last["type"], out)
	require.Equal(t, true, last["ok"], out)
	require.Contains(t, last["totals"].(map[string]any)["counters"], counter, out)
	require.GreaterOrEqual(t, intervals, minIntervals, out)
	return last
}
