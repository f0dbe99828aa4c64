package mbuf

// Meta is the per-frame metadata. It holds no pointers, so the garbage
// collector never scans the pool's metadata array. An alloc resets it to
// DataOff=Headroom and everything else zero; a raw Cache.GetBulk leaves it
// as the previous owner left it.
type Meta struct {
	DataOff  uint16 // offset of the packet's first byte in the frame
	DataLen  uint16
	Port     uint16
	Queue    uint16
	FlowHash uint32
	Flags    uint32
	RxTime   int64     // nanoseconds on the owner's clock, set by ports that stamp
	User     [4]uint64 // free for stages
}

// The packet-access methods below never allocate. Their results alias pool
// memory and are valid while the caller owns h. Every access goes through a
// bounds-checked slice of the frame, so a foreign handle or a Meta edited
// beyond the frame panics instead of reaching another frame.

// Meta returns h's metadata.
func (p *Pool) Meta(h Handle) *Meta { return &p.meta[h] }

// frame returns h's whole frame with its capacity cut at the frame's end.
func (p *Pool) frame(h Handle) []byte {
	off := int(h) << p.frameShift
	end := off + p.frameSize
	return p.mem[off:end:end]
}

// Frame returns h's whole frame, FrameSize bytes.
func (p *Pool) Frame(h Handle) []byte { return p.frame(h) }

// Data returns the packet: the frame's bytes [DataOff, DataOff+DataLen).
func (p *Pool) Data(h Handle) []byte {
	m := &p.meta[h]
	start, end := int(m.DataOff), int(m.DataOff)+int(m.DataLen)
	return p.frame(h)[start:end:end]
}

// Append grows the packet's tail by n bytes and returns them (their content
// is whatever the frame held), or returns nil and changes nothing when the
// frame has fewer than n bytes of tailroom.
func (p *Pool) Append(h Handle, n int) []byte {
	m := &p.meta[h]
	end := int(m.DataOff) + int(m.DataLen)
	if n < 0 || n > p.frameSize-end {
		return nil
	}
	m.DataLen += uint16(n)
	return p.frame(h)[end : end+n : end+n]
}

// Prepend grows the packet into its headroom by n bytes and returns them, or
// returns nil and changes nothing when the headroom is smaller than n.
func (p *Pool) Prepend(h Handle, n int) []byte {
	m := &p.meta[h]
	if n < 0 || n > int(m.DataOff) {
		return nil
	}
	m.DataOff -= uint16(n)
	m.DataLen += uint16(n)
	start := int(m.DataOff)
	return p.frame(h)[start : start+n : start+n]
}

// Adj drops n bytes from the front of the packet; false (and no change) if
// the packet is shorter than n.
func (p *Pool) Adj(h Handle, n int) bool {
	m := &p.meta[h]
	if n < 0 || n > int(m.DataLen) {
		return false
	}
	m.DataOff += uint16(n)
	m.DataLen -= uint16(n)
	return true
}

// Trim drops n bytes from the end of the packet; false (and no change) if
// the packet is shorter than n.
func (p *Pool) Trim(h Handle, n int) bool {
	m := &p.meta[h]
	if n < 0 || n > int(m.DataLen) {
		return false
	}
	m.DataLen -= uint16(n)
	return true
}

// SetLen sets the packet's length to n; false (and no change) if n bytes
// from DataOff do not fit in the frame.
func (p *Pool) SetLen(h Handle, n int) bool {
	m := &p.meta[h]
	if n < 0 || n > p.frameSize-int(m.DataOff) {
		return false
	}
	m.DataLen = uint16(n)
	return true
}
