package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestGenRxPerFlowOverVeth sends 8 flows gen → gen --rx --per-flow over one
// veth pair (AF_XDP) and reads back the per-flow table and the interval
// histograms: every flow received, none lost, duplicated or reordered,
// and each interval's CSV rows sum to the frames it saw.
func TestGenRxPerFlowOverVeth(t *testing.T) {
	topo := netnstest.ThreeNS(t, netns.VethOptions{GRO: true})
	spec := func(ns *netns.NS, ifname string) string { return fmt.Sprintf("afxdp:%s?netns=%s", ifname, ns.Name) }
	dir := t.TempDir()
	flowsOut, histOut := filepath.Join(dir, "flows.json"), filepath.Join(dir, "hist.csv")
	const count, flows = 4000, 8
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rxOut, txOut bytes.Buffer
	var rxOK bool
	var rxErr error
	ready, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		rxOK, rxErr = runGenRx(ctx, genConfig{port: spec(topo.Fwd, topo.FwdGenIf), flows: flows, expect: count, burst: 32, lcores: "0", idle: "sleep",
			period: 50 * time.Millisecond, quiet: true, frames: 4096, rxf: rxFlowFlags{perFlow: true, flowsOut: flowsOut, histOut: histOut},
			ready: func() { close(ready) }}, &rxOut)
	}()
	select {
	case <-ready:
	case <-ended:
		t.Fatalf("receiver ended before the sender started: %v\n%s", rxErr, rxOut.String())
	}
	_, txErr := runGenTx(ctx, genConfig{port: spec(topo.Gen, topo.GenIf), flows: flows, count: count, rate: "20kpps", size: "64",
		burst: 16, lcores: "1", idle: "sleep", period: time.Hour, frames: 4096}, &txOut)
	<-ended
	require.NoError(t, txErr, txOut.String())
	require.NoError(t, rxErr, rxOut.String())
	require.True(t, rxOK, rxOut.String())
	require.Contains(t, rxOut.String(), "per flow: 8 of 8 flows received; lost 0, duplicated 0, reordered 0", rxOut.String())

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
