package fabric

import "encoding/binary"

// EtherTypes and IP protocols FlowHash understands.
const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86dd
	etherTypeVLAN  = 0x8100
	etherTypeQinQ  = 0x88a8
	ethHeaderLen   = 14
	protoTCP       = 6
	protoUDP       = 17
	protoSCTP      = 132
	protoUDPLite   = 136
	ipv4MinHdrLen  = 20
	ipv6HdrLen     = 40
	ipv4FragMask   = 0x3fff // MF flag and fragment offset
	flowHashSeed   = 0x9e3779b97f4a7c15
	flowHashFinal1 = 0xff51afd7ed558ccd
	flowHashFinal2 = 0xc4ceb9fe1a85ec53
)

// FlowHash hashes an Ethernet frame's flow: the IPv4 or IPv6 source and
// destination addresses and protocol, plus the ports for TCP, UDP, SCTP and
// UDP-Lite (except in IPv4 fragments, so every fragment of a datagram
// hashes alike). Up to two VLAN tags are skipped. It returns 0 for frames it
// cannot parse. The hash is not symmetric: the two directions of a
// connection hash differently. It never allocates.
func FlowHash(frame []byte) uint32 {
	if len(frame) < ethHeaderLen {
		return 0
	}
	off := 12
	etherType := binary.BigEndian.Uint16(frame[off:])
	for range 2 {
		if etherType != etherTypeVLAN && etherType != etherTypeQinQ {
			break
		}
		off += 4
		if len(frame) < off+2 {
			return 0
		}
		etherType = binary.BigEndian.Uint16(frame[off:])
	}
	l3 := frame[off+2:]
	var h uint64
	var proto byte
	var l4 []byte
	switch etherType {
	case etherTypeIPv4:
		if len(l3) < ipv4MinHdrLen || l3[0]>>4 != 4 {
			return 0
		}
		ihl := int(l3[0]&0x0f) * 4
		if ihl < ipv4MinHdrLen || len(l3) < ihl {
			return 0
		}
		proto = l3[9]
		h = mix(flowHashSeed ^ uint64(proto)<<32 ^ 4)
		h = mix(h ^ binary.BigEndian.Uint64(l3[12:20]))
		if binary.BigEndian.Uint16(l3[6:])&ipv4FragMask == 0 {
			l4 = l3[ihl:]
		}
	case etherTypeIPv6:
		if len(l3) < ipv6HdrLen || l3[0]>>4 != 6 {
			return 0
		}
		proto = l3[6]
		h = mix(flowHashSeed ^ uint64(proto)<<32 ^ 6)
		for i := 8; i < ipv6HdrLen; i += 8 {
			h = mix(h ^ binary.BigEndian.Uint64(l3[i:]))
		}
		l4 = l3[ipv6HdrLen:]
	default:
		return 0
	}
	switch proto {
	case protoTCP, protoUDP, protoSCTP, protoUDPLite:
		if len(l4) >= 4 {
			h = mix(h ^ uint64(binary.BigEndian.Uint32(l4)))
		}
	}
	return uint32(h ^ h>>32)
}

// mix is the 64-bit finaliser of MurmurHash3: every input bit affects every
// output bit.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= flowHashFinal1
	h ^= h >> 33
	h *= flowHashFinal2
	h ^= h >> 33
	return h
}
