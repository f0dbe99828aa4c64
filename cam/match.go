package cam

// matchTags returns a mask with bit 8i+7 set for each byte i of tags (a
// bucket's four slot tags) equal to tag; tag 0 finds the empty slots, since a
// present key's tag is never 0. It is the exact zero-byte test of SWAR:
// (x&0x7f + 0x7f) | x has a byte's top bit clear only where x's byte is 0,
// and no carry crosses bytes. (The slot-by-slot loop it replaces mispredicted
// about once per lookup, because which slot holds the key is random.)
func matchTags(tags, tag uint32) uint32 {
	const low7 = 0x7f7f7f7f
	x := tags ^ tag*0x01010101
	return ^(x&low7 + low7 | x | low7)
}

// matchFirst is matchTags for the hot paths, one instruction shorter: the
// classic borrow test (x-0x01010101) &^ x & 0x80808080. Its lowest set bit is
// always exact; a borrow out of a matching byte can also set the bit of an
// occupied slot above it (x = 0x01 there), never of an empty one (x >= 0x80
// there, since present tags have the top bit set). So the callers, which
// take the lowest bit or compare the key of every set bit, get the same
// answers as with matchTags, and the mask is non-zero exactly when
// matchTags's is. For tag 0 (the empty slots) it is exact.
func matchFirst(tags, tag uint32) uint32 {
	x := tags ^ tag*0x01010101
	return (x - 0x01010101) &^ x & 0x80808080
}
