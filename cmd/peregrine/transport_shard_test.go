package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestShardedPortSpec: --shards completes an afxdp: port with the queue
// count and, where the XDP program filters the transport's UDP port, the
// CID's shard bits; a contradicting shard_bits is refused naming both;
// other drivers are left alone.
func TestShardedPortSpec(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		shards int
		want   string
	}{
		{"afxdp:veth0", 2, "afxdp:veth0?queues=2"},
		{"afxdp:veth0?netns=a", 4, "afxdp:veth0?netns=a&queues=4"},
		{"afxdp:veth0?queues=2&udp_port=5140", 2, "afxdp:veth0?queues=2&udp_port=5140&shard_bits=1"},
		{"afxdp:veth0?udp_port=5140", 3, "afxdp:veth0?udp_port=5140&queues=3&shard_bits=2"},
		{"afxdp:veth0?queues=2&udp_port=5140&shard_bits=1", 2, "afxdp:veth0?queues=2&udp_port=5140&shard_bits=1"},
		{"afxdp:veth0?", 2, "afxdp:veth0?queues=2"},
		{"afxdp:veth0", 1, "afxdp:veth0"},
		{"mem:ab/0?queues=2", 2, "mem:ab/0?queues=2"},
		{"afpacket:veth0", 2, "afpacket:veth0"},
	} {
		got, err := shardedPortSpec(tc.spec, tc.shards)
		require.NoError(t, err, tc.spec)
		require.Equal(t, tc.want, got, "%s with %d shards", tc.spec, tc.shards)
	}
	_, err := shardedPortSpec("afxdp:veth0?queues=4&udp_port=5140&shard_bits=1", 4)
	require.ErrorContains(t, err, "shard_bits=1 but --shards 4 puts the shard in 2 CID bits")
}

// TestTransportShardBitsContradiction: the contradiction is a usage error
// (exit 2) found before any port opens, naming the flags as typed.
func TestTransportShardBitsContradiction(t *testing.T) {
	out, code := runCLI(t, "transport", "target", "--shards", "2", "--ip", "198.18.0.2", "--port", "afxdp:nosuchif0?udp_port=5140&shard_bits=3")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "--port")
	require.Contains(t, out, "--shards 2")
	require.NotContains(t, out, "nosuchif0: no such") // refused before opening
}
