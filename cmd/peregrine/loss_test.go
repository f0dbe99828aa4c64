package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
)

// writeFrames writes a capture of Ethernet frames of the sizes given (a
// RoCE sample frame padded or not: what matters is the size).
func writeFrames(t *testing.T, sizes ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	require.NoError(t, w.WriteFileHeader(262144, layers.LinkTypeEthernet))
	for i, n := range sizes {
		b := make([]byte, n)
		copy(b, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5})
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: n, Length: n}, b))
	}
	return buf.Bytes()
}

// Frames too large for a pool frame (9 KB, 70 KB) in a pcap input fail the
// run that replays them, naming how many and why; so does a capture
// damaged part-way. Neither is only a counter or a log line.
func TestCaptureInputLossFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.pcap")
	require.NoError(t, os.WriteFile(big, writeFrames(t, 60, 9000, 70000, 100), 0o644))
	whole := writeFrames(t, 60, 60, 60)
	damaged := filepath.Join(dir, "damaged.pcap")
	require.NoError(t, os.WriteFile(damaged, whole[:len(whole)-20], 0o644))
	var samples bytes.Buffer
	_, err := app.WriteRoCESample(&samples, app.DefaultRoCESampleQPNs)
	require.NoError(t, err)

	for _, in := range []string{big, damaged} {
		for name, args := range map[string][]string{
			"gen --replay": {"gen", "--port", "pcap-out:" + filepath.Join(dir, "gen.pcap"), "--replay", in, "--stats-period", "1h", "--duration", "30s"},
			"roce":         {"roce", "--port", "pcap:" + in, "--port", "pcap-out:" + filepath.Join(dir, "roce.pcap"), "--stats-period", "1h", "--duration", "30s", "--frames", "1024"},
		} {
			out, code := runCLI(t, args...)
			require.Equal(t, 1, code, "%s of %s: %s", name, in, out)
			require.Contains(t, out, "[FAIL] pcap:"+in+" replayed whole: ", name)
			require.Contains(t, out, "verification FAILED", name)
		}
	}
	out, code := runCLI(t, "roce", "--port", "pcap:"+big, "--port", "pcap-out:"+filepath.Join(dir, "roce.pcap"), "--stats-period", "1h", "--duration", "30s", "--frames", "1024")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "2 records larger than a pool frame's room of", "both the 9 KB and the 70 KB frame")
	require.Contains(t, out, "(the largest 70000 B)")

	cfg := filepath.Join(dir, "fwd.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`lcores: [{name: a, cpu: 0}]
ports:
  - {name: in, spec: "pcap:`+big+`"}
  - {name: out, spec: "pcap-out:`+filepath.Join(dir, "run.pcap")+`"}
pipelines:
  - lcore: a
    stages:
      - {kind: forwarder, ports: [in, out]}
run: {duration: 1s}
`), 0o644))
	out, code = runCLI(t, "run", "-c", cfg)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "[FAIL] pcap:"+big+" replayed whole: 2 records larger")
}

// A capture that cannot be written whole (a full disk) fails demo as it
// fails run, rather than passing with a truncated file.
func TestDemoCaptureToFullDiskFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this machine")
	}
	for _, w := range []string{"forward", "transport"} {
		out, code := runCLI(t, "demo", "--workload", w, "--capture", "/dev/full", "--duration", "300ms", "--quiet")
		require.Equal(t, 1, code, "%s: %s", w, out)
		require.Contains(t, out, "[FAIL] capture /dev/full written whole: ", w)
		require.Contains(t, out, "no space left on device", w)
	}
}

// gen --rx that received nothing has not measured anything: it fails.
func TestGenRxNothingReceivedFails(t *testing.T) {
	out, code := runCLI(t, "gen", "--rx", "--port", "mem:nothing/1", "--duration", "200ms", "--stats-period", "1h")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "[FAIL] frames arrived (0 received")
}

// fwd --mode csum counts bad checksums; --quiet prints no live line.
func TestFwdCsumQuiet(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	frames := writeFrames(t) // header only
	var buf bytes.Buffer
	buf.Write(frames)
	w := pcapgo.NewWriter(&buf)
	// An IPv4/UDP frame with a wrong header checksum (all zero).
	f := make([]byte, 60)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2, 0x9c, 0x40, 0, 9, 0, 8, 0, 0})
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: 60, Length: 60}, f))
	require.NoError(t, os.WriteFile(in, buf.Bytes(), 0o644))
	out, code := runCLI(t, "fwd", "--port", "pcap:"+in, "--port", "pcap-out:"+filepath.Join(dir, "out.pcap"), "--mode", "csum",
		"--duration", "1500ms", "--stats-period", "500ms", "--quiet")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "checksums: 1 bad IPv4 header, 0 bad TCP/UDP/ICMP of 1 frames")
	require.NotContains(t, out, "[  0.5s]", "--quiet")
}

// gen's address options: an IPv6 range with a VLAN tag and a destination
// port range, captured and decoded, received whole by gen --rx told the
// same source port.
func TestGenAddressing(t *testing.T) {
	capture := filepath.Join(t.TempDir(), "gen.pcap")
	out, code := runCLI(t, "gen", "--port", "pcap-out:"+capture, "--count", "40", "--size", "128", "--flows", "2",
		"--src-ip", "2001:db8::1-2001:db8::4", "--dst-ip", "2001:db8::100", "--src-port", "30000", "--dst-port", "7000-7009",
		"--vlan", "42", "--dst-mac", "02:aa:00:00:00:01", "--stats-period", "1h")
	require.Equal(t, 0, code, out)
	data, err := os.ReadFile(capture)
	require.NoError(t, err)
	r, err := pcapgo.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	var frame []byte
	for range 4 {
		frame, _, err = r.ReadPacketData()
		require.NoError(t, err)
	}
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Equal(t, uint16(42), p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q).VLANIdentifier)
	require.Equal(t, "02:aa:00:00:00:01", p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet).DstMAC.String())
	ip := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	require.Equal(t, "2001:db8::4 30001 2001:db8::100 7003", fmt.Sprint(ip.SrcIP, " ", uint16(udp.SrcPort), " ", ip.DstIP, " ", uint16(udp.DstPort)), "the fourth frame")
	out, code = runCLI(t, "gen", "--rx", "--port", "pcap:"+capture, "--flows", "2", "--src-port", "30000", "--expect", "40", "--duration", "30s", "--stats-period", "1h")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "[ok  ] every expected frame arrived (40 of 40)")

	out, code = runCLI(t, "gen", "--port", "null:", "--src-ip", "198.18.0.1", "--dst-ip", "2001:db8::1", "--count", "1")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "--src-ip 198.18.0.1 and --dst-ip 2001:db8::1")
}
