package wire

import "golang.org/x/sys/cpu"

// copyChecksumArchImpls adds the AVX2 path when the CPU has it, so that it is
// tested directly whatever copyChecksumAVX2MinLen says.
func copyChecksumArchImpls() []copyChecksumImpl {
	if !cpu.X86.HasAVX2 {
		return nil
	}
	return []copyChecksumImpl{{"avx2", copyChecksumVec}}
}
