package main

import (
	"bytes"
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

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestDecodePrintsTransportAndRoCEFrames(t *testing.T) {
	addrs := &wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
	}
	buf := make([]byte, 2048)
	h := wire.Header{Version: 1, DestCID: 0x1234, Type: wire.TypePushUnsolicitedData, PSN: 77, RSN: 5}
	n, err := wire.EncodeFrame(buf, addrs, &h, []byte("hello"))
	require.NoError(t, err)
	transport := append([]byte(nil), buf[:n]...)
	roceAddrs := *addrs
	roceAddrs.SrcPort, roceAddrs.DstPort = 49152, 4791 // RoCEv2: entropy source port
	n, err = wire.EncodeRoCEFrame(buf, &roceAddrs, &wire.BTH{Opcode: 4, DestQP: 0x42, PSN: 9, PKey: 0xffff}, []byte("data"))
	require.NoError(t, err)
	roce := append([]byte(nil), buf[:n]...)

	path := filepath.Join(t.TempDir(), "cap.pcap")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := pcapgo.NewWriter(f)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	for _, frame := range [][]byte{transport, roce, transport[:30]} {
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(frame), Length: len(frame)}, frame))
	}
	require.NoError(t, f.Close())

	var out bytes.Buffer
	require.NoError(t, decodeFile(path, wire.DefaultPort, 0, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	require.Contains(t, lines[0], "cid=0x001234")
	require.Contains(t, lines[0], "PushUnsolicitedData")
	require.Contains(t, lines[0], "psn=77")
	require.Contains(t, strings.ToLower(lines[1]), "qp")
	require.Regexp(t, `qp=0x000042 psn=9 .* icrc=0x[0-9a-f]{8} ok$`, lines[1], "BTH fields and ICRC status")
	require.NotContains(t, lines[2], "psn=77", "a truncated frame is not decoded as if whole")

	out.Reset()
	require.NoError(t, decodeFile(path, wire.DefaultPort, 1, &out))
	require.Equal(t, 1, strings.Count(out.String(), "\n"), "--count 1")

	require.ErrorContains(t, decodeFile(filepath.Join(t.TempDir(), "missing.pcap"), wire.DefaultPort, 0, &out), "no such file")
}

// TestDecodeReadsPcapngAndStdin: Wireshark's default format and a capture
// piped in with "-" decode like a pcap file.
func TestDecodeReadsPcapngAndStdin(t *testing.T) {
	addrs := &wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
	}
	buf := make([]byte, 2048)
	h := wire.Header{Version: 1, DestCID: 0x1234, Type: wire.TypePushUnsolicitedData, PSN: 77, RSN: 5}
	n, err := wire.EncodeFrame(buf, addrs, &h, []byte("hello"))
	require.NoError(t, err)

	var ng bytes.Buffer
	w, err := pcapgo.NewNgWriter(&ng, layers.LinkTypeEthernet)
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: n, Length: n, InterfaceIndex: 0}, buf[:n]))
	}
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "cap.pcapng")
	require.NoError(t, os.WriteFile(path, ng.Bytes(), 0o644))

	run := func(stdin []byte, args ...string) (string, int) {
		var out, errOut bytes.Buffer
		root := newRootCommand()
		root.SetOut(&out)
		root.SetIn(bytes.NewReader(stdin))
		code := execute(root, args, &errOut)
		return out.String() + errOut.String(), code
	}
	for name, c := range map[string]struct {
		stdin []byte
		args  []string
	}{
		"pcapng file":  {nil, []string{"decode", path}},
		"pcapng stdin": {ng.Bytes(), []string{"decode", "-"}},
	} {
		out, code := run(c.stdin, c.args...)
		require.Equal(t, 0, code, "%s: %s", name, out)
		require.Equal(t, 2, strings.Count(out, "psn=77"), "%s: %s", name, out)
	}
	out, code := run([]byte("this is not a capture"), "decode", "-")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "standard input: neither a pcap nor a pcapng capture")
	out, code = run(nil, "decode")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "- for standard input")
}

// TestDecodeHelpSaysOnlyWhatExists: the help names no capture source the
// binary cannot make.
func TestDecodeHelpSaysOnlyWhatExists(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	require.Equal(t, 0, execute(root, []string{"decode", "--help"}, &out))
	require.NotContains(t, out.String(), "mirror")
	require.Contains(t, out.String(), "pcapng")
}
