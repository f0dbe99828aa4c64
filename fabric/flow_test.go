package fabric

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func ipv6Frame(src, dst byte, nh byte, sport, dport uint16) []byte {
	b := make([]byte, ethHeaderLen+ipv6HdrLen+8)
	binary.BigEndian.PutUint16(b[12:], etherTypeIPv6)
	ip := b[ethHeaderLen:]
	ip[0] = 0x60
	ip[6] = nh
	ip[8+15] = src
	ip[24+15] = dst
	binary.BigEndian.PutUint16(ip[40:], sport)
	binary.BigEndian.PutUint16(ip[42:], dport)
	return b
}

func withVLAN(frame []byte, tags ...uint16) []byte {
	out := append([]byte(nil), frame[:12]...)
	for _, tpid := range tags {
		out = binary.BigEndian.AppendUint16(out, tpid)
		out = binary.BigEndian.AppendUint16(out, 100)
	}
	return append(out, frame[12:]...)
}

func TestFlowHash(t *testing.T) {
	v4 := func(flow uint16) []byte { return expectedFrame(0, flow, 64) }
	require.NotZero(t, FlowHash(v4(1)))
	require.Equal(t, FlowHash(v4(1)), FlowHash(expectedFrame(99, 1, 200)), "only the 5-tuple counts")
	require.NotEqual(t, FlowHash(v4(1)), FlowHash(v4(2)), "ports count")
	other := v4(1)
	other[ethHeaderLen+15] = 9 // source address
	require.NotEqual(t, FlowHash(v4(1)), FlowHash(other), "addresses count")

	require.Equal(t, FlowHash(v4(1)), FlowHash(withVLAN(v4(1), etherTypeVLAN)), "a VLAN tag is skipped")
	require.Equal(t, FlowHash(v4(1)), FlowHash(withVLAN(v4(1), etherTypeQinQ, etherTypeVLAN)), "QinQ too")

	// Every fragment of a datagram hashes alike, ports or not.
	frag := func(flow uint16, flagsOffset uint16) []byte {
		b := v4(flow)
		binary.BigEndian.PutUint16(b[ethHeaderLen+6:], flagsOffset)
		return b
	}
	first, middle := frag(1, 0x2000), frag(7, 0x2010)
	require.Equal(t, FlowHash(first), FlowHash(middle))
	require.NotEqual(t, FlowHash(first), FlowHash(v4(1)))

	a, b := ipv6Frame(1, 2, protoUDP, 10, 20), ipv6Frame(1, 2, protoUDP, 10, 21)
	require.NotZero(t, FlowHash(a))
	require.NotEqual(t, FlowHash(a), FlowHash(b))
	require.Equal(t, FlowHash(ipv6Frame(1, 2, 59, 10, 20)), FlowHash(ipv6Frame(1, 2, 59, 11, 21)), "no ports for other protocols")
	require.NotEqual(t, FlowHash(a), FlowHash(ipv6Frame(3, 2, protoUDP, 10, 20)))

	for name, frame := range map[string][]byte{
		"empty":      nil,
		"runt":       make([]byte, 13),
		"arp":        append(make([]byte, 12), 0x08, 0x06, 0, 0, 0, 0),
		"short ipv4": v4(1)[:ethHeaderLen+10],
		"bad ihl":    func() []byte { b := v4(1); b[ethHeaderLen] = 0x41; return b }(),
		"not v4":     func() []byte { b := v4(1); b[ethHeaderLen] = 0x65; return b }(),
		"short ipv6": ipv6Frame(1, 2, protoUDP, 1, 2)[:ethHeaderLen+30],
		"short vlan": withVLAN(v4(1), etherTypeVLAN)[:15],
	} {
		require.Zero(t, FlowHash(frame), name)
	}
	require.NotZero(t, FlowHash(v4(1)[:offUDP+2]), "a truncated L4 header still hashes the addresses")

	frame := v4(1)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = FlowHash(frame) }))
}
