package pcap_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// ipv4 is a minimal IPv4/UDP packet (the bytes after an Ethernet header).
var ipv4 = []byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2, 0x27, 0x10, 0, 9, 0, 8, 0, 0}

func TestToEthernet(t *testing.T) {
	sll := make([]byte, 16)
	binary.BigEndian.PutUint16(sll[4:], 6)
	copy(sll[6:], []byte{2, 0, 0, 0, 0, 7})
	binary.BigEndian.PutUint16(sll[14:], 0x0800)
	sll2 := make([]byte, 20)
	binary.BigEndian.PutUint16(sll2[0:], 0x0800)
	sll2[11] = 6
	copy(sll2[12:], []byte{2, 0, 0, 0, 0, 7})
	want := append([]byte{0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 7, 0x08, 0x00}, ipv4...)
	wantRaw := append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00}, ipv4...)
	var buf []byte
	for _, c := range []struct {
		lt   layers.LinkType
		data []byte
		want []byte
	}{
		{layers.LinkTypeLinuxSLL, append(sll, ipv4...), want},
		{layers.LinkTypeLinuxSLL2, append(sll2, ipv4...), want},
		{layers.LinkTypeRaw, ipv4, wantRaw},
		{layers.LinkTypeIPv4, ipv4, wantRaw},
		{layers.LinkTypeEthernet, want, want},
	} {
		got, err := pcap.ToEthernet(c.lt, c.data, buf)
		require.NoError(t, err, c.lt)
		require.Equal(t, c.want, got, c.lt)
		buf = got
	}
	v6 := []byte{0x60, 0, 0, 0}
	got, err := pcap.ToEthernet(layers.LinkTypeIPv6, v6, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0x86, 0xdd}, got[12:14])

	_, err = pcap.ToEthernet(layers.LinkTypeLinuxSLL, sll[:10], nil)
	require.ErrorIs(t, err, pcap.ErrLinkHeader)
	_, err = pcap.ToEthernet(layers.LinkTypeRaw, []byte{0x10}, nil)
	require.ErrorIs(t, err, pcap.ErrLinkHeader)
	require.Error(t, pcap.CheckLinkType(layers.LinkTypeIEEE802_11))
	_, err = pcap.ToEthernet(layers.LinkTypeIEEE802_11, ipv4, nil)
	require.Error(t, err)

	rec := append(sll, ipv4...)
	require.Zero(t, testing.AllocsPerRun(100, func() { buf, _ = pcap.ToEthernet(layers.LinkTypeLinuxSLL, rec, buf) }), "a reused buffer")
}

// FuzzToEthernet: any record of any supported link type converts or is
// refused with an error, never panics, and a converted frame ends with
// the record's payload.
func FuzzToEthernet(f *testing.F) {
	f.Add(uint16(layers.LinkTypeLinuxSLL), append(make([]byte, 16), ipv4...))
	f.Add(uint16(layers.LinkTypeLinuxSLL2), append(make([]byte, 20), ipv4...))
	f.Add(uint16(layers.LinkTypeRaw), ipv4)
	f.Add(uint16(layers.LinkTypeIPv6), []byte{0x60})
	f.Add(uint16(layers.LinkTypeLinuxSLL), []byte{1, 2})
	f.Add(uint16(105), ipv4)
	buf := make([]byte, 64)
	f.Fuzz(func(t *testing.T, lt uint16, data []byte) {
		got, err := pcap.ToEthernet(layers.LinkType(lt), data, buf)
		if err != nil {
			return
		}
		if layers.LinkType(lt) == layers.LinkTypeEthernet {
			require.Equal(t, data, got)
			return
		}
		require.GreaterOrEqual(t, len(got), 14)
		require.True(t, bytes.HasSuffix(data, got[14:]))
	})
}
