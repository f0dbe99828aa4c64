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
