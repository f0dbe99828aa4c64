package main

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// decode reads the capture's link type: Linux cooked captures (tcpdump -i
// any) and raw IP decode as their Ethernet equivalent would, and a link
// type it does not know is refused rather than decoded as Ethernet.
func TestDecodeLinkTypes(t *testing.T) {
	addrs := &wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
	}
	buf := make([]byte, 2048)
	h := wire.Header{Version: 1, DestCID: 0x1234, Type: wire.TypePushUnsolicitedData, PSN: 77, RSN: 5}
	n, err := wire.EncodeFrame(buf, addrs, &h, []byte("hello"))
	require.NoError(t, err)
	eth := append([]byte(nil), buf[:n]...)
	ip := eth[14:]
	sll := make([]byte, 16, 16+len(ip))
	binary.BigEndian.PutUint16(sll[4:], 6)
	copy(sll[6:], eth[6:12])
	binary.BigEndian.PutUint16(sll[14:], 0x0800)
	sll2 := make([]byte, 20, 20+len(ip))
	binary.BigEndian.PutUint16(sll2[0:], 0x0800)
	sll2[11] = 6

	capture := func(lt layers.LinkType, rec []byte) *bytes.Buffer {
		var b bytes.Buffer
		w := pcapgo.NewWriter(&b)
		require.NoError(t, w.WriteFileHeader(65535, lt))
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(rec), Length: len(rec)}, rec))
		return &b
	}
	var want bytes.Buffer
	require.NoError(t, decodeStream("eth", capture(layers.LinkTypeEthernet, eth), wire.DefaultPort, 0, &want))
	require.Contains(t, want.String(), "cid=0x001234")
	for _, c := range []struct {
		lt  layers.LinkType
		rec []byte
	}{
		{layers.LinkTypeLinuxSLL, append(sll, ip...)},
		{layers.LinkTypeLinuxSLL2, append(sll2, ip...)},
		{layers.LinkTypeRaw, ip},
		{layers.LinkTypeIPv4, ip},
	} {
		var got bytes.Buffer
		require.NoError(t, decodeStream(c.lt.String(), capture(c.lt, c.rec), wire.DefaultPort, 0, &got))
		require.Equal(t, want.String(), got.String(), c.lt)
	}

	var got bytes.Buffer
	require.NoError(t, decodeStream("short", capture(layers.LinkTypeLinuxSLL, sll[:8]), wire.DefaultPort, 0, &got))
	require.Contains(t, got.String(), "malformed link header", "a record too short for its link header says so")
	err = decodeStream("wifi", capture(layers.LinkTypeIEEE802_11, eth), wire.DefaultPort, 0, &got)
	require.ErrorContains(t, err, "is not one this reads")
	require.Equal(t, 1, strings.Count(got.String(), "\n"))
}
