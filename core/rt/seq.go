package rt

// PSNs live in a 32-bit sequence space that wraps. a precedes b when b is
// ahead of a by less than half the space (serial-number arithmetic, as in
// RFC 1982), which is unambiguous because a window is far smaller than 2^31.

// seqLT reports whether a precedes b.
func seqLT(a, b uint32) bool { return int32(a-b) < 0 }

// seqLEQ reports whether a precedes or equals b.
func seqLEQ(a, b uint32) bool { return int32(a-b) <= 0 }
