package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
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

// readsCapture reports whether a config reads a pcap: port, an input the
// file does not carry (TestRoCEConfigPcapToPcap writes it).
func readsCapture(t *testing.T, file string) bool {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	return regexp.MustCompile(`spec: *"pcap:`).Match(data)
}

// writeRoCECapture writes RoCEv2 SEND Only frames to path, one per QPN
// of qps, the first four with PSN 0 and the rest with PSN 1.
func writeRoCECapture(t *testing.T, path string, qps []uint32) {
	f, err := os.Create(path)
	require.NoError(t, err)
	w := pcapgo.NewWriter(f)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	a := wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
		SrcPort: 49152, NoUDPChecksum: true,
	}
	for i, qp := range qps {
		spec := roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: qp, PSN: uint32(i / 4)}, Payload: []byte("payload!")}
		b := make([]byte, 256)
		n, err := spec.Encode(b)
		require.NoError(t, err)
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: n, Length: n}, b[:n]))
	}
	require.NoError(t, f.Close())
}

// TestRoCEConfigPcapToPcap runs configs/roce-pcap.yaml (its capture paths
// moved to a temporary directory) on a capture naming the open QPs 3, 4
// and 0x100 and the retired QP 2: the run ends at the capture's end, the
// four frames for open QPs reach the host with local numbers and good
// ICRCs, the two stale ones are dropped and counted.
func TestRoCEConfigPcapToPcap(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "roce-in.pcap"), filepath.Join(dir, "roce-out.pcap")
	writeRoCECapture(t, in, []uint32{3, 4, 2, 0x100, 3, 2})
	data, err := os.ReadFile("../../configs/roce-pcap.yaml")
	require.NoError(t, err)
	yaml := strings.NewReplacer(`"pcap:roce-in.pcap"`, `"pcap:`+in+`"`, `"pcap-out:roce-out.pcap"`, `"pcap-out:`+out+`"`).Replace(string(data))
	require.NotEqual(t, string(data), yaml, "configs/roce-pcap.yaml no longer names roce-in.pcap and roce-out.pcap")
	cfg := filepath.Join(dir, "roce.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(yaml+"\n"), 0o644))

	o, code := runCLI(t, "run", "-c", cfg, "--quiet")
	require.Equal(t, 0, code, o)
	require.Contains(t, o, "verification passed")
	require.Contains(t, o, "retired 0x000002")
	require.Contains(t, o, "rx=6 fwd=4 other=0 drop{malformed=0 icrc=0 retired_qpn=2 unknown_qpn=0")
	require.Regexp(t, `pool: \d+ frames, 0 in use after stop`, o)

	var d bytes.Buffer
	require.NoError(t, decodeFile(out, wire.DefaultPort, 0, &d))
	lines := strings.Split(strings.TrimSpace(d.String()), "\n")
	require.Len(t, lines, 4, d.String())
	for _, l := range lines {
		require.Regexp(t, `roce RC SEND Only qp=0x0000\d\d .* icrc=0x[0-9a-f]{8} ok$`, l)
	}
}
