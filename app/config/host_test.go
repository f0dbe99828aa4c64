package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/config"
)

const sidecarBase = `
lcores: [{name: a}]
ports: [{name: p0, spec: "null:"}]
pipelines: [{lcore: a, stages: [{kind: sink, port: p0}]}]
`

// TestHostSectionDefaults: a host section with its three required fields
// takes serve's defaults.
func TestHostSectionDefaults(t *testing.T) {
	c, err := config.Parse([]byte(sidecarBase + "host: {socket: /tmp/p.sock, port: \"mem:s/0\", ip: 198.18.0.1}\n"))
	require.NoError(t, err)
	h := c.File.Host
	require.NotNil(t, h)
	require.Equal(t, 0o660, int(h.Mode()))
	require.Equal(t, []int{256, 64 << 10, 256, 16, 1024, 8 << 20, 64, 1024},
		[]int{h.Buffers, h.BufferSize, h.Ring, h.MaxChannels, h.MaxBuffers, h.MaxBufferSize, h.MaxConns, h.MaxRing})
	require.Equal(t, 1, h.Shards)
	uid, gid, err := h.IDs()
	require.NoError(t, err)
	require.Equal(t, []int{-1, -1}, []int{uid, gid})
	require.Equal(t, "198.18.0.1", h.Addr().String())
	c, err = config.Parse([]byte(sidecarBase))
	require.NoError(t, err)
	require.Nil(t, c.File.Host, "no host section, no sidecar")
}

// TestHostSectionErrors: every bad field is named, with its fix.
func TestHostSectionErrors(t *testing.T) {
	for _, tc := range []struct{ host, path, fix string }{
		{`{port: "mem:s/0", ip: 198.18.0.1}`, "host.socket", "socket: /run/peregrine.sock"},
		{`{socket: /s, ip: 198.18.0.1}`, "host.port", "give a port spec"},
		{`{socket: /s, port: "null:", ip: 198.18.0.1}`, "host.port", "mem:PAIR/END, afxdp:IFACE"},
		{`{socket: /s, port: "mem:s/0", ip: "::1"}`, "host.ip", "IPv4"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, socket_mode: "0999"}`, "host.socket_mode", "octal"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, socket_mode: "0060"}`, "host.socket_mode", "owner"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, owner: no-such-user-here}`, "host.owner", "numeric id"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, group: "-5"}`, "host.group", "a group name or an id"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, buffers: 2000}`, "host.buffers", "at most max_buffers"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, buffer_size: 1000}`, "host.buffer_size", "multiple of 64"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, ring: 100}`, "host.ring", "power of two"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, max_ring: 1048576}`, "host.max_ring", "2..65536"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, max_conns: -1}`, "host.max_conns", "1..65536"},
		{`{socket: /s, port: "mem:s/0", ip: 198.18.0.1, shards: 300}`, "host.shards", "1..256"},
		{`{socket: /s, port: "afpacket:eth9", ip: 198.18.0.1, echo: true}`, "host.echo", "mem:PAIR/0"},
		{`{socket: /s, port: "null:", ip: 198.18.0.1}`, "host.port", "afpacket"},
	} {
		_, err := config.Parse([]byte(sidecarBase + "host: " + tc.host + "\n"))
		require.Error(t, err, tc.host)
		require.Contains(t, err.Error(), tc.path+":", tc.host)
		require.Contains(t, err.Error(), tc.fix, tc.host)
	}
	// The host's port is its own: one of the file's ports is refused.
	_, err := config.Parse([]byte(strings.Replace(sidecarBase, `"null:"`, `"mem:s/0"`, 1) + "host: {socket: /s, port: \"mem:s/0\", ip: 198.18.0.1}\n"))
	require.ErrorContains(t, err, "host.port: \"mem:s/0\" opens the same port as ports[0]")
}

// TestSidecarConfig: configs/sidecar.yaml is valid and enables the sidecar.
func TestSidecarConfig(t *testing.T) {
	data, err := os.ReadFile("../../configs/sidecar.yaml")
	require.NoError(t, err)
	c, err := config.Parse(data)
	require.NoError(t, err)
	require.NotNil(t, c.File.Host)
	require.True(t, c.File.Host.Echo)
	require.Equal(t, "mem:side/1", c.File.Host.EchoPort())
}
