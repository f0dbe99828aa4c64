package wire

import (
	"encoding/binary"
	"math/bits"
)

// The Internet checksum (RFC 1071) is a one's-complement sum of 16-bit
// big-endian words. One's-complement addition is associative and
// commutative, and it commutes with swapping the two bytes of every word
// (RFC 1071 §2(B)): so the sum is taken over 64-bit little-endian words
// (native loads on amd64 and arm64, no byte swap per word) with end-around
// carry, folded to 16 bits at the end and swapped once into network order.
// A frame's checksum is then a chain of add-with-carry instructions, eight
// per 64 bytes.

var le = binary.LittleEndian

// csumAdd adds b to the running sum. Every chunk but the last must have an
// even length, so that bytes keep their place in the 16-bit words across
// chunks. A payload-sized b takes the vector sum where there is one: the
// receiver verifies every frame's checksum over its whole payload.
func csumAdd(sum uint64, b []byte) uint64 {
	if csumVec && len(b) >= csumVecMinLen {
		return csumAddVec(sum, b)
	}
	return csumAddGo(sum, b)
}

// csumVecMinLen is the length below which the vector sum's setup and final
// reduction cost more than they save (the fused copy's threshold).
const csumVecMinLen = 256

// csumAddGo is the portable sum, eight adds with carry per 64 bytes, and
// the vector sum's tail.
func csumAddGo(sum uint64, b []byte) uint64 {
	var c uint64
	for len(b) >= 64 {
		w := b[:64]
		sum, c = bits.Add64(sum, le.Uint64(w[0:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[8:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[16:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[24:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[32:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[40:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[48:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[56:]), c)
		b = b[64:]
	}
	if len(b) >= 32 {
		w := b[:32]
		sum, c = bits.Add64(sum, le.Uint64(w[0:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[8:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[16:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[24:]), c)
		b = b[32:]
	}
	if len(b) >= 16 {
		w := b[:16]
		sum, c = bits.Add64(sum, le.Uint64(w[0:]), c)
		sum, c = bits.Add64(sum, le.Uint64(w[8:]), c)
		b = b[16:]
	}
	if len(b) >= 8 {
		sum, c = bits.Add64(sum, le.Uint64(b), c)
		b = b[8:]
	}
	// The last 0–7 bytes, each at its place in a little-endian word.
	var tail uint64
	if len(b) >= 4 {
		tail = uint64(le.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		tail |= uint64(le.Uint16(b)) << 32
		b = b[2:]
	}
	if len(b) == 1 {
		tail |= uint64(b[0]) << 48
	}
	sum, c = bits.Add64(sum, tail, c)
	return sum + c // cannot carry again: sum is at most 2^64-2 here
}

// csumFold folds a running sum to the 16-bit one's-complement sum (not
// complemented), in network byte order.
func csumFold(sum uint64) uint16 {
	s := sum>>32 + sum&0xffffffff // ≤ 33 bits
	s = s>>32 + s&0xffffffff      // ≤ 32 bits
	s = s>>16 + s&0xffff          // ≤ 17 bits
	s = s>>16 + s&0xffff
	return bits.ReverseBytes16(uint16(s))
}

// csumOK reports whether a running sum folds to 0xffff (csumFold(sum) ==
// 0xffff), the one's-complement sum of data that includes a correct
// checksum. Folding keeps the value modulo 0xffff (2^32 and 2^16 are 1
// modulo 0xffff) and never turns a non-zero sum into 0, and it ends in
// [1, 0xffff] for a non-zero sum: so the fold is 0xffff exactly when sum is
// a non-zero multiple of 0xffff. A divisibility test by a constant is a
// multiplication and a compare, shorter than the fold's chain of shifts
// and adds.
func csumOK(sum uint64) bool { return sum != 0 && sum%0xffff == 0 }

// pseudoSum is the UDP pseudo-header sum: addresses from the IP header,
// protocol 17 and the UDP length, as big-endian words in the running sum's
// (little-endian) order.
func pseudoSum(ip []byte, v6 bool, udpLen int) uint64 {
	var sum uint64
	if v6 {
		sum = csumAdd(0, ip[8:40])
	} else {
		sum = csumAdd(0, ip[12:20])
	}
	sum, carry := bits.Add64(sum, uint64(bits.ReverseBytes16(ProtocolUDP))+uint64(bits.ReverseBytes16(uint16(udpLen))), 0)
	return sum + carry
}

// udpChecksum computes the checksum field for the UDP datagram udp (its
// checksum field must read 0) under the IP header ip. A result of 0 is
// sent as 0xffff (RFC 768).
func udpChecksum(ip []byte, v6 bool, udp []byte) uint16 {
	c := ^csumFold(csumAdd(pseudoSum(ip, v6, len(udp)), udp))
	if c == 0 {
		c = 0xffff
	}
	return c
}

// udpChecksumOK verifies a datagram whose checksum field is non-zero.
func udpChecksumOK(ip []byte, v6 bool, udp []byte) bool {
	return csumFold(csumAdd(pseudoSum(ip, v6, len(udp)), udp)) == 0xffff
}

// IPv4HeaderChecksum returns the one's-complement of the Internet checksum
// of the IPv4 header h, as its bytes stand. With the checksum field zero it
// is the value to store there; over a header that carries a correct
// checksum it is 0. It is the one IPv4 header checksum of the tree: the
// encoders here, the generators in app/ and bench/ and their tests all use
// it.
func IPv4HeaderChecksum(h []byte) uint16 { return ^csumFold(csumAdd(0, h)) }

// UpdateChecksum returns the Internet checksum ck updated for a change to
// the data it covers, from 16-bit words whose one's-complement sum is old
// to words whose sum is new: HC' = ~(~HC + ~m + m') (RFC 1624, eqn. 3),
// without reading the rest of the data. For one changed word, old and new
// are the word before and after (a router lowering an IPv4 TTL). It does
// not map a result of 0 to 0xffff: UDP's rule (RFC 768) is the caller's,
// as FrameTemplate.Refresh does it.
func UpdateChecksum(ck, old, new uint16) uint16 {
	s := uint32(^ck) + uint32(^old) + uint32(new)
	s = s>>16 + s&0xffff
	s += s >> 16
	return ^uint16(s)
}
