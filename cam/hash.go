package cam

import "math/bits"

// Every table hashes its keys with HashWords over the key's bytes: each word
// is xored with a seeded mask, the two are multiplied 64×64→128 bits, and the
// product's halves are folded by xor together with both operands (the wyhash
// "mum" plus the operands). It replaced two such multiplies: one is enough
// for the spread the tables need (the tests fill tables to capacity with
// structured and adversarial key sets), and it is most of a lookup's
// arithmetic. A zero operand blinds the product to the other one; xoring the
// operands back keeps the keys of such a class apart, and a zero operand
// needs a key word equal to a seeded mask, which a key chosen without the
// seed hits with probability 2^-64 (tables facing forged keys take a secret
// seed, see doc.go).
const (
	hashP0 = 0xa0761d6478bd642f
	hashP1 = 0xe7037ed1a0b428db
)

// HashWords hashes a key of up to 16 bytes given as two little-endian words
// (bytes 0–7 in lo, 8–15 in hi), seeded. Tables use it on their keys; it is
// exported for callers that spread the same keys elsewhere (e.g. choosing a
// worker by connection).
func HashWords(lo, hi, seed uint64) uint64 {
	k := newHashKeys(seed)
	return k.hash(lo, hi)
}

// hashKeys are HashWords' two masks for one seed, computed once per table.
type hashKeys [2]uint64

func newHashKeys(seed uint64) hashKeys {
	return hashKeys{seed ^ hashP0, bits.RotateLeft64(seed, 32) ^ hashP1}
}

func (k *hashKeys) hash(lo, hi uint64) uint64 {
	a, b := lo^k[0], hi^k[1]
	p1, p0 := bits.Mul64(a, b)
	return p1 ^ p0 ^ a ^ b
}

// HashUint32 hashes a 32-bit key as a Table[uint32] does.
func HashUint32(k uint32, seed uint64) uint64 { return HashWords(uint64(k), 0, seed) }

// HashUint64 hashes a 64-bit key as a Table[uint64] does.
func HashUint64(k uint64, seed uint64) uint64 { return HashWords(k, 0, seed) }

// Key16 is a 16-byte key: any transport tuple packed into two words.
type Key16 struct{ Lo, Hi uint64 }

// HashKey16 hashes a Key16 as a Table[Key16] does.
func HashKey16(k Key16, seed uint64) uint64 { return HashWords(k.Lo, k.Hi, seed) }
