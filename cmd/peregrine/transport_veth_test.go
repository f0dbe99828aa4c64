package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestTransportEndToEndThroughFabricMiddlebox runs the initiator and the
// target as two endpoints in their own namespaces on AF_XDP ports, with
// peregrine fabric in the middle namespace dropping 1 % each way: every
// operation completes, in order where promised, pulled bytes intact. The
// loops yield when idle: sleeping ones add up to a millisecond per hop to
// every round trip.
//
// This checks function, not congestion control, so Swift's target delay is
// set above any round trip a loaded machine makes (testTargetDelay): with
// the 200 µs of a real fabric, a machine whose other work keeps the three
// loops off their CPUs measures round trips of 25–660 ms, Swift takes that
// for congestion, shrinks every window to MinCwnd (0.01) and paces one
// packet per 100 SRTT — 6 to 20 s — so the run finished 35 to 49 of its 100
// operations in its minute. The run ends on the event (count operations
// done), bounded generously.
func TestTransportEndToEndThroughFabricMiddlebox(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	out, tgtOut, fabOut := vethTransport{prefix: "pgtr", driver: "afxdp", veth: netns.VethOptions{GRO: true},
		fabric: fabricConfig{both: "loss=1%,delay=10us", seed: 5, udpPort: 4791, lcores: "1", idle: "yield", period: time.Hour, frames: 16384},
		target: transportConfig{sizes: "4KiB,64KiB", window: 16, lcore: 1, idle: "yield", frames: 16384, target: testTargetDelay, minRTO: time.Millisecond,
			seed: 2, quiet: true, postRecv: 16, qpns: true},
		initiator: transportConfig{sizes: "4KiB,64KiB", window: 16, conns: 2, pullEvery: 3, count: 100, duration: 5 * time.Minute, lcore: 0, idle: "yield",
			frames: 16384, target: testTargetDelay, minRTO: time.Millisecond, seed: 1, quiet: true, sends: 4, qpns: true},
	}.run(t)
	require.Contains(t, out, "RESULT proto=peregrine ops=100")
	require.Contains(t, out, "[ok  ] Sends completed without error")
	require.Regexp(t, `global QPNs: \d+ opened, [1-9]\d* packets translated through the CAM; dropped: retired 0, unknown 0, misrouted 0, wrong source 0, missing 0`, out, "both ends on global QPNs (--global-qpns)")
	require.Contains(t, tgtOut, " 0 with wrong bytes; placement")
	require.True(t, strings.Contains(fabOut, "lost random"), fabOut)
}

// testTargetDelay is Swift's target delay in the veth tests: above the
// round trips of a machine loaded enough to starve the loops (measured up to
// 660 ms with a CPU hog on each core), within swift's 1 s bound.
const testTargetDelay = time.Second
