package wire

import "golang.org/x/sys/cpu"

// csumVec: the AVX2 sum is there (cpu.X86.HasAVX2 also checks that the OS
// saves the YMM registers).
var csumVec = cpu.X86.HasAVX2

// csumAddVec is csumAdd over the whole 32-byte blocks with AVX2 and the
// word loop over the last 0–31 bytes; on a full-sized frame it is several
// times the scalar loop's bytes per cycle, which is one add with carry per
// 8 bytes. The caller checks csumVec.
func csumAddVec(sum uint64, b []byte) uint64 {
	for len(b) >= 32 {
		n := min(len(b), copyChecksumAVX2MaxLen) &^ 31
		sum = checksumAVX2(b[:n], sum)
		b = b[n:]
	}
	return csumAddGo(sum, b)
}

// checksumAVX2 adds the first len(src)&^31 bytes of src to sum, with
// csumAdd's exact result. It needs AVX2.
//
//go:noescape
func checksumAVX2(src []byte, sum uint64) uint64
