package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
)

// TestRoCEPcapToPcap runs `peregrine roce` from one capture to another:
// frames for the open QPs come out with local numbers and good ICRCs
// (decode says ok), the retired QP's are dropped and counted.
func TestRoCEPcapToPcap(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	f, err := os.Create(in)
	require.NoError(t, err)
	w := pcapgo.NewWriter(f)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	a := wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
		SrcPort: 49152, NoUDPChecksum: true,
	}
	// --retire 1 retires QPN 2; --open 2 opens 3 and 4; --qp binds 0x100.
	for i, qp := range []uint32{3, 4, 2, 0x100, 3, 2} {
		psn := uint32(i / 4)
		spec := roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: qp, PSN: psn}, Payload: []byte("payload!")}
		b := make([]byte, 256)
		n, err := spec.Encode(b)
		require.NoError(t, err)
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: n, Length: n}, b[:n]))
	}
	require.NoError(t, f.Close())

	var o bytes.Buffer
	err = runRoCE(context.Background(), roceConfig{
		ports: []string{"pcap:" + in, "pcap-out:" + out}, burst: 32, lcores: "0", idle: "sleep",
		period: time.Hour, frames: 1024, slots: 8, retire: 1, open: 2, qps: []string{"qpn=0x100,psn=0"}, pmtu: 1024,
	}, &o)
	require.NoError(t, err, o.String())
	require.Contains(t, o.String(), "retired 1 QPN(s): 0x000002")
	require.Contains(t, o.String(), "qp 0x000003 -> local")
	require.Contains(t, o.String(), "rx=6 fwd=4 other=0 drop{malformed=0 icrc=0 retired_qpn=2 unknown_qpn=0")

	var d bytes.Buffer
	require.NoError(t, decodeFile(out, wire.DefaultPort, 0, &d))
	lines := strings.Split(strings.TrimSpace(d.String()), "\n")
	require.Len(t, lines, 4, d.String())
	for _, l := range lines {
		require.Regexp(t, `roce RC SEND Only qp=0x0000\d\d .* icrc=0x[0-9a-f]{8} ok$`, l)
	}
	require.NotContains(t, d.String(), fmt.Sprintf("qp=%#06x", 0x100), "translated to a local number")
}

func TestRoCEFlagErrors(t *testing.T) {
	with := func(f func(*roceConfig)) roceConfig {
		c := roceConfig{ports: []string{"null:", "null:"}, burst: 32, slots: 8, lcores: "0", idle: "sleep", frames: 1024, period: time.Second, pmtu: 1024}
		f(&c)
		return c
	}
	for _, c := range []struct {
		cfg  roceConfig
		want string
	}{
		{with(func(c *roceConfig) { c.ports = c.ports[:1] }), "--port: give two ports"},
		{with(func(c *roceConfig) { c.burst = 0 }), "--burst"},
		{with(func(c *roceConfig) { c.qps = []string{"qpn=1"} }), "--qp"},
		{with(func(c *roceConfig) { c.qps = []string{"bogus"} }), "--qp \"bogus\""},
	} {
		err := runRoCE(context.Background(), c.cfg, &bytes.Buffer{})
		require.ErrorContains(t, err, c.want)
	}
}

// TestDemoRoCE runs `demo --workload roce`: QPs churn while requests cross
// the stage, every frame for a closed QP is dropped as retired, none
// reaches another QP's context, and the counters agree exactly.
func TestDemoRoCE(t *testing.T) {
	var out bytes.Buffer
	ok, err := runDemo(context.Background(), demoConfig{
		duration: 300 * time.Millisecond, workload: "roce", burst: 32, lcores: "0", idle: "sleep", frames: 8192, quiet: true,
	}, &out)
	require.NoError(t, err)
	require.True(t, ok, out.String())
	require.Contains(t, out.String(), "no request reached a context that another QP holds (0 did)")
	require.Contains(t, out.String(), "verification passed")
}

// TestRoCERetireSummarised: --retire N prints one line, the first and last
// few numbers with the count between, not a line per number.
func TestRoCERetireSummarised(t *testing.T) {
	out, code := runGuarded(t, []string{"roce", "--port", "null:", "--port", "null:", "--retire", "20", "--duration", "20ms", "--quiet"})
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "retired 20 QPN(s): 0x000002, 0x000003, 0x000004, 0x000005, … (12 more) …, 0x000012, 0x000013, 0x000014, 0x000015\n")
	require.Equal(t, 1, strings.Count(out, "retired "), out)
}

// TestRoCEJSON: roce --json prints JSON lines only, the last a summary
// with the stage's counters.
func TestRoCEJSON(t *testing.T) {
	out, code := runGuarded(t, []string{"roce", "--port", "null:", "--port", "null:", "--duration", "30ms", "--stats-period", "10ms", "--json"})
	require.Equal(t, exitOK, code, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last map[string]any
	for _, l := range lines {
		last = nil
		require.NoError(t, json.Unmarshal([]byte(l), &last), "not a JSON line: %q", l)
	}
	require.Equal(t, "summary", last["type"], out)
	require.Contains(t, out, `"to_host_received"`)
	require.NotContains(t, out, "<nil>")
}
