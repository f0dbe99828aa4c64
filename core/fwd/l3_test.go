package fwd

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

var (
	macA = []byte{2, 0, 0, 0, 0, 0xa}
	macB = []byte{2, 0, 0, 0, 0, 0xb}
)

// build serializes layers with lengths and checksums computed.
func build(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return append([]byte(nil), buf.Bytes()...)
}

func ip4(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: netip.MustParseAddr("198.18.0.1").AsSlice(), DstIP: netip.MustParseAddr("198.18.0.2").AsSlice()}
}

func ip6(next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: netip.MustParseAddr("2001:db8::1").AsSlice(), DstIP: netip.MustParseAddr("2001:db8::2").AsSlice()}
}

func udpFrame(t testing.TB, v6, vlan bool) []byte {
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 40002}
	var ip gopacket.NetworkLayer = ip4(layers.IPProtocolUDP)
	if v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip = ip6(layers.IPProtocolUDP)
	}
	require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
	ls := []gopacket.SerializableLayer{eth}
	if vlan {
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 7, Type: eth.EthernetType})
		eth.EthernetType = layers.EthernetTypeDot1Q
	}
	return build(t, append(ls, ip.(gopacket.SerializableLayer), udp, gopacket.Payload("peregrine!"))...)
}

// decodeOK parses a frame with gopacket and verifies its checksums.
func decodeOK(t *testing.T, d []byte) gopacket.Packet {
	p := gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, p.ErrorLayer(), "%v", p)
	ipOK, l4OK := checksums(d)
	require.True(t, ipOK && l4OK, "checksums still valid")
	return p
}

// runMode forwards frames through a forwarder of mode and returns what came
// out, with its stats.
func runMode(t *testing.T, mode Mode, frames ...[]byte) ([][]byte, Stats) {
	r := newRig(t, 64)
	f, err := New(Options{Mode: mode, In: r.inRx, Out: r.outTx, Pool: r.pool})
	require.NoError(t, err)
	hs := make([]mbuf.Handle, len(frames))
	require.Equal(t, len(hs), r.pool.AllocBulk(hs))
	for i, h := range hs {
		copy(r.pool.Append(h, len(frames[i])), frames[i])
	}
	require.Equal(t, len(hs), r.inTx.TxBurst(0, hs))
	f.Poll(0)
	f.Stop(0)
	return r.receive(), f.Stats()
}

func Test5TSwap(t *testing.T) {
	for _, c := range []struct{ v6, vlan bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		in := udpFrame(t, c.v6, c.vlan)
		out, _ := runMode(t, Mode5TSwap, in)
		require.Len(t, out, 1)
		p := decodeOK(t, out[0])
		eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		require.Equal(t, []byte(macA), []byte(eth.DstMAC))
		udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		require.Equal(t, layers.UDPPort(40002), udp.SrcPort)
		require.Equal(t, layers.UDPPort(40000), udp.DstPort)
		src, dst := p.NetworkLayer().NetworkFlow().Endpoints()
		if c.v6 {
			require.Equal(t, "2001:db8::2", src.String())
			require.Equal(t, "2001:db8::1", dst.String())
		} else {
			require.Equal(t, "198.18.0.2", src.String())
			require.Equal(t, "198.18.0.1", dst.String())
		}
	}
	// Not IP: the MACs only; too short: untouched, no panic.
	out, _ := runMode(t, Mode5TSwap, append(append(append([]byte{}, macB...), macA...), 0x88, 0xb5, 1, 2), []byte{1, 2, 3})
	require.Equal(t, append(append(append([]byte{}, macA...), macB...), 0x88, 0xb5, 1, 2), out[0])
	require.Equal(t, []byte{1, 2, 3}, out[1])
}

func TestICMPEcho(t *testing.T) {
	req4 := build(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip4(layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: 1}, gopacket.Payload("ping"))
	icmp6 := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
	v6 := ip6(layers.IPProtocolICMPv6)
	require.NoError(t, icmp6.SetNetworkLayerForChecksum(v6))
	req6 := build(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}, v6, icmp6,
		&layers.ICMPv6Echo{Identifier: 7, SeqNumber: 1}, gopacket.Payload("ping"))
	out, st := runMode(t, ModeICMPEcho, req4, udpFrame(t, false, false), req6)
	require.Len(t, out, 2)
	require.Equal(t, uint64(1), st.NotEcho)
	p := decodeOK(t, out[0])
	require.Equal(t, uint8(layers.ICMPv4TypeEchoReply), p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4).TypeCode.Type())
	require.Equal(t, []byte(macA), []byte(p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet).DstMAC))
	p = decodeOK(t, out[1])
	require.Equal(t, uint8(layers.ICMPv6TypeEchoReply), p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6).TypeCode.Type())
	src, _ := p.NetworkLayer().NetworkFlow().Endpoints()
	require.Equal(t, "2001:db8::2", src.String())
}

func TestCsum(t *testing.T) {
	good4, good6 := udpFrame(t, false, false), udpFrame(t, true, true)
	badIP := udpFrame(t, false, false)
	badIP[14+10] ^= 0xff
	badUDP := udpFrame(t, true, false)
	badUDP[len(badUDP)-1] ^= 0xff
	out, st := runMode(t, ModeCsum, good4, good6, badIP, badUDP)
	require.Len(t, out, 4, "csum mode forwards everything")
	require.Equal(t, good4, out[0], "untouched")
	require.Equal(t, uint64(1), st.BadIPChecksum)
	require.Equal(t, uint64(1), st.BadL4Checksum)
}

// The L3 modes cost no allocation per packet.
func TestL3ModesZeroAllocs(t *testing.T) {
	frame := udpFrame(t, true, true)
	for _, mode := range []Mode{Mode5TSwap, ModeICMPEcho, ModeCsum} {
		r := newRig(t, 64)
		f, err := New(Options{Mode: mode, In: r.inRx, Out: r.outTx, Pool: r.pool, Cache: r.pool.NewCache()})
		require.NoError(t, err)
		hs := make([]mbuf.Handle, 32)
		out := make([]mbuf.Handle, 32)
		allocs := testing.AllocsPerRun(100, func() {
			n := r.pool.AllocBulk(hs)
			for _, h := range hs[:n] {
				copy(r.pool.Append(h, len(frame)), frame)
			}
			r.inTx.TxBurst(0, hs[:n])
			f.Poll(0)
			r.pool.Free(out[:r.outRx.RxBurst(0, out)])
		})
		require.Zero(t, allocs, mode.String())
		f.Stop(0)
	}
}

// FuzzL3 feeds arbitrary frames to the L3 modes: never a panic, and 5tswap
// twice is the identity.
func FuzzL3(f *testing.F) {
	f.Add(udpFrame(f, false, false))
	f.Add(udpFrame(f, true, true))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, d []byte) {
		orig := append([]byte(nil), d...)
		checksums(d)
		swap5Tuple(d)
		swap5Tuple(d)
		require.True(t, bytes.Equal(orig, d), "5tswap twice is the identity")
		echoReply(d)
	})
}
