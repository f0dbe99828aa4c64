//go:build !amd64

package wire

// csumVec is false where there is no vector sum.
const csumVec = false

func csumAddVec(sum uint64, b []byte) uint64 { return csumAddGo(sum, b) }
