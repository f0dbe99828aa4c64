package wire

import "math/bits"

// Fixed offsets of the common frame DecodeFastIPv4 takes: Ethernet, IPv4
// without options, UDP, a transport base header, then the body of an ACK,
// the extensions and the payload.
const (
	fastIP    = EthHeaderLen
	fastUDP   = fastIP + IPv4HeaderLen
	fastHdr   = fastUDP + UDPHeaderLen
	fastPay   = fastHdr + BaseHeaderLen
	fastIPMin = IPv4HeaderLen + UDPHeaderLen + BaseHeaderLen // shortest IP total length

	// fastTypes has bit t set for the types DecodeFastIPv4 takes: every
	// type with a window except Resync, which need no body, and the two
	// ACKs, whose bodies are fixed fields.
	fastTypes = 1<<TypeConnClose | 1<<TypePullRequest | 1<<TypePullData | 1<<TypePushRequest |
		1<<TypePushGrant | 1<<TypePushSolicitedData | 1<<TypePushUnsolicitedData | 1<<TypeSend |
		1<<TypeAck | 1<<TypeExtendedAck
)

// FastIPv4TTL returns the IPv4 TTL of a frame DecodeFastIPv4 accepted (for
// HopsFromTTL), which its fixed layout puts at a fixed offset.
func FastIPv4TTL(b []byte) uint8 { return b[fastIP+8] }

// DecodeFastIPv4 decodes the frames that carry most packets — untagged
// Ethernet, IPv4 with no options and no fragmentation, UDP to
// dstIP:dstPort, a transport header of a reliable type without a body
// (every one but Resync) or an ACK or extended ACK, with the extensions
// the data path sends (a delivery index, a region, the seal: each at most
// once, in the order Ext.Encode writes them), the payload filling the
// rest — reading fixed offsets instead of walking the layers. It checks
// everything Frame.Decode checks (lengths, the IPv4 header checksum, the
// UDP checksum unless it is 0, version, type, the extensions' lengths and
// the delivery index's mode) and on success fills h exactly as
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
	// The IP header as three little-endian words, loaded once: the field
	// checks and the header checksum read them (testing the bytes first
	// made the compiler rebuild the first word from byte loads).
	ip0, ip1, ip2 := le.Uint64(ip[0:]), le.Uint64(ip[8:]), le.Uint32(ip[16:])
	// EtherType IPv4, version 4 with IHL 5, UDP, not a fragment (flags
	// and offset, bytes 6–7, without the DF bit), ours.
	if be.Uint16(b[12:]) != EtherTypeIPv4 || byte(ip0) != 0x45 || byte(ip1>>8) != ProtocolUDP ||
		uint16(ip0>>48)&0xff3f != 0 || ip2 != le.Uint32(dstIP[:]) {
		return nil, false
	}
	total := int(bits.ReverseBytes16(uint16(ip0 >> 16)))
	if total < fastIPMin || total > len(b)-fastIP {
		return nil, false
	}
	// The IPv4 header checksum over its 20 bytes.
	s, c := bits.Add64(ip0, ip1, 0)
	s, c = bits.Add64(s, uint64(ip2), c)
	if !csumOK(s + c) {
		return nil, false
	}
	udp := b[fastUDP : fastIP+total]
	if len(udp) < UDPHeaderLen+BaseHeaderLen {
		return nil, false // total ≥ fastIPMin says so; this drops bounds checks
	}
	fixed := udp[:UDPHeaderLen+BaseHeaderLen]
	if be.Uint16(fixed[2:]) != dstPort || int(be.Uint16(fixed[4:])) != len(udp) {
		return nil, false
	}
	th := fixed[UDPHeaderLen:]
	w0 := be.Uint32(th[offVerCID:])
	t := Type(th[offType])
	flags := Flags(th[offFlags]) &^ flagsReserved
	ext := int(th[offExtWords]) * 4
	body := 0
	switch t {
	case TypeAck:
		body = AckBodyLen
	case TypeExtendedAck:
		body = ExtendedAckBodyLen
	}
	if w0>>28 != Version || t >= 32 || fastTypes>>t&1 == 0 || (flags&FlagHasExtension != 0) != (ext != 0) ||
		int(be.Uint16(th[offPayloadLen:])) != len(udp)-UDPHeaderLen-BaseHeaderLen-body-ext {
		return nil, false
	}
	rest := udp[UDPHeaderLen+BaseHeaderLen:] // the body, the extensions and the payload
	if len(rest) < body+ext {
		return nil, false // the payload length says so; this drops bounds checks
	}
	// The extensions the data path sends, in the order they are encoded;
	// anything else (an unknown TLV, a longer one, another order) is
	// valid but left to Frame.Decode.
	chain := rest[body : body+ext]
	var present ExtMask
	var place Placement
	var region RegionRef
	var seal uint64
	if len(chain) >= extPlacementLen && chain[0] == ExtTypePlacement && chain[1] == extPlacementLen/4 {
		if place = placementAt(chain); !place.Mode.Valid() {
			return nil, false
		}
		present, chain = ExtPlacement, chain[extPlacementLen:]
	}
	if len(chain) >= extRegionLen && chain[0] == ExtTypeRegion && chain[1] == extRegionLen/4 {
		region = regionAt(chain)
		present, chain = present|ExtRegion, chain[extRegionLen:]
	}
	if len(chain) >= extSealLen && chain[0] == ExtTypeSeal && chain[1] == extSealLen/4 {
		seal = sealAt(chain)
		present, chain = present|ExtSeal, chain[extSealLen:]
	}
	if len(chain) != 0 {
		return nil, false
	}
	payload = rest[body+ext:]
	if be.Uint16(fixed[6:]) != 0 {
		// The pseudo-header (the addresses, protocol 17, the UDP length,
		// which the datagram's own length field repeats), the UDP and base
		// headers in one straight add-with-carry chain, then the rest.
		s, c := bits.Add64(uint64(uint32(ip1>>32))|uint64(ip2)<<32, uint64(bits.ReverseBytes16(ProtocolUDP))+uint64(le.Uint16(fixed[4:])), 0)
		s, c = bits.Add64(s, le.Uint64(fixed[0:]), c)
		s, c = bits.Add64(s, le.Uint64(fixed[8:]), c)
		s, c = bits.Add64(s, le.Uint64(fixed[16:]), c)
		s, c = bits.Add64(s, le.Uint64(fixed[24:]), c)
		s, c = bits.Add64(s, le.Uint64(fixed[32:]), c)
		s, c = bits.Add64(s, le.Uint64(fixed[40:]), c)
		s, c = bits.Add64(s, le.Uint64(fixed[48:]), c)
		if !csumOK(csumAdd(s+c, rest)) {
			return nil, false
		}
	}
	h.setBase(th, w0, t, flags, uint16(len(payload)))
	h.clearBodies()
	if body != 0 {
		h.Ack.decode(rest[:body])
	}
	if present != 0 {
		h.Ext.Present = present
		h.Ext.Placement = place
		h.Ext.Region = region
		h.Ext.Seal = seal
	}
	return payload, true
}
