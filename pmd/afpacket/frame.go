package afpacket

import "encoding/binary"

// Layout of the TPACKET_V3 structures in a ring (linux/if_packet.h), all in
// host byte order except where noted.
const (
	// struct tpacket_block_desc: version, offset_to_priv, then
	// tpacket_hdr_v1.
	blockStatusOff = 8  // block_status u32
	blockNumOff    = 12 // num_pkts u32
	blockFirstOff  = 16 // offset_to_first_pkt u32
	blockHeaderLen = 48

	// struct tpacket3_hdr.
	hdrNextOff    = 0  // tp_next_offset u32
	hdrSecOff     = 4  // tp_sec u32
	hdrNsecOff    = 8  // tp_nsec u32
	hdrSnapOff    = 12 // tp_snaplen u32
	hdrLenOff     = 16 // tp_len u32
	hdrStatusOff  = 20 // tp_status u32
	hdrMacOff     = 24 // tp_mac u16
	hdrVlanTCIOff = 32 // hv1.tp_vlan_tci u32
	hdrVlanTPOff  = 36 // hv1.tp_vlan_tpid u16
	// tpacket3HdrLen is TPACKET_ALIGN(sizeof(struct tpacket3_hdr)): where a
	// struct sockaddr_ll follows the header in a received frame, and where
	// a transmit slot's virtio-net header starts (the frame follows it).
	tpacket3HdrLen = 48
	sllPkttypeOff  = tpacket3HdrLen + 10 // sockaddr_ll.sll_pkttype u8

	packetOutgoing = 4 // PACKET_OUTGOING

	tpStatusUser        = 1 << 0
	tpStatusVlanValid   = 1 << 4
	tpStatusVlanTPValid = 1 << 6

	vlanTagLen    = 4
	etherAddrs    = 12 // destination and source MAC
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
)

// rxFrame is one frame of a receive block, as parseFrame found it.
type rxFrame struct {
	next    int // offset of the following frame from this one, 0 if none
	data    int // offset of the frame's first byte in the block
	snapLen int // bytes present in the ring
	wireLen int // bytes the frame had on the wire
	sec     uint32
	nsec    uint32
	// vlan holds the tag (TPID<<16 | TCI) the kernel stripped into the
	// header, or 0 when the frame's bytes are complete as they are.
	vlan     uint32
	outgoing bool
}

// blockFrames reads a block descriptor: how many frames the block holds and
// where the first is. ok is false when the descriptor is inconsistent with
// the block's size.
func blockFrames(block []byte) (count, first int, ok bool) {
	if len(block) < blockHeaderLen {
		return 0, 0, false
	}
	n := binary.NativeEndian.Uint32(block[blockNumOff:])
	off := binary.NativeEndian.Uint32(block[blockFirstOff:])
	if n == 0 {
		return 0, 0, true
	}
	// Each frame takes at least a header, so n is bounded by the block.
	if uint64(n)*tpacket3HdrLen > uint64(len(block)) || off < blockHeaderLen || uint64(off)+tpacket3HdrLen > uint64(len(block)) {
		return 0, 0, false
	}
	return int(n), int(off), true
}

// parseFrame reads the frame whose header starts at off in block. ok is
// false when the header or the data it describes lie outside the block, so
// a corrupted ring can never make the driver read out of bounds.
func parseFrame(block []byte, off int) (f rxFrame, ok bool) {
	if off < 0 || off > len(block)-tpacket3HdrLen {
		return rxFrame{}, false
	}
	h := block[off : off+tpacket3HdrLen]
	next := binary.NativeEndian.Uint32(h[hdrNextOff:])
	snap := binary.NativeEndian.Uint32(h[hdrSnapOff:])
	mac := uint32(binary.NativeEndian.Uint16(h[hdrMacOff:]))
	rest := uint64(len(block) - off)
	if uint64(mac)+uint64(snap) > rest || (mac < tpacket3HdrLen && snap > 0) {
		return rxFrame{}, false
	}
	if next != 0 && (uint64(next) < tpacket3HdrLen || uint64(next)+tpacket3HdrLen > rest) {
		return rxFrame{}, false
	}
	f = rxFrame{
		next:    int(next),
		data:    off + int(mac),
		snapLen: int(snap),
		wireLen: int(binary.NativeEndian.Uint32(h[hdrLenOff:])),
		sec:     binary.NativeEndian.Uint32(h[hdrSecOff:]),
		nsec:    binary.NativeEndian.Uint32(h[hdrNsecOff:]),
	}
	status := binary.NativeEndian.Uint32(h[hdrStatusOff:])
	if status&tpStatusVlanValid != 0 && snap >= etherAddrs {
		tci := binary.NativeEndian.Uint32(h[hdrVlanTCIOff:]) & 0xffff
		tpid := uint32(etherTypeVLAN)
		if status&tpStatusVlanTPValid != 0 {
			tpid = uint32(binary.NativeEndian.Uint16(h[hdrVlanTPOff:]))
		}
		f.vlan = tpid<<16 | tci
	}
	if mac > sllPkttypeOff { // the sockaddr_ll sits between header and data
		f.outgoing = block[off+sllPkttypeOff] == packetOutgoing
	}
	return f, true
}

// frameLen is the length the frame has in an mbuf: what the ring holds
// plus a re-inserted VLAN tag.
func (f *rxFrame) frameLen() int {
	if f.vlan != 0 {
		return f.snapLen + vlanTagLen
	}
	return f.snapLen
}

// copyTo writes the frame into dst, which holds frameLen() bytes,
// re-inserting the VLAN tag the kernel stripped so that the mbuf carries
// the frame as it was on the wire.
func (f *rxFrame) copyTo(dst, block []byte) {
	src := block[f.data : f.data+f.snapLen]
	if f.vlan == 0 || len(src) < etherAddrs {
		copy(dst, src)
		return
	}
	copy(dst[:etherAddrs], src[:etherAddrs])
	binary.BigEndian.PutUint32(dst[etherAddrs:], f.vlan)
	copy(dst[etherAddrs+vlanTagLen:], src[etherAddrs:])
}

// Layout of struct tpacket2_hdr, at the start of every slot of a V2 ring.
const (
	v2StatusOff  = 0  // tp_status u32
	v2LenOff     = 4  // tp_len u32
	v2SnapOff    = 8  // tp_snaplen u32
	v2MacOff     = 12 // tp_mac u16
	v2SecOff     = 16 // tp_sec u32
	v2NsecOff    = 20 // tp_nsec u32
	v2VlanTCIOff = 24 // tp_vlan_tci u16
	v2VlanTPOff  = 26 // tp_vlan_tpid u16
	// tpacket2HdrLen is TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): where
	// the sockaddr_ll of a received frame starts, and where a transmit
	// slot's virtio-net header starts.
	tpacket2HdrLen  = 32
	v2PkttypeOff    = tpacket2HdrLen + 10
	tpStatusKernel  = 0
	txStatusPending = 1 | 2 // TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING
)

// parseSlot reads the frame in a V2 receive slot whose status says the
// kernel handed it over. ok is false when the header describes data
// outside the slot, so a corrupted ring never makes the driver read out
// of bounds.
func parseSlot(slot []byte) (f rxFrame, ok bool) {
	if len(slot) < tpacket2HdrLen {
		return rxFrame{}, false
	}
	snap := binary.NativeEndian.Uint32(slot[v2SnapOff:])
	mac := uint32(binary.NativeEndian.Uint16(slot[v2MacOff:]))
	if uint64(mac)+uint64(snap) > uint64(len(slot)) || (mac < tpacket2HdrLen && snap > 0) {
		return rxFrame{}, false
	}
	f = rxFrame{
		data:    int(mac),
		snapLen: int(snap),
		wireLen: int(binary.NativeEndian.Uint32(slot[v2LenOff:])),
		sec:     binary.NativeEndian.Uint32(slot[v2SecOff:]),
		nsec:    binary.NativeEndian.Uint32(slot[v2NsecOff:]),
	}
	status := binary.NativeEndian.Uint32(slot[v2StatusOff:])
	if status&tpStatusVlanValid != 0 && snap >= etherAddrs {
		tci := uint32(binary.NativeEndian.Uint16(slot[v2VlanTCIOff:]))
		tpid := uint32(etherTypeVLAN)
		if status&tpStatusVlanTPValid != 0 {
			tpid = uint32(binary.NativeEndian.Uint16(slot[v2VlanTPOff:]))
		}
		f.vlan = tpid<<16 | tci
	}
	if mac > v2PkttypeOff {
		f.outgoing = slot[v2PkttypeOff] == packetOutgoing
	}
	return f, true
}
