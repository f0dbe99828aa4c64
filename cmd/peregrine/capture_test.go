package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// demoCapture runs the demo for a second with --capture (the initiator's
// port mirrored to a pcap file) and returns the capture's path.
func demoCapture(t *testing.T) string {
	t.Helper()
	capture := filepath.Join(t.TempDir(), "demo.pcap")
	out, code := runCLI(t, "demo", "--duration", "1s", "--drain", "1m", "--quiet", "--capture", capture)
	require.Equal(t, 0, code, out)
	st, err := os.Stat(capture)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(1000), "the capture holds almost nothing")
	return capture
}

// TestRunConfigCapture: a capture= parameter on a config's port spec
// mirrors that port (here the demo config's initiator port).
func TestRunConfigCapture(t *testing.T) {
	data, err := os.ReadFile("../../configs/demo.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	capture := filepath.Join(dir, "initiator.pcap")
	cfg := strings.Replace(string(data), `"mem:ini/0?size=4096"`, `"mem:ini/0?size=4096&capture=`+capture+`"`, 1)
	require.NotEqual(t, string(data), cfg, "configs/demo.yaml no longer names mem:ini/0?size=4096")
	path := filepath.Join(dir, "demo.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	out, code := runCLI(t, "run", "-c", path, "--duration", "1s", "--quiet")
	require.Equal(t, 0, code, out)
	out, code = runCLI(t, "decode", capture)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "peregrine ConnOpen")
	require.Contains(t, out, "peregrine PushUnsolicitedData")
}

// TestCaptureParamRefusesUnwritableFile: a capture file that cannot be
// created fails the run naming it, with nothing left open.
func TestCaptureParamRefusesUnwritableFile(t *testing.T) {
	data, err := os.ReadFile("../../configs/gen-sink.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	// A directory that does not exist is the file's mistake, found before
	// anything opens (exit 2).
	cfg := strings.Replace(string(data), `"mem:wire/1"`, `"mem:wire/1?capture=/nonexistent/dir/x.pcap"`, 1)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	out, code := runCLI(t, "run", "-c", path)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "ports[1].spec: \"mem:wire/1?capture=/nonexistent/dir/x.pcap\": the directory of the capture /nonexistent/dir/x.pcap does not exist")
	// A name that cannot be created (a directory) fails when it opens.
	cfg = strings.Replace(string(data), `"mem:wire/1"`, `"mem:wire/1?capture=`+dir+`"`, 1)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	out, code = runCLI(t, "run", "-c", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "ports[1].spec: capture="+dir+": ")
	require.Contains(t, out, "give a file this process can create")
}

// TestDissectorMatchesDecode: tshark with tools/wireshark/peregrine.lua
// decodes a capture the demo made, and its fields agree with peregrine
// decode, packet by packet.
func TestDissectorMatchesDecode(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skipf("needs tshark (Debian package tshark, hack/install-deps.sh): %v", err)
	}
	capture := demoCapture(t)

	out, code := runCLI(t, "decode", capture)
	require.Equal(t, 0, code, out)
	// "     7 12:00:00.000000 198.18.0.1:... → ...:5140 peregrine PushRequest cid=0x000001 win=request psn=0 rsn=0 ... reqlen=65536 off=0 len=0"
	line := regexp.MustCompile(`^\s*(\d+) \S+ .* peregrine (\w+) cid=(0x[0-9a-f]+)(?: win=\w+ psn=(\d+))? rsn=(\d+) ssn=(\d+) .* reqlen=(\d+) off=(\d+) len=(\d+)`)
	type pkt struct{ typ, cid, rsn, ssn, reqlen, off, plen string }
	want := map[string]pkt{}
	for _, l := range strings.Split(out, "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			want[m[1]] = pkt{m[2], m[3], m[5], m[6], m[7], m[8], m[9]}
		}
	}
	require.Greater(t, len(want), 100, "peregrine decode found few transport packets:\n%.2000s", out)

	lua, err := filepath.Abs("../../tools/wireshark/peregrine.lua")
	require.NoError(t, err)
	cmd := exec.Command(tshark, "-n", "-X", "lua_script:"+lua, "-r", capture, "-Y", "peregrine", "-T", "fields", "-E", "separator=|",
		"-e", "frame.number", "-e", "peregrine.type", "-e", "peregrine.cid", "-e", "peregrine.rsn", "-e", "peregrine.ssn",
		"-e", "peregrine.reqlen", "-e", "peregrine.offset", "-e", "peregrine.paylen", "-e", "peregrine.ext.type")
	got, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("tshark: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	types := map[string]bool{}
	exts := map[string]bool{}
	compared := 0
	for _, l := range strings.Split(strings.TrimSpace(string(got)), "\n") {
		f := strings.Split(l, "|")
		require.Len(t, f, 9, l)
		w, ok := want[f[0]]
		require.True(t, ok, "tshark decoded frame %s as peregrine, peregrine decode did not", f[0])
		typ, err := strconv.Atoi(f[1])
		require.NoError(t, err, l)
		cid, err := strconv.ParseUint(f[2], 0, 32)
		require.NoError(t, err, l)
		wcid, _ := strconv.ParseUint(w.cid, 0, 32)
		require.Equal(t, w.typ, wire.Type(typ).String(), "frame %s type", f[0])
		require.Equal(t, wcid, cid, "frame %s cid", f[0])
		require.Equal(t, []string{w.rsn, w.ssn, w.reqlen, w.off, w.plen}, f[3:8], "frame %s rsn, ssn, reqlen, offset, payload length", f[0])
		types[w.typ] = true
		for _, e := range strings.Split(f[8], ",") {
			exts[e] = true
		}
		compared++
	}
	require.Equal(t, len(want), compared, "tshark and peregrine decode found different numbers of transport packets")
	for _, typ := range []string{"ConnOpen", "ConnAccept", "PushUnsolicitedData", "PushRequest", "PushGrant", "PushSolicitedData", "PullRequest", "PullData", "Ack"} {
		require.True(t, types[typ], "the demo capture has no %s packet (types seen: %v)", typ, types)
	}
	require.True(t, exts["3"] && exts["4"], "source-CID (3) and region (4) extensions decoded: %v", exts)
}

// TestDissectorEveryTypeAndExtension: a capture holding one frame of every
// packet type, every body and every extension (built by core/wire) reads
// back through the Lua dissector with each field as encoded.
func TestDissectorEveryTypeAndExtension(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skipf("needs tshark (Debian package tshark, hack/install-deps.sh): %v", err)
	}
	addrs := wire.Addrs{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2")}
	var frames [][]byte
	var want []string
	for typ := wire.TypeConnOpen; typ <= wire.TypeNack; typ++ {
		h := wire.Header{Version: wire.Version, DestCID: 0x10000 + uint32(typ), Type: typ, Flags: wire.FlagOrdered | wire.FlagAckRequested,
			Retry: 3, Phase: wire.PhaseMiddle, PSN: 100 + uint32(typ), RSN: 7, SSN: 9, ReqEBSN: 11, DataEBSN: 13, TxTime: 17, TxEcho: 19,
			ReqLen: 4096, Offset: 1024, HopEcho: 2}
		payload := []byte("peregrine")
		ext := ""
		switch typ {
		case wire.TypeConnOpen, wire.TypeConnAccept:
			h.Ext.Present, h.Ext.SourceCID = wire.ExtSourceCID, 0xabcdef
			ext = "3"
		case wire.TypePushUnsolicitedData:
			h.Ext.Present = wire.ExtRegion | wire.ExtPlacement | wire.ExtQPN
			h.Ext.Region = wire.RegionRef{Key: 0x10001, Addr: 0x1234}
			h.Ext.Placement = wire.Placement{Mode: wire.PlacementAbsolute, Index: 42}
			h.Ext.DstQPN, h.Ext.SrcQPN = 0x123456, 0x654321
			ext = "1,2,4"
		case wire.TypeAck, wire.TypeExtendedAck:
			h.Ack = wire.AckBody{OOW: wire.OOWRequest, RxBufLevel: 5, OOWCount: 6, RxTime: 23}
			payload = nil
		case wire.TypeNack:
			h.Nack = wire.NackBody{Code: wire.NackReceiverNotReady, Window: wire.WindowData, PSN: 77, RNRTimeoutMicros: 500}
			payload = nil
		case wire.TypeResync:
			h.Resync = wire.ResyncBody{Code: wire.ResyncTimeout, OrigType: wire.TypePushRequest}
			payload = nil
		}
		buf := make([]byte, 2048)
		n, err := wire.EncodeFrame(buf, &addrs, &h, payload)
		require.NoError(t, err, typ.String())
		frames = append(frames, buf[:n])
		body := ""
		switch typ {
		case wire.TypeAck, wire.TypeExtendedAck:
			body = "5|6|23"
		case wire.TypeNack:
			body = "2|77|500"
		case wire.TypeResync:
			body = "2|6"
		}
		want = append(want, fmt.Sprintf("%d|0x%06x|%d|%d|3|2|%d|%d|%s|%s", typ, h.DestCID, h.PSN, h.RSN, h.ReqLen, len(payload), body, ext))
	}
	path := filepath.Join(t.TempDir(), "types.pcap")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := pcapgo.NewWriter(f)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	for _, fr := range frames {
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(fr), Length: len(fr)}, fr))
	}
	require.NoError(t, f.Close())

	lua, err := filepath.Abs("../../tools/wireshark/peregrine.lua")
	require.NoError(t, err)
	fields := []string{"peregrine.type", "peregrine.cid", "peregrine.psn", "peregrine.rsn", "peregrine.retry", "peregrine.phase",
		"peregrine.reqlen", "peregrine.paylen"}
	args := []string{"-n", "-X", "lua_script:" + lua, "-r", path, "-Y", "peregrine", "-T", "fields", "-E", "separator=|", "-E", "aggregator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	args = append(args, "-e", "peregrine.ack.rxbuf", "-e", "peregrine.ack.oow_count", "-e", "peregrine.ack.rx_time",
		"-e", "peregrine.nack.code", "-e", "peregrine.nack.psn", "-e", "peregrine.nack.rnr_us",
		"-e", "peregrine.resync.code", "-e", "peregrine.resync.orig_type", "-e", "peregrine.ext.type",
		"-e", "peregrine.ext.source_cid", "-e", "peregrine.ext.region.key", "-e", "peregrine.ext.placement.index", "-e", "peregrine.ext.qpn.dst")
	out, err := exec.Command(tshark, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("tshark: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, len(want), string(out))
	for i, l := range lines {
		f := strings.Split(l, "|")
		body := strings.Join(nonEmpty(f[8:16]), "|")
		got := strings.Join(append(f[:8], body, f[16]), "|")
		require.Equal(t, want[i], got, "frame %d (%v)", i+1, wire.Type(i+1))
		switch wire.Type(i + 1) {
		case wire.TypeConnOpen:
			require.Equal(t, "0xabcdef", f[17])
		case wire.TypePushUnsolicitedData:
			require.Equal(t, []string{"0x00010001", "42", "1193046"}, f[18:21])
		}
	}
}

func nonEmpty(s []string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}
