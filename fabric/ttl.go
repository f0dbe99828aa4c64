package fabric

import (
	"encoding/binary"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Offsets in an untagged Ethernet frame.
const (
	etherTypeOff  = 12
	ipv4TTLOff    = ethHeaderLen + 8
	ipv4CsumOff   = ethHeaderLen + 10
	ipv6HopLimOff = ethHeaderLen + 7
)

// lowerTTL lowers an IP frame's TTL (IPv4, fixing the header checksum
// incrementally as RFC 1624 does) or hop limit (IPv6) by hops, as that
// many routers would. It returns false when the frame arrived with no more
// than hops left: a router would drop it. Other frames pass unchanged.
func lowerTTL(frame []byte, hops uint8) bool {
	if len(frame) < ethHeaderLen+20 {
		return true
	}
	switch binary.BigEndian.Uint16(frame[etherTypeOff:]) {
	case etherTypeIPv4:
		if frame[ethHeaderLen]>>4 != 4 {
			return true
		}
		if frame[ipv4TTLOff] <= hops {
			return false
		}
		// The TTL shares a 16-bit word with the protocol.
		word := frame[ipv4TTLOff : ipv4TTLOff+2]
		old := binary.BigEndian.Uint16(word)
		word[0] -= hops
		ck := frame[ipv4CsumOff:]
		binary.BigEndian.PutUint16(ck, wire.UpdateChecksum(binary.BigEndian.Uint16(ck), old, binary.BigEndian.Uint16(word)))
	case etherTypeIPv6:
		if len(frame) < ethHeaderLen+40 {
			return true
		}
		if frame[ipv6HopLimOff] <= hops {
			return false
		}
		frame[ipv6HopLimOff] -= hops
	}
	return true
}
