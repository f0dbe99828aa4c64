package cam

import "math/bits"

// Every table hashes its keys with HashWords over the key's bytes. Two
// independent 64×64→128-bit multiplies, each folded by xor of its halves (the
// wyhash "mum"), run in parallel and are xored. A multiply by zero would
// blind a single mum to its other operand, but a key has to blind both to
// collide, which leaves single keys, never whole classes of them.
const (
	hashP0 = 0xa0761d6478bd642f
	hashP1 = 0xe7037ed1a0b428db
	hashP2 = 0x8ebc6af09c88c6e3
	hashP3 = 0x589965cc75374cc3
)

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// HashWords hashes a key of up to 16 bytes given as two little-endian words
// (bytes 0–7 in lo, 8–15 in hi), seeded. Tables use it on their keys; it is
// exported for callers that spread the same keys elsewhere (e.g. choosing a
// worker by connection).
func HashWords(lo, hi, seed uint64) uint64 {
	k := newHashKeys(seed)
	return k.hash(lo, hi)
}

// hashKeys are HashWords' four multiplicand masks for one seed, computed once
// per table.
type hashKeys [4]uint64

func newHashKeys(seed uint64) hashKeys {
	return hashKeys{seed ^ hashP0, hashP1, seed ^ hashP2, hashP3}
}

func (k *hashKeys) hash(lo, hi uint64) uint64 {
	return mum(lo^k[0], hi^k[1]) ^ mum(hi^k[2], lo^k[3])
}

// HashUint32 hashes a 32-bit key as a Table[uint32] does.
func HashUint32(k uint32, seed uint64) uint64 { return HashWords(uint64(k), 0, seed) }

// HashUint64 hashes a 64-bit key as a Table[uint64] does.
func HashUint64(k uint64, seed uint64) uint64 { return HashWords(k, 0, seed) }

// Key16 is a 16-byte key: any transport tuple packed into two words.
type Key16 struct{ Lo, Hi uint64 }

// HashKey16 hashes a Key16 as a Table[Key16] does.
func HashKey16(k Key16, seed uint64) uint64 { return HashWords(k.Lo, k.Hi, seed) }
