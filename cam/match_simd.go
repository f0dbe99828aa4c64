//go:build goexperiment.simd && amd64

package cam

import "simd/archsimd"

// simdBuild is true when the binary carries matchTagsSIMD.
const simdBuild = true

// simdAvailable reports whether matchTagsSIMD may run: VPCMPEQB and VPMOVMSKB
// need AVX; the broadcast is emulated with AVX2.
func simdAvailable() bool { return archsimd.X86.AVX2() }

// matchTagsSIMD is matchTags with simd/archsimd: compare the 16 metadata
// bytes with the broadcast tag, keep the four tag bytes' results (12 to 15), and spread
// bit i to bit 8i+7 like matchTags (a multiply with no overlapping terms).
func matchTagsSIMD(meta *[16]byte, tag uint32) uint32 {
	eq := archsimd.LoadUint8x16(meta).Equal(archsimd.BroadcastUint8x16(uint8(tag))).ToBits()
	return (uint32(eq>>tagsOff&0xf) * 0x00204081 & 0x01010101) << 7
}
