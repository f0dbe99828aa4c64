package wire

import "golang.org/x/sys/cpu"

// copyChecksumAVX2MinLen is the length below which the AVX2 loop's setup
// and final reduction cost more than they save.
const copyChecksumAVX2MinLen = 256

// copyChecksum uses the AVX2 loop when the CPU has it (cpu.X86.HasAVX2 also
// checks that the OS saves the YMM registers) and the portable loop
// otherwise.
func copyChecksum(dst, src []byte, sum uint64) uint64 {
	if cpu.X86.HasAVX2 && len(src) >= copyChecksumAVX2MinLen {
		return copyChecksumVec(dst, src, sum)
	}
	return copyChecksumGo(dst, src, sum)
}

// copyChecksumAVX2MaxLen bounds one call of the AVX2 loop so that its lane
// sums cannot overflow (they would at 32 GiB).
const copyChecksumAVX2MaxLen = 1 << 30

// copyChecksumVec runs the AVX2 loop over the whole 32-byte blocks and the
// portable loop over the last 0–31 bytes. The caller checks for AVX2.
func copyChecksumVec(dst, src []byte, sum uint64) uint64 {
	dst = dst[:len(src)]
	for len(src) >= 32 {
		n := min(len(src), copyChecksumAVX2MaxLen) &^ 31
		sum = copyChecksumAVX2(dst[:n], src[:n], sum)
		dst, src = dst[n:], src[n:]
	}
	return copyChecksumGo(dst, src, sum)
}

// copyChecksumAVX2 copies the first len(src)&^31 bytes of src into dst (dst
// must be as long) and adds them to sum, with csumAdd's exact result. It
// needs AVX2.
//
//go:noescape
func copyChecksumAVX2(dst, src []byte, sum uint64) uint64
