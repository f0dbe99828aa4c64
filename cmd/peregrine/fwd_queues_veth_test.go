package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestGenFwdOneLoopPerQueueOverVeth: gen --lcores 0,1 on a two-queue veth
// end (AF_XDP) sends count frames on each queue to fwd --lcores 0,1 on the
// other end. veth hands a frame sent on transmit queue q to the peer's
// receive queue q, so each of fwd's queues gets exactly one queue's
// frames: the summaries must show queue 0's stage on lcore 0 and queue 1's
// on lcore 1, each with its own queue's count, and the sums.
func TestGenFwdOneLoopPerQueueOverVeth(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	const count = 400
	tp := netnstest.TwoNS(t, netns.VethOptions{Queues: 2, GRO: true})
	spec := func(ns *netns.NS, ifc string) string { return fmt.Sprintf("afxdp:%s?netns=%s&queues=2", ifc, ns.Name) }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var fwdOut, genOut bytes.Buffer
	var fwdErr error
	ready, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		_, fwdErr = runFwd(ctx, fwdConfig{ports: []string{spec(tp.B, tp.IfB)}, mode: "io", duration: time.Minute, burst: 32, lcores: "0,1", idle: "sleep",
			period: time.Hour, quiet: true, frames: 16384, ready: func() { close(ready) },
			// fwd's counters are printed once its loops stop: it ends when
			// both queues' frames came through.
			done: func(rx uint64) bool { return rx >= 2*count }}, &fwdOut)
	}()
	select {
	case <-ready:
	case <-ended:
		t.Fatalf("fwd ended before gen started: %v\n%s", fwdErr, fwdOut.String())
	}
	ok, err := runGenTx(ctx, genConfig{port: spec(tp.A, tp.IfA), flows: 1, count: count, rate: "5kpps", size: "64",
		burst: 16, lcores: "0,1", idle: "sleep", period: time.Hour, quiet: true, frames: 16384}, &genOut)
	require.NoError(t, err, genOut.String())
	require.True(t, ok, genOut.String())
	stageRx := regexp.MustCompile(`(?m)^  stage (\d): \S+ queue (\d) → \S+ queue \d on lcore (\d) \(CPU (\d)\): rx (\d+), tx (\d+), dropped 0$`)
	<-ended
	require.NoError(t, fwdErr, fwdOut.String())

	g := genOut.String()
	require.Contains(t, g, fmt.Sprintf("queue 0 on lcore 0 (CPU 0): generated %d frames", count), g)
	require.Contains(t, g, fmt.Sprintf("queue 1 on lcore 1 (CPU 1): generated %d frames", count), g)
	require.Contains(t, g, fmt.Sprintf("generated %d frames", 2*count), g)
	require.Contains(t, g, "(sum of 2 queues)", g)

	f := fwdOut.String()
	lines := stageRx.FindAllStringSubmatch(f, -1)
	require.Len(t, lines, 2, f)
	for q, l := range lines {
		want := fmt.Sprint(q)
		require.Equal(t, []string{want, want, want, want}, l[1:5], "queue %d's stage runs on lcore %d (CPU %d): %s", q, q, q, l[0])
		require.Equal(t, fmt.Sprint(count), l[5], "queue %d's stage received its own queue's frames and no other's: %s", q, l[0])
		require.Equal(t, fmt.Sprint(count), l[6], "queue %d's stage forwarded them: %s", q, l[0])
	}
	require.Contains(t, f, fmt.Sprintf("sum of 2 stages on 2 lcore(s): rx %d, tx %d, dropped 0", 2*count, 2*count), f)
}
