//go:build !goexperiment.simd || !amd64

package cam

import "encoding/binary"

// simdBuild is false: without GOEXPERIMENT=simd on amd64 the SIMD branches
// compile away.
const simdBuild = false

func simdAvailable() bool { return false }

func matchTagsSIMD(meta *[16]byte, tag uint32) uint32 {
	return matchTags(binary.LittleEndian.Uint32(meta[tagsOff:]), tag)
}
