package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestTransportMCSQOverVeth: `transport initiator --targets 300 --dc-sqs 8`
// against a plain target across two namespaces (AF_PACKET over veth, no
// middlebox): client goroutines post through the MCSQ, every WR completes
// once, in posting order on the ordered CQ.
func TestTransportMCSQOverVeth(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	topo, err := netns.ThreeNS(fmt.Sprintf("pgmq-%d", time.Now().UnixNano()%100000), "pgmq", netns.VethOptions{})
	require.NoError(t, err)
	defer topo.Delete()
	// The fabric sits in the middle namespace, unimpaired but for a delay.
	spec := func(ns *netns.NS, ifn string) string { return fmt.Sprintf("afpacket:%s?netns=%s", ifn, ns.Name) }
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
			both: "delay=10us", seed: 5, udpPort: 4791, lcores: "1", idle: "yield", period: time.Hour, frames: 16384,
			ready: func() { close(fabReady) }}, &fabOut)
	}()
	<-fabReady
	type ready struct {
		key uint32
		len int
	}
	tgtReady := make(chan ready, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, tgtErr = runTransport(ctx, transportConfig{role: "target", port: spec(topo.Sink, topo.SinkIf), ip: topo.SinkAddr.Addr().String(),
			sizes: "512", window: 64, lcore: 1, idle: "yield", frames: 16384, target: testTargetDelay, minRTO: time.Millisecond,
			seed: 2, quiet: true, ready: func(key uint32, n int) { tgtReady <- ready{key, n} }}, &tgtOut)
	}()
	r := <-tgtReady
	var out bytes.Buffer
	ok, err := runTransport(context.Background(), transportConfig{role: "initiator", port: spec(topo.Gen, topo.GenIf), ip: topo.GenAddr.Addr().String(),
		peerMAC: net.HardwareAddr(topo.SinkMAC).String(), peerIP: topo.SinkAddr.Addr().String(), regionKey: r.key, regionLen: r.len,
		sizes: "512", window: 16, count: 2000, duration: 2 * time.Minute, lcore: 0, idle: "yield",
		frames: 16384, target: testTargetDelay, minRTO: time.Millisecond, seed: 1, quiet: true, targets: 300, dcSQs: 8}, &out)
	cancel()
	wg.Wait()
	require.NoError(t, err)
	require.True(t, ok, "initiator:\n%s\ntarget:\n%s\nfabric:\n%s", out.String(), tgtOut.String(), fabOut.String())
	require.NoError(t, tgtErr, tgtOut.String())
	require.NoError(t, fabErr, fabOut.String())
	require.Contains(t, out.String(), "2000 WRs to 300 targets over 8 DC SQs: 2000 ok, 0 failed")
}
