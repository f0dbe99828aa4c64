package wire

import "math/bits"

// The Internet checksum (RFC 1071) is a one's-complement sum of 16-bit
// big-endian words. One's-complement addition is associative and
// byte-order consistent, so summing 64-bit big-endian words with
// end-around carry and folding at the end gives the same 16-bit result at
// a quarter of the loop trips.

// csumAdd adds b to the running sum. Every chunk but the last must have an
// even length, so that words stay aligned across chunks.
func csumAdd(sum uint64, b []byte) uint64 {
	var carry uint64
	for len(b) >= 32 {
		sum, carry = bits.Add64(sum, be.Uint64(b[0:]), carry)
		sum, carry = bits.Add64(sum, be.Uint64(b[8:]), carry)
		sum, carry = bits.Add64(sum, be.Uint64(b[16:]), carry)
		sum, carry = bits.Add64(sum, be.Uint64(b[24:]), carry)
		b = b[32:]
	}
	for len(b) >= 8 {
		sum, carry = bits.Add64(sum, be.Uint64(b), carry)
		b = b[8:]
	}
	if len(b) >= 4 {
		sum, carry = bits.Add64(sum, uint64(be.Uint32(b)), carry)
		b = b[4:]
	}
	if len(b) >= 2 {
		sum, carry = bits.Add64(sum, uint64(be.Uint16(b)), carry)
		b = b[2:]
	}
	if len(b) == 1 {
		sum, carry = bits.Add64(sum, uint64(b[0])<<8, carry)
	}
	sum, carry = bits.Add64(sum, carry, 0)
	return sum + carry // cannot carry again: sum is at most 2^64-2 here
}

// csumFold folds a running sum to 16 bits (not complemented).
func csumFold(sum uint64) uint16 {
	sum = sum>>32 + sum&0xffffffff
	sum = sum>>32 + sum&0xffffffff
	sum = sum>>16 + sum&0xffff
	sum = sum>>16 + sum&0xffff
	return uint16(sum)
}

// pseudoSum is the UDP pseudo-header sum: addresses from the IP header,
// protocol 17 and the UDP length.
func pseudoSum(ip []byte, v6 bool, udpLen int) uint64 {
	var sum uint64
	if v6 {
		sum = csumAdd(0, ip[8:40])
	} else {
		sum = csumAdd(0, ip[12:20])
	}
	sum, carry := bits.Add64(sum, 17+uint64(udpLen), 0)
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
