package wire

import "math/bits"

// CopyChecksum copies src into dst (like copy; dst must be at least len(src)
// long, else it panics before writing anything) and returns sum with src's
// bytes added as csumAdd(sum, src) would: the Internet checksum's 64-bit
// accumulator, little-endian words summed with end-around carry.
//
// The result equals csumAdd(sum, src) exactly, all 64 bits, for every sum and
// every src, not just after csumFold. That holds for any method of summing
// because csumAdd's result is a function of the exact integer
// T = sum + Σ words alone: 0 if T is 0, else the value in [1, 2^64-1]
// congruent to T modulo 2^64-1; every step of both implementations
// (add-with-carry chains, end-around adds, rotating a partial sum of high
// halves left by 32) keeps that form. The same rule as csumAdd applies to
// chunks: a src of odd length must be the last chunk of its sum.
//
// dst beyond len(src) is not touched. dst and src should not overlap unless
// they are the same slice. The sender uses it to move a payload into a frame
// and sum it in one pass over the source instead of a copy and a checksum
// pass.
func CopyChecksum(dst, src []byte, sum uint64) uint64 {
	return copyChecksum(dst[:len(src)], src, sum)
}

// copyChecksumGo is the portable fused loop: the same add-with-carry chain
// as csumAdd, each word stored to dst as it is loaded. It is also the tail
// of the vector versions, so it runs on every architecture and tests call it
// directly to cover it on amd64 too.
func copyChecksumGo(dst, src []byte, sum uint64) uint64 {
	dst = dst[:len(src)]
	var c uint64
	// The second condition is always true (dst has src's length); it lets
	// the compiler drop the bounds checks on dst inside the loop.
	for len(src) >= 64 && len(dst) >= 64 {
		s, d := src[:64], dst[:64]
		w0, w1, w2, w3 := le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:])
		w4, w5, w6, w7 := le.Uint64(s[32:]), le.Uint64(s[40:]), le.Uint64(s[48:]), le.Uint64(s[56:])
		le.PutUint64(d[0:], w0)
		le.PutUint64(d[8:], w1)
		le.PutUint64(d[16:], w2)
		le.PutUint64(d[24:], w3)
		le.PutUint64(d[32:], w4)
		le.PutUint64(d[40:], w5)
		le.PutUint64(d[48:], w6)
		le.PutUint64(d[56:], w7)
		sum, c = bits.Add64(sum, w0, c)
		sum, c = bits.Add64(sum, w1, c)
		sum, c = bits.Add64(sum, w2, c)
		sum, c = bits.Add64(sum, w3, c)
		sum, c = bits.Add64(sum, w4, c)
		sum, c = bits.Add64(sum, w5, c)
		sum, c = bits.Add64(sum, w6, c)
		sum, c = bits.Add64(sum, w7, c)
		src, dst = src[64:], dst[64:]
	}
	for len(src) >= 8 && len(dst) >= 8 {
		w := le.Uint64(src)
		le.PutUint64(dst, w)
		sum, c = bits.Add64(sum, w, c)
		src, dst = src[8:], dst[8:]
	}
	// The last 0–7 bytes, each at its place in a little-endian word, as in
	// csumAdd.
	var tail uint64
	if len(src) >= 4 && len(dst) >= 4 {
		v := le.Uint32(src)
		le.PutUint32(dst, v)
		tail = uint64(v)
		src, dst = src[4:], dst[4:]
	}
	if len(src) >= 2 && len(dst) >= 2 {
		v := le.Uint16(src)
		le.PutUint16(dst, v)
		tail |= uint64(v) << 32
		src, dst = src[2:], dst[2:]
	}
	if len(src) == 1 && len(dst) == 1 {
		dst[0] = src[0]
		tail |= uint64(src[0]) << 48
	}
	sum, c = bits.Add64(sum, tail, c)
	return sum + c // cannot carry again: sum is at most 2^64-2 here
}
