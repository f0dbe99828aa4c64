package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestTransportMCSQOverVeth: `transport initiator --targets 300 --dc-sqs 8`
// against a plain target across two namespaces (AF_PACKET over veth, no
// middlebox): client goroutines post through the MCSQ, every WR completes
// once, in posting order on the ordered CQ.
func TestTransportMCSQOverVeth(t *testing.T) {
	netnstest.SkipUnlessRoot(t)
	// The fabric sits in the middle namespace, unimpaired but for a delay.
	out, _, _ := vethTransport{prefix: "pgmq", driver: "afpacket", regionLen: true,
		fabric: fabricConfig{both: "delay=10us", seed: 5, udpPort: 4791, lcores: "1", idle: "yield", period: time.Hour, frames: 16384},
		target: transportConfig{sizes: "512", window: 64, lcore: 1, idle: "yield", frames: 16384, target: testTargetDelay, minRTO: time.Millisecond,
			seed: 2, quiet: true},
		initiator: transportConfig{sizes: "512", window: 16, count: 2000, duration: 2 * time.Minute, lcore: 0, idle: "yield",
			frames: 16384, target: testTargetDelay, minRTO: time.Millisecond, seed: 1, quiet: true, targets: 300, dcSQs: 8},
	}.run(t)
	require.Contains(t, out, "2000 WRs to 300 targets over 8 DC SQs: 2000 ok, 0 failed")
}
