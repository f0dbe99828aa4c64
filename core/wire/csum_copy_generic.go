//go:build !amd64

package wire

// copyChecksum is the portable loop where there is no vector version.
func copyChecksum(dst, src []byte, sum uint64) uint64 {
	return copyChecksumGo(dst, src, sum)
}
