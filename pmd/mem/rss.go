package mem

import "encoding/binary"

// rssKey is the 40-byte Toeplitz key most NICs ship as their default (the
// one Microsoft's RSS specification publishes, and DPDK's and the Linux
// drivers' default). With it, RSSHash gives the hash a real NIC would, so a
// sender that picks its UDP source port to land on a given queue of a mem
// pair picks the same port a hardware NIC with the default key would steer
// there.
var rssKey = [40]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2,
	0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4,
	0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// RETASize is the size of the redirection table RSSQueue models: the
// common NIC default of 128 entries filled round robin (entry i → queue
// i mod n).
const RETASize = 128

// RSSQueue returns the receive queue, of n, a NIC with the default
// redirection table gives a frame whose RSS hash is hash: the table entry
// is the hash's low 7 bits.
func RSSQueue(hash uint32, n int) int {
	if n <= 1 {
		return 0
	}
	return int(hash&(RETASize-1)) % n
}

// Toeplitz returns the Toeplitz hash of input under the default key; input
// is at most 36 bytes (an IPv6 4-tuple: the key covers 36+4 bytes), longer
// input is cut there.
func Toeplitz(input []byte) uint32 {
	var h uint32
	// window holds the key's 64 bits from the current input bit on; it is
	// refilled one key byte per input byte.
	window := binary.BigEndian.Uint64(rssKey[:8])
	for i, b := range input {
		if i >= len(rssKey)-4 {
			break
		}
		for bit := 7; bit >= 0; bit-- {
			if b&(1<<bit) != 0 {
				h ^= uint32(window >> 32)
			}
			window <<= 1
		}
		if i+8 < len(rssKey) {
			window |= uint64(rssKey[i+8])
		}
	}
	return h
}

// RSSHash is the flow hash a NIC's RSS computes on an Ethernet frame, as
// the mem driver's steer=hash mode uses it: over source address,
// destination address, source port, destination port for an unfragmented
// TCP or UDP packet in IPv4 or IPv6 (first next header only); over the two
// addresses for other IP packets and IPv4 fragments; 0 for anything else,
// including truncated frames (so they land on queue 0). One 802.1Q tag is
// skipped. It never allocates and never panics on any input.
func RSSHash(frame []byte) uint32 {
	if len(frame) < 14 {
		return 0
	}
	etype := binary.BigEndian.Uint16(frame[12:14])
	l3 := frame[14:]
	if etype == 0x8100 {
		if len(frame) < 18 {
			return 0
		}
		etype = binary.BigEndian.Uint16(frame[16:18])
		l3 = frame[18:]
	}
	var tuple [36]byte
	switch etype {
	case 0x0800:
		if len(l3) < 20 || l3[0]>>4 != 4 {
			return 0
		}
		ihl := int(l3[0]&0x0f) * 4
		if ihl < 20 || len(l3) < ihl {
			return 0
		}
		copy(tuple[:8], l3[12:20])
		frag := binary.BigEndian.Uint16(l3[6:8])&0x3fff != 0 // MF or an offset
		if proto := l3[9]; !frag && (proto == 6 || proto == 17) && len(l3) >= ihl+4 {
			copy(tuple[8:12], l3[ihl:ihl+4])
			return Toeplitz(tuple[:12])
		}
		return Toeplitz(tuple[:8])
	case 0x86dd:
		if len(l3) < 40 || l3[0]>>4 != 6 {
			return 0
		}
		copy(tuple[:32], l3[8:40])
		if next := l3[6]; (next == 6 || next == 17) && len(l3) >= 44 {
			copy(tuple[32:36], l3[40:44])
			return Toeplitz(tuple[:36])
		}
		return Toeplitz(tuple[:32])
	}
	return 0
}
