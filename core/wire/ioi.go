package wire

// SetClass rewrites what a fabric or switch reads to place a built frame
// (IOI, docs/ioi.md): the UDP source port (srcPort; 0 keeps it), the ECMP
// entropy of a sprayed packet, and the IP DSCP (dscp, 1..63; 0 keeps it),
// the mark of an in-order packet. It updates the IPv4 header checksum and
// the UDP checksum incrementally (RFC 1624), so it also serves a frame of
// headers alone built by FrameTemplate.EncodeHeaders, whose checksum
// AddPayloadSum finishes later. It returns false, changing nothing, when
// b is not an IPv4 or IPv6 UDP frame. It does not allocate.
func SetClass(b []byte, srcPort uint16, dscp uint8) bool {
	off, ok := L4Offset(b)
	if !ok {
		return false
	}
	v6 := be.Uint16(b[12:]) == EtherTypeIPv6
	if dscp != 0 {
		ip := b[EthHeaderLen:]
		if v6 {
			w := be.Uint32(ip)
			tc := uint32(dscp&0x3f)<<2 | w>>20&3
			be.PutUint32(ip, w&^(0xff<<20)|tc<<20)
		} else {
			old := be.Uint16(ip)
			ip[1] = (dscp&0x3f)<<2 | ip[1]&3
			be.PutUint16(ip[10:], UpdateChecksum(be.Uint16(ip[10:]), old, be.Uint16(ip)))
		}
	}
	if srcPort != 0 {
		udp := b[off:]
		old := be.Uint16(udp)
		be.PutUint16(udp, srcPort)
		if ck := be.Uint16(udp[6:]); ck != 0 || v6 {
			ck = UpdateChecksum(ck, old, srcPort)
			if ck == 0 {
				ck = 0xffff // 0 means "no checksum" in IPv4
			}
			be.PutUint16(udp[6:], ck)
		}
	}
	return true
}

// DSCP returns an IPv4 or IPv6 frame's DSCP (0 for any other frame).
func DSCP(b []byte) uint8 {
	if len(b) < EthHeaderLen+2 {
		return 0
	}
	switch be.Uint16(b[12:]) {
	case EtherTypeIPv4:
		return b[EthHeaderLen+1] >> 2
	case EtherTypeIPv6:
		return (b[EthHeaderLen]&0x0f)<<2 | b[EthHeaderLen+1]>>6
	}
	return 0
}
