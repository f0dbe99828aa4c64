package wirelayers_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/core/wire/wirelayers"
	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
)

var allTypes = []wire.Type{
	wire.TypeConnOpen, wire.TypeConnAccept, wire.TypeConnClose, wire.TypePullRequest,
	wire.TypePullData, wire.TypePushRequest, wire.TypePushGrant, wire.TypePushSolicitedData,
	wire.TypePushUnsolicitedData, wire.TypeResync, wire.TypeAck, wire.TypeExtendedAck, wire.TypeNack,
}

func addrs(v6 bool) wire.Addrs {
	a := wire.Addrs{
		SrcMAC:  [6]byte{0x02, 0, 0, 0, 0, 0x01},
		DstMAC:  [6]byte{0x02, 0, 0, 0, 0, 0x02},
		SrcIP:   netip.MustParseAddr("10.1.0.1"),
		DstIP:   netip.MustParseAddr("10.1.0.2"),
		SrcPort: 49152,
		DstPort: wire.DefaultPort,
		TOS:     0x2a<<2 | 1,
		TTL:     63,
	}
	if v6 {
		a.SrcIP = netip.MustParseAddr("fd00:1::1")
		a.DstIP = netip.MustParseAddr("fd00:1::2")
		a.FlowLabel = 0x12345
	}
	return a
}

// header returns a valid header of type t with a distinct value in every
// field, its body and some extensions.
func header(t wire.Type, i int) wire.Header {
	u := uint32(i)
	h := wire.Header{
		Version: wire.Version, DestCID: 0x100 + u, Type: t,
		Flags: wire.FlagAckRequested | wire.FlagOrdered, Retry: uint8(i % 16), Phase: wire.Phase(i % 4),
		PSN: 1000 + u, RSN: 2000 + u, SSN: 3000 + u, ReqEBSN: 4000 + u, DataEBSN: 5000 + u,
		TxTime: 6000 + u, TxEcho: 7000 + u, ReqLen: 8192, Offset: 1024 * u,
	}
	switch t {
	case wire.TypeAck, wire.TypeExtendedAck:
		h.Ack = wire.AckBody{OOW: wire.OOWData, RxBufLevel: 7, OOWCount: 2, RxTime: 6500 + u}
		if t == wire.TypeExtendedAck {
			h.Ack.ReqBitmap.Set(1)
			h.Ack.DataBitmap.Set(100)
		}
	case wire.TypeNack:
		h.Nack = wire.NackBody{Code: wire.NackReceiverNotReady, Window: wire.WindowRequest, PSN: 77, RNRTimeoutMicros: 500}
	case wire.TypeResync:
		h.Resync = wire.ResyncBody{Code: wire.ResyncAborted, OrigType: wire.TypePullData}
	}
	switch t {
	case wire.TypeConnOpen, wire.TypeConnAccept:
		h.Ext = wire.Ext{Present: wire.ExtSourceCID, SourceCID: 0xabc}
	case wire.TypePushUnsolicitedData, wire.TypePushSolicitedData:
		h.Ext = wire.Ext{
			Present:   wire.ExtPlacement | wire.ExtQPN,
			Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 42},
			DstQPN:    0x10203, SrcQPN: 0x40506,
		}
	}
	if h.Ext.Present != 0 {
		h.Flags |= wire.FlagHasExtension
	}
	return h
}

func payloadFor(i int) []byte {
	p := make([]byte, i*37%300)
	for j := range p {
		p[j] = byte(i + j)
	}
	return p
}

func encode(t *testing.T, a *wire.Addrs, h *wire.Header, payload []byte) []byte {
	t.Helper()
	b := make([]byte, 2048)
	n, err := wire.EncodeFrame(b, a, h, payload)
	require.NoError(t, err)
	return b[:n]
}

func TestGopacketDecodesOurFrames(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for i, typ := range allTypes {
			a := addrs(v6)
			h := header(typ, i)
			payload := payloadFor(i)
			h.PayloadLen = uint16(len(payload))
			frame := encode(t, &a, &h, payload)

			pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			require.Nil(t, pkt.ErrorLayer(), "%v v6=%v: %v", typ, v6, pkt)
			l, ok := pkt.Layer(wirelayers.LayerTypeTransport).(*wirelayers.Transport)
			require.True(t, ok, "no transport layer in %v", pkt)
			require.Equal(t, h, l.Header)
			f, err := wire.DecodeFrame(frame)
			require.NoError(t, err)
			require.Equal(t, frame[f.DataOff:f.PayloadOff], l.LayerContents())
			require.Equal(t, payload, l.LayerPayload())
			if len(payload) > 0 {
				app := pkt.ApplicationLayer()
				require.NotNil(t, app)
				require.Equal(t, payload, app.Payload())
			}
			// gopacket's own checksum code agrees with ours.
			udp, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
			require.True(t, ok)
			require.NoError(t, udp.SetNetworkLayerForChecksum(pkt.NetworkLayer()))
			err, mismatches := pkt.VerifyChecksums()
			require.NoError(t, err)
			require.Empty(t, mismatches)

			s := gopacket.LayerString(l)
			require.Contains(t, s, "Peregrine")
			require.Contains(t, s, typ.String())
			require.Contains(t, pkt.String(), typ.String())
			require.NotEmpty(t, gopacket.LayerDump(l))
		}
	}
}

// gopacket's serialisers build the same bytes as wire.EncodeFrame: an
// independent check of the IP and UDP headers and checksums.
func TestGopacketSerializeMatchesEncodeFrame(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for i, typ := range allTypes {
			a := addrs(v6)
			h := header(typ, i)
			payload := payloadFor(i)
			want := encode(t, &a, &h, payload)

			eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(a.SrcMAC[:]), DstMAC: net.HardwareAddr(a.DstMAC[:])}
			udp := &layers.UDP{SrcPort: layers.UDPPort(a.SrcPort), DstPort: layers.UDPPort(a.DstPort)}
			var ip gopacket.SerializableLayer
			if v6 {
				eth.EthernetType = layers.EthernetTypeIPv6
				ip6 := &layers.IPv6{
					Version: 6, TrafficClass: a.TOS, FlowLabel: a.FlowLabel, NextHeader: layers.IPProtocolUDP,
					HopLimit: a.TTL, SrcIP: a.SrcIP.AsSlice(), DstIP: a.DstIP.AsSlice(),
				}
				require.NoError(t, udp.SetNetworkLayerForChecksum(ip6))
				ip = ip6
			} else {
				eth.EthernetType = layers.EthernetTypeIPv4
				ip4 := &layers.IPv4{
					Version: 4, IHL: 5, TOS: a.TOS, Flags: layers.IPv4DontFragment, TTL: a.TTL,
					Protocol: layers.IPProtocolUDP, SrcIP: a.SrcIP.AsSlice(), DstIP: a.DstIP.AsSlice(),
				}
				require.NoError(t, udp.SetNetworkLayerForChecksum(ip4))
				ip = ip4
			}
			buf := gopacket.NewSerializeBuffer()
			opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
			tr := &wirelayers.Transport{Header: h}
			require.NoError(t, gopacket.SerializeLayers(buf, opts, eth, ip, udp, tr, gopacket.Payload(payload)))
			require.Equal(t, want, buf.Bytes(), "%v v6=%v", typ, v6)
		}
	}
}

func encodeRoCE(t *testing.T, v6 bool, i int) ([]byte, wire.BTH, []byte) {
	t.Helper()
	a := addrs(v6)
	a.DstPort = wire.RoCEv2Port
	a.NoUDPChecksum = !v6
	h := wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: 0x11 + uint32(i), PSN: 100 + uint32(i), AckReq: i%2 == 0}
	payload := bytes.Repeat([]byte{byte(i)}, 16*(i+1))
	b := make([]byte, 2048)
	n, err := wire.EncodeRoCEFrame(b, &a, &h, payload)
	require.NoError(t, err)
	return b[:n], h, payload
}

func TestGopacketDecodesBTH(t *testing.T) {
	for i, v6 := range []bool{false, true} {
		frame, h, payload := encodeRoCE(t, v6, i)
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		require.Nil(t, pkt.ErrorLayer(), "%v", pkt)
		l, ok := pkt.Layer(wirelayers.LayerTypeBTH).(*wirelayers.BTH)
		require.True(t, ok, "%v", pkt)
		require.Equal(t, h, l.BTH)
		require.Equal(t, payload, l.LayerPayload())
		f, err := wire.DecodeRoCEFrame(frame)
		require.NoError(t, err)
		require.Equal(t, f.ICRC, l.ICRC)
		require.Contains(t, gopacket.LayerString(l), "RC SEND Only")
	}
}

func TestGopacketMalformed(t *testing.T) {
	a := addrs(false)
	h := header(wire.TypePullRequest, 1)
	frame := encode(t, &a, &h, []byte("abc"))
	frame[42] = 0x20 // transport version 2
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.NotNil(t, pkt.ErrorLayer())
	require.ErrorIs(t, pkt.ErrorLayer().Error(), wire.ErrVersion)
	require.Nil(t, pkt.Layer(wirelayers.LayerTypeTransport))

	var tr wirelayers.Transport
	df := &truncFeedback{}
	require.ErrorIs(t, tr.DecodeFromBytes(frame[42:60], df), wire.ErrShort)
	require.True(t, df.truncated)

	var bth wirelayers.BTH
	df = &truncFeedback{}
	require.ErrorIs(t, bth.DecodeFromBytes(make([]byte, 15), df), wire.ErrShort)
	require.True(t, df.truncated)
	bad := make([]byte, 16)
	bad[1] = 0x01 // TVer 1
	require.ErrorIs(t, bth.DecodeFromBytes(bad, gopacket.NilDecodeFeedback), wire.ErrVersion)
}

type truncFeedback struct{ truncated bool }

func (f *truncFeedback) SetTruncated() { f.truncated = true }

func TestRegisterPort(t *testing.T) {
	const port = 45140
	a := addrs(true)
	a.DstPort = port
	h := header(wire.TypePushGrant, 3)
	frame := encode(t, &a, &h, nil)
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.Layer(wirelayers.LayerTypeTransport), "port %d is not ours yet", port)
	wirelayers.RegisterPort(port)
	pkt = gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	l, ok := pkt.Layer(wirelayers.LayerTypeTransport).(*wirelayers.Transport)
	require.True(t, ok)
	require.Equal(t, h, l.Header)
}

// A capture written with pcapgo reads back through gopacket, and tshark
// (when installed) reads it too, agrees with our IP and UDP checksums and
// decodes our RoCE frames as InfiniBand with the fields we wrote.
func TestPcapRoundTripAndTshark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peregrine.pcap")
	file, err := os.Create(path)
	require.NoError(t, err)
	w := pcapgo.NewWriter(file)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))

	type written struct {
		frame []byte
		hdr   *wire.Header
		bth   *wire.BTH
	}
	var frames []written
	for _, v6 := range []bool{false, true} {
		for i, typ := range allTypes {
			a := addrs(v6)
			h := header(typ, i)
			payload := payloadFor(i)
			h.PayloadLen = uint16(len(payload))
			frames = append(frames, written{frame: encode(t, &a, &h, payload), hdr: &h})
		}
		for i := range 3 {
			frame, h, _ := encodeRoCE(t, v6, i)
			frames = append(frames, written{frame: frame, bth: &h})
		}
	}
	stamp := time.Unix(1700000000, 0)
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: stamp.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(f.frame), Length: len(f.frame)}
		require.NoError(t, w.WritePacket(ci, f.frame))
	}
	require.NoError(t, file.Close())
	if dir := os.Getenv("PEREGRINE_KEEP_PCAP"); dir != "" {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "peregrine.pcap"), data, 0o644))
	}

	in, err := os.Open(path)
	require.NoError(t, err)
	defer in.Close()
	r, err := pcapgo.NewReader(in)
	require.NoError(t, err)
	for i, f := range frames {
		data, _, err := r.ReadPacketData()
		require.NoError(t, err)
		require.Equal(t, f.frame, data)
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		require.Nil(t, pkt.ErrorLayer(), "frame %d: %v", i, pkt)
		if f.hdr != nil {
			l, ok := pkt.Layer(wirelayers.LayerTypeTransport).(*wirelayers.Transport)
			require.True(t, ok, "frame %d", i)
			require.Equal(t, *f.hdr, l.Header)
		} else {
			l, ok := pkt.Layer(wirelayers.LayerTypeBTH).(*wirelayers.BTH)
			require.True(t, ok, "frame %d", i)
			require.Equal(t, *f.bth, l.BTH)
		}
	}

	tshark := toolstest.Path(t, "tshark")
	out := runTshark(t, tshark, "-r", path,
		"-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-E", "separator=;",
		"-e", "frame.number", "-e", "udp.dstport", "-e", "ip.checksum.status", "-e", "udp.checksum.status",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(frames), "tshark output:\n%s", out)
	for i, line := range lines {
		fields := strings.Split(line, ";")
		require.Len(t, fields, 7, line)
		f := frames[i]
		if fields[2] != "" {
			require.Equal(t, "1", fields[2], "frame %d: tshark says the IPv4 header checksum is bad: %s", i+1, line)
		}
		wantUDP := "1" // good
		if f.bth != nil && fields[2] != "" {
			wantUDP = "3" // not present: RoCE over IPv4 sends 0
		}
		require.Equal(t, wantUDP, fields[3], "frame %d: tshark disagrees with our UDP checksum: %s", i+1, line)
		if f.hdr != nil {
			require.Equal(t, fmt.Sprint(wire.DefaultPort), fields[1])
			continue
		}
		require.Equal(t, fmt.Sprint(wire.RoCEv2Port), fields[1])
		require.Equal(t, fmt.Sprint(f.bth.Opcode), fields[4], line)
		require.Equal(t, fmt.Sprintf("0x%06x", f.bth.DestQP), fields[5], line)
		require.Equal(t, fmt.Sprint(f.bth.PSN), fields[6], line)
	}
}

func runTshark(t *testing.T, tshark string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tshark, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no user profile
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "tshark %v failed: %s", args, stderr.String())
	return stdout.String()
}

func FuzzLayers(f *testing.F) {
	for i, typ := range allTypes {
		a := addrs(false)
		h := header(typ, i)
		b := make([]byte, 2048)
		n, err := wire.EncodeFrame(b, &a, &h, payloadFor(i))
		require.NoError(f, err)
		f.Add(b[42:n])
	}
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		var tr wirelayers.Transport
		if tr.DecodeFromBytes(data, gopacket.NilDecodeFeedback) == nil {
			require.Equal(t, len(data), len(tr.LayerContents())+len(tr.LayerPayload()))
			buf := gopacket.NewSerializeBuffer()
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, &tr, gopacket.Payload(tr.LayerPayload())))
			var again wirelayers.Transport
			require.NoError(t, again.DecodeFromBytes(buf.Bytes(), gopacket.NilDecodeFeedback))
			require.Equal(t, tr.Header, again.Header)
		}
		var bth wirelayers.BTH
		if bth.DecodeFromBytes(data, gopacket.NilDecodeFeedback) == nil {
			require.Equal(t, len(data), len(bth.LayerContents())+len(bth.LayerPayload())+wire.ICRCLen)
		}
		_ = gopacket.NewPacket(data, wirelayers.LayerTypeTransport, gopacket.Default).String()
	})
}

func TestSummary(t *testing.T) {
	a := addrs(false)
	h := header(wire.TypePullRequest, 2)
	frame := encode(t, &a, &h, nil)
	s := wirelayers.Summary(frame, 0)
	require.Contains(t, s, "10.1.0.1:49152 → 10.1.0.2:5140 peregrine PullRequest cid=0x000102")

	frame[len(frame)-1] ^= 0xff
	require.Contains(t, wirelayers.Summary(frame, 0), "checksum mismatch")

	a6 := addrs(true)
	a6.DstPort = 7000
	frame = encode(t, &a6, &h, nil)
	require.Contains(t, wirelayers.Summary(frame, 0), "[fd00:1::2]:7000 udp len=")
	require.Contains(t, wirelayers.Summary(frame, 7000), "peregrine PullRequest")

	roce, _, _ := encodeRoCE(t, false, 1)
	require.Contains(t, wirelayers.Summary(roce, 0), "roce RC SEND Only qp=0x000012 psn=101")
	require.Regexp(t, `payload=32 icrc=0x[0-9a-f]{8} ok$`, wirelayers.Summary(roce, 0))
	good := append([]byte(nil), roce...)
	roce[len(roce)-1] ^= 1
	require.Regexp(t, `icrc=0x[0-9a-f]{8} BAD \(computed 0x[0-9a-f]{8}\)$`, wirelayers.Summary(roce, 0))
	require.Equal(t, good[:len(good)-1], roce[:len(roce)-1], "the summary leaves the frame alone")

	// An RDMA WRITE shows its RETH, an ACK its AETH.
	for _, c := range []struct {
		op   uint8
		body []byte
		want string
	}{
		{0x0a, []byte{0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 7, 0, 0, 0, 4, 'a', 'b', 'c', 'd'}, "reth{va=0x1000 rkey=0x7 len=4} payload=4 icrc="},
		{0x11, []byte{0x1f, 0, 0, 9}, "aeth{ACK credits=31 msn=9} payload=0 icrc="},
		{0x64, []byte{0, 0, 0, 0x11, 0, 0, 0, 0x22}, "deth{qkey=0x11 srcqp=0x000022} payload=0"},
	} {
		a := addrs(false)
		a.DstPort = wire.RoCEv2Port
		a.NoUDPChecksum = true
		h := wire.BTH{Opcode: c.op, PKey: 0xffff, DestQP: 5, PSN: 6}
		b := make([]byte, 256)
		n, err := wire.EncodeRoCEFrame(b, &a, &h, c.body)
		require.NoError(t, err)
		require.Contains(t, wirelayers.Summary(b[:n], 0), c.want)
	}

	arp := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(arp, gopacket.SerializeOptions{FixLengths: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: make([]byte, 6), SourceProtAddress: make([]byte, 4),
			DstHwAddress: make([]byte, 6), DstProtAddress: make([]byte, 4)}))
	require.True(t, strings.HasPrefix(wirelayers.Summary(arp.Bytes(), 0), "Ethernet/ARP"))
	require.Contains(t, wirelayers.Summary([]byte{1, 2, 3}, 0), "DecodeFailure")
}
