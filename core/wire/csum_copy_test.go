package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/internal/testenv"
)

type copyChecksumImpl struct {
	name string
	fn   func(dst, src []byte, sum uint64) uint64
}

// copyChecksumImpls lists every implementation, so that each is checked on
// its own whatever CopyChecksum picks on this CPU: the portable loop (the
// fallback, forced here by calling it directly), the vector loop where
// there is one, and the exported dispatcher.
func copyChecksumImpls() []copyChecksumImpl {
	impls := []copyChecksumImpl{{"go", copyChecksumGo}, {"CopyChecksum", CopyChecksum}}
	return append(impls, copyChecksumArchImpls()...)
}

const copyChecksumGuard = 0xa5

// checkCopyChecksum runs impl on src into dstBuf[dstOff:] with guard bytes
// everywhere else in dstBuf (at least 64 after) and checks the copy, the
// guards and the exact 64-bit sum against copy + csumAdd.
func checkCopyChecksum(t testing.TB, impl copyChecksumImpl, dstBuf, src []byte, dstOff int, sum uint64, what string) {
	t.Helper()
	dstBuf = dstBuf[:dstOff+len(src)+64]
	for i := range dstBuf {
		dstBuf[i] = copyChecksumGuard
	}
	got := impl.fn(dstBuf[dstOff:], src, sum)
	want := csumAdd(sum, src)
	if got != want {
		require.Equal(t, fmt.Sprintf("%#016x", want), fmt.Sprintf("%#016x", got), "%s: %s sum", impl.name, what)
	}
	if !bytes.Equal(dstBuf[dstOff:dstOff+len(src)], src) {
		require.Equal(t, src, dstBuf[dstOff:dstOff+len(src)], "%s: %s copy", impl.name, what)
	}
	before, after := dstBuf[:dstOff], dstBuf[dstOff+len(src):]
	if bytes.Count(before, []byte{copyChecksumGuard}) != len(before) || bytes.Count(after, []byte{copyChecksumGuard}) != len(after) {
		require.Failf(t, "guard byte written", "%s: %s: before dst % x, after dst % x", impl.name, what, before, after)
	}
}

// TestCopyChecksumMatchesCsumAdd compares every implementation with copy +
// csumAdd: every length up to 130 and a spread up to 9000, src and dst at
// every alignment mod 8 (and random ones up to 63), start sums at the edges
// and random, on random, all-ones (the end-around carry's worst case) and
// all-zero data (where 0 and 2^64-1 must stay apart). Replay with -seed.
func TestCopyChecksumMatchesCsumAdd(t *testing.T) {
	seed, ok := testenv.Replay(t)
	if !ok {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed))

	const maxLen = 9000
	lengths := make([]int, 0, 300)
	for n := 0; n <= 130; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range []int{159, 160, 161, 255, 256, 257, 1023, 1024, 1025, 1500, 3481, 3482, 4096, 8191, 8999, maxLen} {
		lengths = append(lengths, n)
	}
	for range 60 {
		lengths = append(lengths, r.IntN(maxLen+1))
	}
	sums := []uint64{0, ^uint64(0), 1, ^uint64(0) - 1, 0xffffffff, 1 << 63}

	srcBuf := make([]byte, maxLen+64)
	dstBuf := make([]byte, maxLen+128)
	for _, impl := range copyChecksumImpls() {
		for _, fill := range []string{"random", "ones", "zeros"} {
			for i := range srcBuf {
				switch fill {
				case "random":
					srcBuf[i] = byte(r.Uint32())
				case "ones":
					srcBuf[i] = 0xff
				default:
					srcBuf[i] = 0
				}
			}
			for _, n := range lengths {
				// Short lengths at every pair of alignments mod 8; long ones
				// at a few random pairs, to keep the test short.
				pairs := 64
				if n > 130 {
					pairs = 6
				}
				for p := range pairs {
					srcOff, dstOff := p%8, p/8
					if n > 130 {
						srcOff, dstOff = r.IntN(64), r.IntN(64)
					}
					sum := sums[r.IntN(len(sums))]
					if r.IntN(2) == 0 {
						sum = r.Uint64()
					}
					src := srcBuf[srcOff : srcOff+n]
					checkCopyChecksum(t, impl, dstBuf, src, dstOff, sum,
						fmt.Sprintf("%s n=%d srcOff=%d dstOff=%d sum=%#x (seed %d)", fill, n, srcOff, dstOff, sum, seed))
				}
			}
		}
	}
}

// TestCopyChecksumChunks checks that sums chain across calls as csumAdd's
// do: a payload copied in even-length pieces folds to RFC 1071's sum.
func TestCopyChecksumChunks(t *testing.T) {
	const seed = 7
	r := rand.New(rand.NewPCG(seed, seed))
	src := make([]byte, 3000)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	dst := make([]byte, len(src))
	for _, impl := range copyChecksumImpls() {
		for range 50 {
			n := r.IntN(len(src) + 1)
			var sum uint64
			for at := 0; at < n; {
				piece := min(n-at, r.IntN(600)&^1)
				if n-at == 1 {
					piece = 1
				}
				sum = impl.fn(dst[at:], src[at:at+piece], sum)
				at += piece
			}
			require.Equal(t, refSum(src[:n]), csumFold(sum), "%s n=%d (seed %d)", impl.name, n, seed)
			require.Equal(t, src[:n], dst[:n], "%s n=%d", impl.name, n)
		}
	}
}

// TestCopyChecksumSameSlice checks copying a buffer onto itself, the one
// overlap the doc comment allows.
func TestCopyChecksumSameSlice(t *testing.T) {
	buf := make([]byte, 1000)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	want := append([]byte(nil), buf...)
	for _, impl := range copyChecksumImpls() {
		require.Equal(t, csumAdd(3, want), impl.fn(buf, buf, 3), impl.name)
		require.Equal(t, want, buf, impl.name)
	}
}

// TestCopyChecksumShortDst checks that a dst shorter than src panics before
// anything is written.
func TestCopyChecksumShortDst(t *testing.T) {
	src := make([]byte, 300)
	for i := range src {
		src[i] = 1
	}
	dst := make([]byte, 299)
	require.Panics(t, func() { CopyChecksum(dst, src, 0) })
	require.Equal(t, make([]byte, len(dst)), dst)
}

func TestCopyChecksumAllocs(t *testing.T) {
	src := make([]byte, 3482)
	dst := make([]byte, len(src))
	for _, impl := range copyChecksumImpls() {
		for _, n := range []int{0, 7, 100, 1024, len(src)} {
			var sum uint64
			allocs := testing.AllocsPerRun(100, func() { sum = impl.fn(dst, src[:n], sum) })
			require.Zero(t, allocs, "%s n=%d", impl.name, n)
		}
	}
}

func FuzzCopyChecksum(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint64(0))
	f.Add([]byte{0xff}, uint8(3), ^uint64(0))
	f.Add(make([]byte, 300), uint8(5), ^uint64(0))
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps over the lazy dog"), uint8(1), uint64(0x123456789abcdef))
	dstBuf := make([]byte, 1<<16)
	f.Fuzz(func(t *testing.T, src []byte, dstOff uint8, sum uint64) {
		if len(src)+int(dstOff)+64 > len(dstBuf) {
			t.Skip("src longer than the test's dst buffer")
		}
		for _, impl := range copyChecksumImpls() {
			checkCopyChecksum(t, impl, dstBuf, src, int(dstOff), sum,
				fmt.Sprintf("n=%d dstOff=%d sum=%#x", len(src), dstOff, sum))
		}
	})
}

// BenchmarkCopyChecksum compares the fused copy and sum (CopyChecksum, and
// the portable loop on its own as fused-go) with a copy followed by a
// checksum pass. Hot runs use the same src and dst every time (both in L1 or
// L2); cold ones walk src and dst through two 16 MiB buffers, as a sender
// moving payloads from application memory into pool frames would.
func BenchmarkCopyChecksum(b *testing.B) {
	const coldSize = 16 << 20
	var coldSrc, coldDst []byte
	sizes := []struct {
		name string
		n    int
	}{{"1KiB", 1024}, {"3.4KiB", 3482}, {"9KiB", 9216}}
	variants := []struct {
		name string
		fn   func(dst, src []byte, sum uint64) uint64
	}{
		{"fused", CopyChecksum},
		{"fused-go", copyChecksumGo},
		{"copy+csum", func(dst, src []byte, sum uint64) uint64 {
			copy(dst, src)
			return csumAdd(sum, src)
		}},
	}
	for _, size := range sizes {
		for _, v := range variants {
			for _, temp := range []string{"hot", "cold"} {
				b.Run(size.name+"/"+v.name+"/"+temp, func(b *testing.B) {
					var src, dst []byte
					// Blocks start on a 64-byte boundary plus 2 (where a payload
					// sits after the 14-byte Ethernet header's padding), so that
					// neither side is aligned for the vector loop.
					stride := (size.n + 63) &^ 63
					if temp == "hot" {
						src, dst = make([]byte, stride+64), make([]byte, stride+64)
					} else {
						if coldSrc == nil {
							coldSrc, coldDst = make([]byte, coldSize), make([]byte, coldSize)
							for i := range coldSrc {
								coldSrc[i] = byte(i)
							}
						}
						src, dst = coldSrc, coldDst
					}
					blocks := (len(src) - 64) / stride
					b.SetBytes(int64(size.n))
					b.ReportAllocs()
					var sum uint64
					at := 0
					for range b.N {
						off := at*stride + 2
						sum = v.fn(dst[off:off+size.n], src[off:off+size.n], sum)
						if at++; at == blocks {
							at = 0
						}
					}
					if sum == 1 {
						b.Log("keeps sum alive")
					}
				})
			}
		}
	}
}
