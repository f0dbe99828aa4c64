package rt

import (
	"math/bits"

	"github.com/peregrine-net/peregrine/core/wire"
)

// snb is a sequence-number bitmap: bit n stands for PSN base+n, where the
// window that owns the bitmap keeps base. Words are least significant bit
// first (bit n is 1<<(n%64) of word n/64), so shifting the window is a word
// shift; the wire's Bitmap128 is most significant bit first and wireBits
// and orWire convert. A bitmap is a slice of a per-endpoint array, sized to
// the window (a multiple of 64 bits) and never reallocated.
type snb []uint64

func (m snb) size() uint32 { return uint32(len(m)) * 64 }

func (m snb) has(n uint32) bool {
	return n < m.size() && m[n>>6]>>(n&63)&1 != 0
}

func (m snb) set(n uint32) { m[n>>6] |= 1 << (n & 63) }

// empty reports whether no bit is set.
func (m snb) empty() bool {
	for _, w := range m {
		if w != 0 {
			return false
		}
	}
	return true
}

// count returns the number of set bits.
func (m snb) count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// shift drops the k lowest bits: bit n becomes bit n-k, and the k highest
// bits become 0. k may exceed the size (everything is cleared).
func (m snb) shift(k uint32) {
	if k == 0 {
		return
	}
	n := len(m)
	words, off := int(k>>6), k&63
	if words >= n {
		clear(m)
		return
	}
	if off == 0 {
		copy(m, m[words:])
	} else {
		for i := 0; i < n-words; i++ {
			w := m[i+words] >> off
			if i+words+1 < n {
				w |= m[i+words+1] << (64 - off)
			}
			m[i] = w
		}
	}
	clear(m[n-words:])
}

// trailingOnes returns how many consecutive bits from bit 0 are set.
func (m snb) trailingOnes() uint32 {
	for i, w := range m {
		if w != ^uint64(0) {
			return uint32(i*64 + bits.TrailingZeros64(^w))
		}
	}
	return m.size()
}

// span returns one past the highest set bit, or 0 when none is set.
func (m snb) span() uint32 {
	for i := len(m) - 1; i >= 0; i-- {
		if w := m[i]; w != 0 {
			return uint32(i*64 + 64 - bits.LeadingZeros64(w))
		}
	}
	return 0
}

// anyAtOrAbove reports whether a bit n ≥ from is set.
func (m snb) anyAtOrAbove(from uint32) bool {
	if from >= m.size() {
		return false
	}
	i := int(from >> 6)
	if m[i]&^(1<<(from&63)-1) != 0 {
		return true
	}
	for _, w := range m[i+1:] {
		if w != 0 {
			return true
		}
	}
	return false
}

// lowMask returns the bits of word i that stand for offsets below limit.
func lowMask(i int, limit uint32) uint64 {
	lo := uint32(i) * 64
	switch {
	case limit <= lo:
		return 0
	case limit >= lo+64:
		return ^uint64(0)
	}
	return 1<<(limit-lo) - 1
}

// wireBits returns the first 128 bits in the wire's order.
func (m snb) wireBits() wire.Bitmap128 {
	var b wire.Bitmap128
	for i := 0; i < 2 && i < len(m); i++ {
		b[i] = bits.Reverse64(m[i])
	}
	return b
}

// fromWire converts a wire bitmap to least-significant-first words.
func fromWire(b *wire.Bitmap128) [2]uint64 {
	return [2]uint64{bits.Reverse64(b[0]), bits.Reverse64(b[1])}
}
