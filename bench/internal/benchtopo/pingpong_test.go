package benchtopo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPingPong checks that the cross-core ping-pong completes its rounds
// between the two CPUs the benchmarks use.
func TestPingPong(t *testing.T) {
	cpuA, cpuB, err := TwoCPUs()
	require.NoError(t, err)
	rtt, err := PingPong(cpuA, cpuB, 5*PingPongBatch)
	require.NoError(t, err)
	require.Positive(t, rtt)
	t.Logf("round trip of a cache line between CPUs %d and %d: %v", cpuA, cpuB, rtt)
}
