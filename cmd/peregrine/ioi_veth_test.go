package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

var goodputRE = regexp.MustCompile(`goodput_gbps=([0-9.]+)`)

// TestIOIOverVethThroughFabric pushes 16 MiB messages between two
// namespaces over AF_XDP, through peregrine fabric in the middle one with
// four paths of 200 Mbit/s each, once every packet in order and once with
// IOI: both complete every operation, and the goodputs are logged. The
// issue's goal (IOI at least 3x in order) is asserted only with
// PEREGRINE_IOI_VETH_RATIO=1, on a quiet machine: on a shared one the poll
// loops, not the paths, bound the goodput.
func TestIOIOverVethThroughFabric(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("moves 64 MiB through veth; -short skips it")
	}
	goodput := map[string]float64{}
	for _, mode := range []string{"inorder", "on"} {
		goodput[mode] = runIOIVeth(t, mode)
	}
	t.Logf("16 MiB pushes over 4 × 200 Mbit/s paths: in order %.3f Gbit/s, IOI %.3f Gbit/s (%.2fx)",
		goodput["inorder"], goodput["on"], goodput["on"]/goodput["inorder"])
	if os.Getenv("PEREGRINE_IOI_VETH_RATIO") != "" {
		require.GreaterOrEqual(t, goodput["on"]/goodput["inorder"], 3.0)
	}
}

func runIOIVeth(t *testing.T, mode string) float64 {
	topo, err := netns.ThreeNS(fmt.Sprintf("pgioi-%d", time.Now().UnixNano()%100000), "pgioi", netns.VethOptions{GRO: true})
	require.NoError(t, err)
	defer topo.Delete()
	spec := func(ns *netns.NS, ifn string) string { return fmt.Sprintf("afxdp:%s?netns=%s", ifn, ns.Name) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var fabOut, tgtOut bytes.Buffer
	var fabErr, tgtErr error
	fabReady := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		fabErr = runFabric(ctx, fabricConfig{portA: spec(topo.Fwd, topo.FwdGenIf), portB: spec(topo.Fwd, topo.FwdSinkIf),
			both: "delay=5us,paths=4,path-rate=200mbit,path-delay=0/2us/5us/10us,spray=adaptive", seed: 5, udpPort: 5140,
			lcores: "1", idle: "yield", period: time.Hour, frames: 16384, ready: func() { close(fabReady) }}, &fabOut)
	}()
	<-fabReady
	tgtReady := make(chan uint32, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, tgtErr = runTransport(ctx, transportConfig{role: "target", port: spec(topo.Sink, topo.SinkIf), ip: topo.SinkAddr.Addr().String(),
			sizes: "16MiB", window: 1, lcore: 1, idle: "yield", frames: 16384, target: testTargetDelay, minRTO: 5 * time.Millisecond,
			seed: 2, quiet: true, ioi: mode, ready: func(key uint32, _ int) { tgtReady <- key }}, &tgtOut)
	}()
	key := <-tgtReady
	var out bytes.Buffer
	ok, err := runTransport(context.Background(), transportConfig{role: "initiator", port: spec(topo.Gen, topo.GenIf), ip: topo.GenAddr.Addr().String(),
		peerMAC: net.HardwareAddr(topo.SinkMAC).String(), peerIP: topo.SinkAddr.Addr().String(), regionKey: key,
		msgSize: "16MiB", window: 1, conns: 1, count: 4, duration: 5 * time.Minute, lcore: 0, idle: "yield",
		frames: 16384, target: testTargetDelay, minRTO: 5 * time.Millisecond, seed: 1, quiet: true, ioi: mode}, &out)
	cancel()
	wg.Wait()
	require.NoError(t, err)
	require.True(t, ok, "initiator:\n%s\ntarget:\n%s\nfabric:\n%s", out.String(), tgtOut.String(), fabOut.String())
	require.NoError(t, tgtErr, tgtOut.String())
	require.NoError(t, fabErr, fabOut.String())
	require.Contains(t, out.String(), "RESULT proto=peregrine ops=4")
	m := goodputRE.FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	g, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	t.Logf("--ioi %s: %s", mode, m[0])
	return g
}
