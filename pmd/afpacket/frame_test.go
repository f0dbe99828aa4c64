package afpacket

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// blockBuilder lays out a TPACKET_V3 block the way the kernel does, for
// tests of the parser.
type blockBuilder struct {
	b    []byte
	off  int // where the next frame's header goes
	last int // header offset of the previous frame, -1 if none
	n    int
}

func newBlock(size int) *blockBuilder {
	bb := &blockBuilder{b: make([]byte, size), off: blockHeaderLen, last: -1}
	binary.NativeEndian.PutUint32(bb.b[blockFirstOff:], blockHeaderLen)
	return bb
}

// add appends a frame; mac is the data offset from the header (the kernel
// uses 48 + sockaddr_ll + alignment, e.g. 82 for Ethernet).
func (bb *blockBuilder) add(data []byte, status uint32, tci uint16, pkttype byte) {
	const mac = 82
	h := bb.b[bb.off:]
	binary.NativeEndian.PutUint32(h[hdrSecOff:], 5)
	binary.NativeEndian.PutUint32(h[hdrNsecOff:], 6)
	binary.NativeEndian.PutUint32(h[hdrSnapOff:], uint32(len(data)))
	binary.NativeEndian.PutUint32(h[hdrLenOff:], uint32(len(data)))
	binary.NativeEndian.PutUint32(h[hdrStatusOff:], status)
	binary.NativeEndian.PutUint16(h[hdrMacOff:], mac)
	binary.NativeEndian.PutUint32(h[hdrVlanTCIOff:], uint32(tci))
	h[sllPkttypeOff] = pkttype
	copy(h[mac:], data)
	if bb.last >= 0 {
		binary.NativeEndian.PutUint32(bb.b[bb.last+hdrNextOff:], uint32(bb.off-bb.last))
	}
	bb.last = bb.off
	bb.off += (mac + len(data) + 15) &^ 15
	bb.n++
	binary.NativeEndian.PutUint32(bb.b[blockNumOff:], uint32(bb.n))
}

// walk reads every frame of a block the way RxBurst does, copying each
// into a buffer of its length; it never trusts the block.
func walk(block []byte) (frames [][]byte, malformed bool) {
	count, off, ok := blockFrames(block)
	if !ok {
		return nil, true
	}
	for left := count; left > 0; left-- {
		f, ok := parseFrame(block, off)
		if !ok {
			return frames, true
		}
		dst := make([]byte, f.frameLen())
		f.copyTo(dst, block)
		frames = append(frames, dst)
		if f.next == 0 && left > 1 {
			return frames, true
		}
		off += f.next
	}
	return frames, false
}

func TestParseBlock(t *testing.T) {
	bb := newBlock(4096)
	a := []byte("0123456789abcdefghij")
	bb.add(a, 0, 0, 0)
	bb.add(a, tpStatusVlanValid, 0x2007, 0)
	bb.add(a[:5], 0, 0, packetOutgoing)
	frames, malformed := walk(bb.b)
	require.False(t, malformed)
	require.Len(t, frames, 3)
	require.Equal(t, a, frames[0])
	require.Equal(t, []byte("0123456789ab\x81\x00\x20\x07cdefghij"), frames[1], "VLAN tag re-inserted after the MACs")
	require.Equal(t, a[:5], frames[2])

	f, ok := parseFrame(bb.b, blockHeaderLen)
	require.True(t, ok)
	require.Equal(t, uint32(5), f.sec)
	require.Equal(t, uint32(6), f.nsec)
	require.False(t, f.outgoing)
	last, ok := parseFrame(bb.b, bb.last)
	require.True(t, ok)
	require.True(t, last.outgoing)
	require.Zero(t, last.next)

	count, first, ok := blockFrames(make([]byte, 4096))
	require.True(t, ok, "an empty block is valid")
	require.Zero(t, count)
	require.Zero(t, first)
}

func TestParseBlockRejectsCorruption(t *testing.T) {
	a := make([]byte, 100)
	corrupt := map[string]func(b []byte){
		"count beyond the block": func(b []byte) { binary.NativeEndian.PutUint32(b[blockNumOff:], 1<<30) },
		"first frame outside":    func(b []byte) { binary.NativeEndian.PutUint32(b[blockFirstOff:], 4090) },
		"first frame in header":  func(b []byte) { binary.NativeEndian.PutUint32(b[blockFirstOff:], 8) },
		"snaplen beyond block":   func(b []byte) { binary.NativeEndian.PutUint32(b[blockHeaderLen+hdrSnapOff:], 1<<31) },
		"mac beyond block":       func(b []byte) { binary.NativeEndian.PutUint16(b[blockHeaderLen+hdrMacOff:], 0xffff) },
		"mac inside the header":  func(b []byte) { binary.NativeEndian.PutUint16(b[blockHeaderLen+hdrMacOff:], 4) },
		"next beyond block":      func(b []byte) { binary.NativeEndian.PutUint32(b[blockHeaderLen+hdrNextOff:], 1<<31) },
		"next into own header":   func(b []byte) { binary.NativeEndian.PutUint32(b[blockHeaderLen+hdrNextOff:], 8) },
		"chain ends early":       func(b []byte) { binary.NativeEndian.PutUint32(b[blockHeaderLen+hdrNextOff:], 0) },
	}
	for name, spoil := range corrupt {
		bb := newBlock(4096)
		bb.add(a, 0, 0, 0)
		bb.add(a, 0, 0, 0)
		spoil(bb.b)
		require.NotPanics(t, func() {
			_, malformed := walk(bb.b)
			require.True(t, malformed, name)
		}, name)
	}
	_, _, ok := blockFrames(make([]byte, 10))
	require.False(t, ok, "block shorter than its descriptor")
	_, ok = parseFrame(make([]byte, 100), 90)
	require.False(t, ok)
	_, ok = parseFrame(make([]byte, 100), -1)
	require.False(t, ok)
}

// FuzzParseBlock feeds arbitrary bytes to the ring parser as a block: it
// must never panic, and every frame it accepts must lie inside the block.
func FuzzParseBlock(f *testing.F) {
	bb := newBlock(1024)
	bb.add([]byte("hello, ring"), 0, 0, 0)
	bb.add([]byte("tagged frame here"), tpStatusVlanValid|tpStatusVlanTPValid, 7, 0)
	f.Add(bb.b)
	f.Add(make([]byte, blockHeaderLen))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, block []byte) {
		count, first, ok := blockFrames(block)
		if !ok {
			return
		}
		off := first
		for left := count; left > 0; left-- {
			fr, ok := parseFrame(block, off)
			if !ok {
				return
			}
			if fr.data < off+tpacket3HdrLen && fr.snapLen > 0 || fr.data+fr.snapLen > len(block) {
				t.Fatalf("frame at %d: data [%d,%d) outside the block of %d", off, fr.data, fr.data+fr.snapLen, len(block))
			}
			dst := make([]byte, fr.frameLen())
			fr.copyTo(dst, block)
			if fr.next == 0 {
				return
			}
			off += fr.next
		}
	})
}

// v2Slot lays out a received frame in a V2 slot the way the kernel does
// (Ethernet with a virtio-net header: data at 76).
func v2Slot(size int, data []byte, status uint32, tci uint16, pkttype byte) []byte {
	const mac = 76
	s := make([]byte, size)
	binary.NativeEndian.PutUint32(s[v2StatusOff:], status|tpStatusUser)
	binary.NativeEndian.PutUint32(s[v2LenOff:], uint32(len(data)))
	binary.NativeEndian.PutUint32(s[v2SnapOff:], uint32(len(data)))
	binary.NativeEndian.PutUint16(s[v2MacOff:], mac)
	binary.NativeEndian.PutUint32(s[v2SecOff:], 5)
	binary.NativeEndian.PutUint32(s[v2NsecOff:], 6)
	binary.NativeEndian.PutUint16(s[v2VlanTCIOff:], tci)
	s[v2PkttypeOff] = pkttype
	copy(s[mac:], data)
	return s
}

func TestParseSlot(t *testing.T) {
	frame := []byte("0123456789abcdef-payload")
	f, ok := parseSlot(v2Slot(256, frame, 0, 0, 0))
	require.True(t, ok)
	require.Equal(t, len(frame), f.frameLen())
	require.False(t, f.outgoing)
	require.Equal(t, uint32(5), f.sec)

	f, ok = parseSlot(v2Slot(256, frame, tpStatusVlanValid, 7, packetOutgoing))
	require.True(t, ok)
	require.True(t, f.outgoing)
	dst := make([]byte, f.frameLen())
	f.copyTo(dst, v2Slot(256, frame, tpStatusVlanValid, 7, packetOutgoing))
	require.Equal(t, []byte{0x81, 0x00, 0, 7}, dst[12:16], "the stripped tag is put back")

	bad := v2Slot(256, frame, 0, 0, 0)
	binary.NativeEndian.PutUint32(bad[v2SnapOff:], 250) // runs past the slot
	_, ok = parseSlot(bad)
	require.False(t, ok)
	_, ok = parseSlot(make([]byte, 10))
	require.False(t, ok)
}

// FuzzParseSlot feeds arbitrary bytes to the V2 slot parser: it must
// never panic, and a frame it accepts must lie inside the slot.
func FuzzParseSlot(f *testing.F) {
	f.Add(v2Slot(256, []byte("hello, slot"), 0, 0, 0))
	f.Add(v2Slot(256, []byte("tagged frame here"), tpStatusVlanValid|tpStatusVlanTPValid, 7, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, slot []byte) {
		fr, ok := parseSlot(slot)
		if !ok {
			return
		}
		if fr.data < tpacket2HdrLen && fr.snapLen > 0 || fr.data+fr.snapLen > len(slot) {
			t.Fatalf("data [%d,%d) outside the slot of %d", fr.data, fr.data+fr.snapLen, len(slot))
		}
		dst := make([]byte, fr.frameLen())
		fr.copyTo(dst, slot)
	})
}
