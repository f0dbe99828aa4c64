package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestGenFwdSinkOverVeth runs the three tools as a person would, across
// three namespaces joined by veth pairs: gen → fwd (io) → gen --rx. Every
// frame must arrive, in order.
//
// However slowly the machine runs the forwarder and the receiver, no frame
// may be dropped for want of a buffer: a loop starved of CPU cannot stock
// its receive ring, so the kernel can store only what was lent to it
// before, and a run that sends more than that depends on the loops
// getting the CPU in time (it failed so on a loaded machine: the kernel
// dropped on an empty fill ring, and the receiver then waited its minute
// for frames that never came). So count fits in what the kernel holds at
// each hop: an afxdp port lends FillLevel (RingSize/2 = 1024) frames; an
// afpacket port retires a block per frame burst at worst (the 1 ms block
// timeout with gen's bursts of 16), and has blocks for more than count/16
// bursts. Then the receiver waits on an event, all count frames, with a
// generous bound.
func TestGenFwdSinkOverVeth(t *testing.T) {
	for _, driver := range []string{"afxdp", "afpacket"} {
		t.Run(driver, func(t *testing.T) {
			topo := netnstest.ThreeNS(t, netns.VethOptions{GRO: true})
			params := map[string]string{"afxdp": "", "afpacket": "&block_count=128"}[driver]
			spec := func(ns *netns.NS, ifname string) string {
				return fmt.Sprintf("%s:%s?netns=%s%s", driver, ifname, ns.Name, params)
			}
			const count = 1000
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fwdCtx, stopFwd := context.WithCancel(ctx)

			var wg sync.WaitGroup
			var rxOut, fwdOut, txOut bytes.Buffer
			var rxOK bool
			var rxErr, fwdErr, txErr error
			// Frames sent before the receiver and the forwarder have opened
			// their ports would be lost by design: start the sender after both
			// say they are running.
			rxReady, fwdReady := make(chan struct{}), make(chan struct{})
			toolEnded := make(chan struct{}, 2)
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer func() { toolEnded <- struct{}{} }()
				defer stopFwd()
				rxOK, rxErr = runGenRx(ctx, genConfig{port: spec(topo.Sink, topo.SinkIf), flows: 4, expect: count,
					burst: 32, lcores: "0", idle: "sleep", period: time.Hour, frames: 4096, ready: func() { close(rxReady) }}, &rxOut)
			}()
			go func() {
				defer wg.Done()
				defer func() { toolEnded <- struct{}{} }()
				_, fwdErr = runFwd(fwdCtx, fwdConfig{ports: []string{spec(topo.Fwd, topo.FwdGenIf), spec(topo.Fwd, topo.FwdSinkIf)},
					mode: "io", burst: 32, lcores: "1", idle: "sleep", period: time.Hour, frames: 4096, ready: func() { close(fwdReady) }}, &fwdOut)
			}()
			for _, ch := range []chan struct{}{rxReady, fwdReady} {
				select {
				case <-ch:
				case <-toolEnded:
					cancel()
					wg.Wait()
					t.Fatalf("a tool ended before the sender started: rx %v %s\nfwd %v %s", rxErr, rxOut.String(), fwdErr, fwdOut.String())
				}
			}
			_, txErr = runGenTx(ctx, genConfig{port: spec(topo.Gen, topo.GenIf), flows: 4, count: count, rate: "20kpps",
				size: "64-1000", burst: 16, lcores: "0", idle: "sleep", period: time.Hour, frames: 4096}, &txOut)
			wg.Wait()
			require.NoError(t, txErr, txOut.String())
			require.NoError(t, fwdErr, fwdOut.String())
			require.NoError(t, rxErr, rxOut.String())
			require.True(t, rxOK, "receiver:\n%s\nforwarder:\n%s\nsender:\n%s", rxOut.String(), fwdOut.String(), txOut.String())
			require.Contains(t, rxOut.String(), "every expected frame arrived")
			require.Contains(t, rxOut.String(), "lost 0, reordered (late) 0")
		})
	}
}

// TestFabricMiddleboxOverVeth puts `peregrine fabric` between gen and
// gen --rx with 10 % loss: every frame is either received or counted as
// lost by the fabric, exactly.
func TestFabricMiddleboxOverVeth(t *testing.T) {
	topo := netnstest.ThreeNS(t, netns.VethOptions{GRO: true})
	spec := func(ns *netns.NS, ifname string) string { return fmt.Sprintf("afpacket:%s?netns=%s", ifname, ns.Name) }
	const count = 2000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fabCtx, stopFab := context.WithCancel(ctx)

	var wg sync.WaitGroup
	var rxOut, fabOut, txOut bytes.Buffer
	var rxErr, fabErr error
	rxReady, fabReady := make(chan struct{}), make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer stopFab()
		_, rxErr = runGenRx(ctx, genConfig{port: spec(topo.Sink, topo.SinkIf), flows: 1, idleExit: 500 * time.Millisecond,
			burst: 32, lcores: "0", idle: "sleep", period: time.Hour, frames: 4096, ready: func() { close(rxReady) }}, &rxOut)
	}()
	go func() {
		defer wg.Done()
		fabErr = runFabric(fabCtx, fabricConfig{portA: spec(topo.Fwd, topo.FwdGenIf), portB: spec(topo.Fwd, topo.FwdSinkIf),
			both: "loss=10%,delay=100us", seed: 42, lcores: "1", idle: "sleep", period: time.Hour, frames: 8192,
			ready: func() { close(fabReady) }}, &fabOut)
	}()
	<-rxReady
	<-fabReady
	_, txErr := runGenTx(ctx, genConfig{port: spec(topo.Gen, topo.GenIf), count: count, rate: "20kpps", flows: 1,
		size: "64", burst: 16, lcores: "0", idle: "sleep", period: time.Hour, frames: 4096}, &txOut)
	require.NoError(t, txErr)
	wg.Wait()
	require.NoError(t, rxErr, rxOut.String())
	require.NoError(t, fabErr, fabOut.String())

	var received, lost, inFab, outFab int
	_, err := fmt.Sscanf(grepLine(t, rxOut.String(), "received "), "  received %d stamped frames", &received)
	require.NoError(t, err, rxOut.String())
	_, err = fmt.Sscanf(grepLine(t, fabOut.String(), "A→B received"), "  A→B received %d sent %d | lost random %d", &inFab, &outFab, &lost)
	require.NoError(t, err, fabOut.String())
	var dropA, dropB int
	_, err = fmt.Sscanf(grepLine(t, fabOut.String(), "port A dropped"), "  port A dropped on receive %d, port B dropped on receive %d", &dropA, &dropB)
	require.NoError(t, err, fabOut.String())
	// A loaded machine may starve the fabric's loop until its receive
	// ring overflows; the port counts those, so the books still balance.
	require.Equal(t, count, inFab+dropA, "the fabric saw, or its port counted dropping, every frame gen sent")
	require.Equal(t, count, received+lost+dropA, "received %d + lost %d + dropped at the fabric's port %d\n%s\n%s", received, lost, dropA, rxOut.String(), fabOut.String())
	require.InDelta(t, count/10, lost, count/20, "about 10 %% lost")
}

func grepLine(t *testing.T, text, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), strings.TrimSpace(prefix)) {
			return line
		}
	}
	t.Fatalf("no line starting %q in:\n%s", prefix, text)
	return ""
}

func TestDemoOverVeth(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	for _, driver := range []string{"afxdp", "afpacket"} {
		for _, workload := range []string{"forward", "transport"} {
			t.Run(driver+"/"+workload, func(t *testing.T) {
				var out bytes.Buffer
				ok, err := runDemo(context.Background(), demoConfig{
					duration: 300 * time.Millisecond, size: "64-1000", burst: 32, lcores: "0,1", workload: workload,
					idle: "sleep", frames: 16384, quiet: true, veth: true, driver: driver, // afxdp stocks 2048-entry fill rings on 4 ports
					profile: "loss=0.5%,delay=10us", window: 16, seed: 1, target: 200 * time.Microsecond, minRTO: time.Millisecond,
				}, &out)
				require.NoError(t, err)
				require.True(t, ok, out.String())
				require.Contains(t, out.String(), driver+" ports over veth")
				require.Contains(t, out.String(), "verification passed")
			})
		}
	}
}
