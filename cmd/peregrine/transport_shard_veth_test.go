package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// TestTransportShardedVeth: `transport --shards 2` at both ends of a veth
// pair of two queues, one AF_XDP socket per queue and shard: a counted
// workload completes with every check passing, both shards of each side
// carry operations, and the summary gives each shard's figures and their
// sum, with no frame arriving on another shard's queue.
func TestTransportShardedVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, a veth pair and AF_XDP sockets")
	}
	prefix := fmt.Sprintf("pgsh%d", os.Getpid()%100000)
	a, err := netns.Create(prefix + "-a")
	require.NoError(t, err)
	defer func() { _ = a.Delete() }()
	b, err := netns.Create(prefix + "-b")
	require.NoError(t, err)
	defer func() { _ = b.Delete() }()
	macB := net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x5a, 0x02}
	require.NoError(t, netns.Veth(a, "sh0", b, "sh1", netns.VethOptions{Queues: 2, GRO: true, MACB: macB,
		AddrA: netip.MustParsePrefix("198.18.0.1/24"), AddrB: netip.MustParsePrefix("198.18.0.2/24")}))

	base := transportConfig{window: 8, sizes: "64,4KiB", conns: 4, lcore: -1, idle: "sleep", frames: 8192, frameSize: 2048,
		target: 200 * time.Microsecond, minRTO: time.Millisecond, rtWindow: 512, quiet: true, shards: 2, dcSQs: 16, duration: time.Minute}
	tc := base
	// The target names neither queues nor shard_bits: --shards fills both
	// in (as validation does), and its XDP program then counts frames
	// arriving on another shard's queue.
	tc.role, tc.ip = "target", "198.18.0.102"
	tc.port, err = shardedPortSpec("afxdp:sh1?netns="+b.Name+"&udp_port=5140", tc.shards)
	require.NoError(t, err)
	require.Contains(t, tc.port, "queues=2&shard_bits=1")
	ready := make(chan uint32, 1)
	tc.ready = func(key uint32, _ int) { ready <- key }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tgtOut, out bytes.Buffer
	var tgtErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, tgtErr = runTransport(ctx, tc, &tgtOut)
	}()
	var key uint32
	select {
	case key = <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("the target did not come up:\n%s", tgtOut.String())
	}
	ic := base
	ic.role, ic.port, ic.ip = "initiator", "afxdp:sh0?netns="+a.Name+"&queues=2", "198.18.0.101"
	ic.peerMAC, ic.peerIP, ic.regionKey, ic.count = macB.String(), "198.18.0.102", key, 4000
	ok, err := runTransport(context.Background(), ic, &out)
	cancel()
	wg.Wait()
	require.NoError(t, err)
	require.True(t, ok, "initiator:\n%s\ntarget:\n%s", out.String(), tgtOut.String())
	require.NoError(t, tgtErr, tgtOut.String())
	for _, s := range []string{out.String(), tgtOut.String()} {
		require.Contains(t, s, "shard 0 (queue 0)")
		require.Contains(t, s, "shard 1 (queue 1)")
		require.Contains(t, s, "sum of 2 shards")
	}
	require.Contains(t, out.String(), "RESULT proto=peregrine ops=4000 ")
	require.Contains(t, tgtOut.String(), "mis-steered on arrival (XDP, per queue) [0 0]")
	t.Logf("initiator:\n%s\ntarget:\n%s", out.String(), tgtOut.String())
}
