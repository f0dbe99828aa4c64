package main

import (
	"os"
	"regexp"
	"strconv"
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
	out, _, _ := vethTransport{prefix: "pgioi", driver: "afxdp", veth: netns.VethOptions{GRO: true},
		fabric: fabricConfig{both: "delay=5us,paths=4,path-rate=200mbit,path-delay=0/2us/5us/10us,spray=adaptive", seed: 5, udpPort: 5140,
			lcores: "1", idle: "yield", period: time.Hour, frames: 16384},
		target: transportConfig{sizes: "16MiB", window: 1, lcore: 1, idle: "yield", frames: 16384, target: testTargetDelay, minRTO: 5 * time.Millisecond,
			seed: 2, quiet: true, ioi: mode},
		initiator: transportConfig{msgSize: "16MiB", window: 1, conns: 1, count: 4, duration: 5 * time.Minute, lcore: 0, idle: "yield",
			frames: 16384, target: testTargetDelay, minRTO: 5 * time.Millisecond, seed: 1, quiet: true, ioi: mode},
	}.run(t)
	require.Contains(t, out, "RESULT proto=peregrine ops=4")
	m := goodputRE.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	g, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	t.Logf("--ioi %s: %s", mode, m[0])
	return g
}
