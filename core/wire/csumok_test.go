package wire

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCsumOKAgreesWithFold: csumOK is csumFold(sum) == 0xffff for every
// 64-bit running sum: the edges (0, the all-ones word, multiples of 0xffff
// next to their neighbours) and random values, and sums of data that
// carries a correct checksum.
func TestCsumOKAgreesWithFold(t *testing.T) {
	const seed = 41
	r := rand.New(rand.NewPCG(seed, 0))
	check := func(s uint64) {
		require.Equal(t, csumFold(s) == 0xffff, csumOK(s), "sum %#x (seed %d)", s, seed)
	}
	for _, s := range []uint64{0, 1, 0xfffe, 0xffff, 0x10000, 0x1fffe, 0xffffffff, 1 << 32, 1<<64 - 1, 1<<64 - 2, 0xffff << 48} {
		check(s)
	}
	for k := uint64(1); k < 1<<16; k++ {
		check(k * 0xffff)
		check(k*0xffff + 1)
		check(k*0xffff - 1)
		check((1<<64 - 1) - k*0xffff) // multiples of 0xffff from the top
	}
	for range 1 << 18 {
		s := r.Uint64()
		check(s)
		check(s - s%0xffff)
	}
	// Data with its checksum filled in sums to 0xffff.
	for range 1 << 12 {
		b := make([]byte, 2+2*r.IntN(100))
		for i := 2; i < len(b); i++ {
			b[i] = byte(r.Uint32())
		}
		ck := ^csumFold(csumAdd(0, b))
		b[0], b[1] = byte(ck>>8), byte(ck)
		s := csumAdd(0, b)
		require.True(t, csumOK(s), "%x (seed %d)", b, seed)
		check(s)
	}
}
