package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// genRxOverVeth sends count frames of flows flows gen → gen --rx over one
// veth pair (AF_XDP) and returns what the receiver printed. 5 kfps: the
// receiver's ring holds 400 ms of it, so a loop starved by a loaded
// machine (-race beside other tests) loses nothing.
func genRxOverVeth(t *testing.T, count uint64, flows int, rxf rxFlowFlags) string {
	t.Helper()
	topo := netnstest.ThreeNS(t, netns.VethOptions{GRO: true})
	spec := func(ns *netns.NS, ifname string) string { return fmt.Sprintf("afxdp:%s?netns=%s", ifname, ns.Name) }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rxOut, txOut bytes.Buffer
	var rxOK bool
	var rxErr error
	ready, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		rxOK, rxErr = runGenRx(ctx, genConfig{port: spec(topo.Fwd, topo.FwdGenIf), flows: flows, expect: count, burst: 32, lcores: "0", idle: "sleep",
			period: 50 * time.Millisecond, quiet: true, frames: 4096, rxf: rxf, ready: func() { close(ready) }}, &rxOut)
	}()
	select {
	case <-ready:
	case <-ended:
		t.Fatalf("receiver ended before the sender started: %v\n%s", rxErr, rxOut.String())
	}
	_, txErr := runGenTx(ctx, genConfig{port: spec(topo.Gen, topo.GenIf), flows: flows, count: count, rate: "5kpps", size: "64",
		burst: 16, lcores: "1", idle: "sleep", period: time.Hour, frames: 4096}, &txOut)
	<-ended
	require.NoError(t, txErr, txOut.String())
	require.NoError(t, rxErr, rxOut.String())
	require.True(t, rxOK, rxOut.String())
	return rxOut.String()
}

// TestGenRxPerFlowOverVeth sends 8 flows gen → gen --rx --per-flow
// --per-flow-histograms over one veth pair (AF_XDP) and reads back the
// per-flow table, with each flow's percentiles, and the interval
// histograms: every flow received, none lost, duplicated or reordered,
// and each interval's CSV rows sum to the frames it saw.
func TestGenRxPerFlowOverVeth(t *testing.T) {
	dir := t.TempDir()
	flowsOut, histOut := filepath.Join(dir, "flows.json"), filepath.Join(dir, "hist.csv")
	const count, flows = 4000, 8
	out := genRxOverVeth(t, count, flows, rxFlowFlags{perFlow: true, flowHist: true, flowsOut: flowsOut, histOut: histOut, topFlows: defaultTopFlows, format: formatText})
	require.Contains(t, out, "per flow: 8 of 8 flows received; lost 0, duplicated 0, reordered 0")

	var table struct {
		Sent     int                  `json:"flows_sent"`
		Received int                  `json:"flows_received"`
		Flows    []traffic.FlowRecord `json:"flows"`
	}
	b, err := os.ReadFile(flowsOut)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &table))
	require.Equal(t, flows, table.Sent)
	require.Equal(t, flows, table.Received)
	var got uint64
	for _, f := range table.Flows {
		require.Equal(t, uint64(count/flows), f.Received, "flow %d", f.Flow)
		require.Positive(t, f.LatencyMin)
		require.LessOrEqual(t, f.LatencyP50, f.LatencyP99, "flow %d", f.Flow)
		require.LessOrEqual(t, f.LatencyP99, f.LatencyMax, "flow %d", f.Flow)
		require.GreaterOrEqual(t, f.LatencyP50, f.LatencyMin*7/8, "flow %d", f.Flow)
		got += f.Received
	}
	require.Equal(t, uint64(count), got)

	csv, err := os.ReadFile(histOut)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	require.Equal(t, strings.TrimSpace(traffic.IntervalCSVHeader), lines[0])
	var inHist uint64
	for _, l := range lines[1:] {
		var iv, lo, hi, n uint64
		var end float64
		_, err := fmt.Sscanf(l, "%d,%f,%d,%d,%d", &iv, &end, &lo, &hi, &n)
		require.NoError(t, err, l)
		require.LessOrEqual(t, lo, hi)
		inHist += n
	}
	require.Equal(t, uint64(count), inHist, "every frame's latency is in exactly one interval")
}

// TestGenRxStreamsRecordsOverVeth reads gen --rx --format back: jsonl
// gives an interval record per period and a summary, each with the run's
// parameters, the summary listing --top-flows flows and the distinct flows
// received against those sent; csv gives the same records as rows under
// one header. Without --per-flow-histograms the flows carry latency
// min/mean/max and no percentiles.
func TestGenRxStreamsRecordsOverVeth(t *testing.T) {
	const count, flows = 4000, 8
	out := genRxOverVeth(t, count, flows, rxFlowFlags{perFlow: true, topFlows: 3, format: formatJSONL})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 2, out)
	var last uint64
	for i, l := range lines {
		var rec struct {
			Type     string         `json:"type"`
			Params   map[string]any `json:"params"`
			Received uint64         `json:"received"`
			Sent     int            `json:"flows_sent"`
			Distinct int            `json:"flows_received"`
			Listed   string         `json:"flows_listed"`
			Flows    []traffic.FlowRecord
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		require.Equal(t, float64(flows), rec.Params["flows"], l)
		require.Equal(t, true, rec.Params["per_flow"], l)
		require.Equal(t, false, rec.Params["per_flow_histograms"], l)
		require.GreaterOrEqual(t, rec.Received, last, "cumulative")
		last = rec.Received
		if i < len(lines)-1 {
			require.Equal(t, "interval", rec.Type, l)
			continue
		}
		require.Equal(t, "summary", rec.Type, l)
		require.Equal(t, uint64(count), rec.Received)
		require.Equal(t, flows, rec.Sent)
		require.Equal(t, flows, rec.Distinct)
		require.Equal(t, "top 3 by loss", rec.Listed)
		require.Len(t, rec.Flows, 3)
		for _, f := range rec.Flows {
			require.Positive(t, f.LatencyMin, l)
			require.GreaterOrEqual(t, f.LatencyMean, float64(f.LatencyMin), l)
			require.Zero(t, f.LatencyP50+f.LatencyP99+f.LatencyP999, l)
		}
	}

	out = genRxOverVeth(t, count, flows, rxFlowFlags{perFlow: true, topFlows: defaultTopFlows, format: formatCSV})
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	require.Equal(t, append([]string{"type"}, rxColumns...), rows[0][:1+len(rxColumns)])
	col := func(name string) int { return slices.Index(rows[0], name) }
	sum := rows[len(rows)-1]
	require.Equal(t, "summary", sum[0])
	require.Equal(t, fmt.Sprint(count), sum[col("received")])
	require.Equal(t, "8", sum[col("flows_received")])
	require.Equal(t, "0", sum[col("flows_lost")])
	require.Equal(t, "8", sum[col("param_flows")])
}
