package wire

import "math/bits"

// Fixed offsets of the common frame DecodeFastIPv4 takes: Ethernet, IPv4
// without options, UDP, a transport base header with neither body nor
// extensions.
const (
	fastIP    = EthHeaderLen
	fastUDP   = fastIP + IPv4HeaderLen
	fastHdr   = fastUDP + UDPHeaderLen
	fastPay   = fastHdr + BaseHeaderLen
	fastIPMin = IPv4HeaderLen + UDPHeaderLen + BaseHeaderLen // shortest IP total length

	// fastTypes has bit t set for the types without a body that need no
	// extension: every type with a window except Resync.
	fastTypes = 1<<TypeConnClose | 1<<TypePullRequest | 1<<TypePullData | 1<<TypePushRequest |
		1<<TypePushGrant | 1<<TypePushSolicitedData | 1<<TypePushUnsolicitedData
)

// DecodeFastIPv4 decodes the frame that carries most packets — untagged
// Ethernet, IPv4 with no options and no fragmentation, UDP to dstIP:dstPort,
// a transport header of a type without a body (every reliable type but
// Resync, and no ACK or NACK) and without extensions, the payload filling
// the rest — reading fixed offsets instead of walking the layers. It checks
// everything Frame.Decode checks (lengths, the IPv4 header checksum, the UDP
// checksum unless it is 0, version, type) and on success fills h exactly as
// Frame.Decode fills Frame.Header and returns the payload, a view into b.
//
// ok is false for every other frame, valid or not; h then holds garbage and
// the caller decodes the frame with Frame.Decode, which also names what is
// wrong. It never panics and does not allocate.
func DecodeFastIPv4(b []byte, dstIP [4]byte, dstPort uint16, h *Header) (payload []byte, ok bool) {
	if len(b) < fastPay {
		return nil, false
	}
	ip := b[fastIP:fastUDP:fastUDP]
	// EtherType IPv4, version 4 with IHL 5, UDP, not a fragment, ours.
	if be.Uint16(b[12:]) != EtherTypeIPv4 || ip[0] != 0x45 || ip[9] != ProtocolUDP ||
		be.Uint16(ip[6:])&0x3fff != 0 || le.Uint32(ip[16:]) != le.Uint32(dstIP[:]) {
		return nil, false
	}
	total := int(be.Uint16(ip[2:]))
	if total < fastIPMin || total > len(b)-fastIP {
		return nil, false
	}
	// The IPv4 header checksum over its 20 bytes.
	s, c := bits.Add64(le.Uint64(ip[0:]), le.Uint64(ip[8:]), 0)
	s, c = bits.Add64(s, uint64(le.Uint32(ip[16:])), c)
	if csumFold(s+c) != 0xffff {
		return nil, false
	}
	udp := b[fastUDP : fastIP+total]
	if be.Uint16(udp[2:]) != dstPort || int(be.Uint16(udp[4:])) != len(udp) {
		return nil, false
	}
	th := udp[UDPHeaderLen:]
	w0 := be.Uint32(th[offVerCID:])
	t := Type(th[offType])
	flags := Flags(th[offFlags]) &^ flagsReserved
	if w0>>28 != Version || t >= 32 || fastTypes>>t&1 == 0 ||
		flags&FlagHasExtension != 0 || th[offExtWords] != 0 ||
		int(be.Uint16(th[offPayloadLen:])) != len(th)-BaseHeaderLen {
		return nil, false
	}
	if be.Uint16(udp[6:]) != 0 {
		// Pseudo-header (addresses, protocol, the UDP length, which the
		// datagram's own length field repeats) and the datagram.
		s, c := bits.Add64(le.Uint64(ip[12:]), uint64(bits.ReverseBytes16(ProtocolUDP)), 0)
		s, c = bits.Add64(s, uint64(le.Uint16(udp[4:])), c)
		if csumFold(csumAdd(s+c, udp)) != 0xffff {
			return nil, false
		}
	}
	h.setBase(th, w0, t, flags, uint16(len(th)-BaseHeaderLen))
	h.clearBodies()
	return th[BaseHeaderLen:], true
}
