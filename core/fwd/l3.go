package fwd

import (
	"encoding/binary"

	"github.com/peregrine-net/peregrine/core/wire"
)

var be = binary.BigEndian

// EtherTypes, IP protocols and ICMP types the L3 modes read.
const (
	etherIPv4  = 0x0800
	etherIPv6  = 0x86dd
	etherVLAN  = 0x8100
	etherQinQ  = 0x88a8
	protoICMP  = 1
	protoTCP   = 6
	protoUDP   = 17
	protoICMP6 = 58
)

// l3 locates a frame's IP header: its offset, the EtherType (IPv4 or
// IPv6; 0 for anything else) past at most two VLAN tags, and for IPv4 or
// IPv6 the L4 protocol, the L4 offset and the L4 length. An IPv4 fragment
// other than the first has no L4 header (l4 = -1); a header that does not
// fit the frame, or IPv6 with extension headers, reads as not IP. It
// never panics and does not allocate.
func l3(d []byte) (ip, ether int, proto uint8, l4, l4len int) {
	off := 12
	for range 3 {
		if len(d) < off+2 {
			return 0, 0, 0, -1, 0
		}
		t := int(be.Uint16(d[off:]))
		if t != etherVLAN && t != etherQinQ {
			ip = off + 2
			ether = t
			break
		}
		off += 4
	}
	switch ether {
	case etherIPv4:
		if len(d) < ip+20 || d[ip]>>4 != 4 {
			return 0, 0, 0, -1, 0
		}
		ihl := int(d[ip]&0xf) * 4
		total := int(be.Uint16(d[ip+2:]))
		if ihl < 20 || total < ihl || len(d) < ip+total {
			return 0, 0, 0, -1, 0
		}
		l4 = ip + ihl
		if be.Uint16(d[ip+6:])&0x1fff != 0 {
			l4 = -1 // a later fragment: no L4 header here
		}
		return ip, ether, d[ip+9], l4, total - ihl
	case etherIPv6:
		if len(d) < ip+40 || d[ip]>>4 != 6 {
			return 0, 0, 0, -1, 0
		}
		plen := int(be.Uint16(d[ip+4:]))
		if len(d) < ip+40+plen {
			return 0, 0, 0, -1, 0
		}
		return ip, ether, d[ip+6], ip + 40, plen
	}
	return 0, 0, 0, -1, 0
}

func swap(a, b []byte) {
	for i := range a {
		a[i], b[i] = b[i], a[i]
	}
}

// swap5Tuple swaps the Ethernet addresses, the IP addresses and the TCP or
// UDP ports: testpmd's 5tswap. The checksums stay valid: each covers both
// fields of a pair, and a one's-complement sum does not depend on order.
func swap5Tuple(d []byte) {
	if len(d) < 12 {
		return
	}
	swap(d[0:6], d[6:12])
	ip, ether, proto, l4, l4len := l3(d)
	switch ether {
	case etherIPv4:
		swap(d[ip+12:ip+16], d[ip+16:ip+20])
	case etherIPv6:
		swap(d[ip+8:ip+24], d[ip+24:ip+40])
	default:
		return
	}
	if l4 >= 0 && l4len >= 4 && (proto == protoTCP || proto == protoUDP) {
		swap(d[l4:l4+2], d[l4+2:l4+4])
	}
}

// echoReply turns an ICMP (or ICMPv6) echo request into its reply in place:
// addresses swapped, the type changed and the checksum updated for it. It
// reports false for any other frame.
func echoReply(d []byte) bool {
	ip, ether, proto, l4, l4len := l3(d)
	if l4 < 0 || l4len < 8 {
		return false
	}
	var reply byte
	switch {
	case ether == etherIPv4 && proto == protoICMP && d[l4] == 8 && d[l4+1] == 0:
		reply = 0
	case ether == etherIPv6 && proto == protoICMP6 && d[l4] == 128 && d[l4+1] == 0:
		reply = 129
	default:
		return false
	}
	old := be.Uint16(d[l4:])
	d[l4] = reply
	be.PutUint16(d[l4+2:], wire.UpdateChecksum(be.Uint16(d[l4+2:]), old, be.Uint16(d[l4:])))
	swap(d[0:6], d[6:12])
	if ether == etherIPv4 {
		swap(d[ip+12:ip+16], d[ip+16:ip+20])
	} else {
		swap(d[ip+8:ip+24], d[ip+24:ip+40])
	}
	return true
}

// checksums verifies a frame's IPv4 header checksum and its TCP, UDP or
// ICMP checksum (a UDP checksum of 0 over IPv4 means none was sent).
// Frames that are not IP, and later fragments, have nothing to check.
func checksums(d []byte) (ipOK, l4OK bool) {
	ip, ether, proto, l4, l4len := l3(d)
	switch ether {
	case etherIPv4:
		ihl := int(d[ip]&0xf) * 4
		ipOK = wire.IPv4HeaderChecksum(d[ip:ip+ihl]) == 0
	case etherIPv6:
		ipOK = true
	default:
		return true, true
	}
	if l4 < 0 {
		return ipOK, true
	}
	seg := d[l4 : l4+l4len]
	var pseudo uint64
	switch {
	case proto == protoUDP && l4len >= 8:
		if ether == etherIPv4 && be.Uint16(seg[6:]) == 0 {
			return ipOK, true
		}
	case proto == protoTCP && l4len >= 20:
	case proto == protoICMP && ether == etherIPv4 && l4len >= 4:
		return ipOK, fold(sum(0, seg)) == 0xffff
	case proto == protoICMP6 && ether == etherIPv6 && l4len >= 4:
	default:
		return ipOK, true
	}
	if ether == etherIPv4 {
		pseudo = sum(0, d[ip+12:ip+20])
	} else {
		pseudo = sum(0, d[ip+8:ip+40])
	}
	pseudo += uint64(proto) + uint64(l4len)
	return ipOK, fold(sum(pseudo, seg)) == 0xffff
}

// sum adds b's 16-bit big-endian words (an odd last byte padded with 0)
// to s, carries kept for fold.
func sum(s uint64, b []byte) uint64 {
	for len(b) >= 2 {
		s += uint64(be.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold reduces a sum to its 16-bit one's-complement value.
func fold(s uint64) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
