package traffic

import (
	"encoding/binary"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Frame layout constants.
const (
	ethLen     = wire.EthHeaderLen
	ipv4Len    = wire.IPv4HeaderLen
	udpLen     = wire.UDPHeaderLen
	HeaderLen  = ethLen + ipv4Len + udpLen // 42
	stampMagic = 0x5047
	StampLen   = 2 + 8 + 8
	// MinFrame is the smallest frame that carries a full stamp.
	MinFrame = HeaderLen + StampLen // 60
	// MaxFrame is the largest frame the generator builds (a 9000-byte MTU).
	MaxFrame = 9000 + ethLen

	offMagic = HeaderLen
	offSeq   = HeaderLen + 2
	offTime  = HeaderLen + 10

	// BaseSrcPort is the UDP source port of flow 0; flow i uses BaseSrcPort+i.
	BaseSrcPort = 10000
	// DstPort is the UDP destination port of generated traffic.
	DstPort = 9
)

// Stamp is what the sink reads back from a frame.
type Stamp struct {
	Flow    uint16 // UDP source port minus BaseSrcPort
	SrcPort uint16 // the UDP source port
	Seq     uint64
	Time    int64
}

// newHeaderTemplate builds the headers of every frame of a generator,
// from src to dst (addresses wire.BenchmarkSrcIP to BenchmarkDstIP, port
// DstPort, no UDP checksum: IPv4 allows it): a frame's headers are then
// FrameTemplate.PutUDP, one copy and a few stores with the IPv4 checksum
// finished from a sum taken once.
func newHeaderTemplate(src, dst [6]byte) (wire.FrameTemplate, error) {
	return wire.NewFrameTemplate(&wire.Addrs{
		SrcMAC: src, DstMAC: dst,
		SrcIP: wire.BenchmarkSrcIP, DstIP: wire.BenchmarkDstIP,
		SrcPort: BaseSrcPort, DstPort: DstPort,
		NoUDPChecksum: true,
	})
}

func writeStamp(frame []byte, seq uint64, t int64) { writeStampAt(frame, HeaderLen, seq, t) }

// writeStampAt writes the stamp at the UDP payload's offset off.
func writeStampAt(frame []byte, off int, seq uint64, t int64) {
	_ = frame[off+StampLen-1]
	binary.BigEndian.PutUint16(frame[off:], stampMagic)
	binary.BigEndian.PutUint64(frame[off+2:], seq)
	binary.BigEndian.PutUint64(frame[off+10:], uint64(t))
}

// ReadStamp decodes the stamp of a generated frame: Ethernet, an 802.1Q
// tag or none, IPv4 or IPv6, UDP. It reports false for a frame too short,
// of another kind, or without the magic number; it never panics and does
// not allocate.
func ReadStamp(frame []byte) (Stamp, bool) {
	if len(frame) < MinFrame {
		return Stamp{}, false
	}
	l3, et := ethLen, binary.BigEndian.Uint16(frame[12:14])
	if et == 0x8100 {
		l3, et = ethLen+4, binary.BigEndian.Uint16(frame[16:18])
	}
	var l4 int
	switch {
	case et == 0x0800 && len(frame) >= l3+ipv4Len && frame[l3]>>4 == 4 && frame[l3+9] == 17:
		l4 = l3 + int(frame[l3]&0xf)*4
	case et == 0x86dd && len(frame) >= l3+40 && frame[l3]>>4 == 6 && frame[l3+6] == 17:
		l4 = l3 + 40
	default:
		return Stamp{}, false
	}
	off := l4 + udpLen
	if len(frame) < off+StampLen || binary.BigEndian.Uint16(frame[off:]) != stampMagic {
		return Stamp{}, false
	}
	srcPort := binary.BigEndian.Uint16(frame[l4:])
	return Stamp{
		Flow:    srcPort - BaseSrcPort,
		SrcPort: srcPort,
		Seq:     binary.BigEndian.Uint64(frame[off+2:]),
		Time:    int64(binary.BigEndian.Uint64(frame[off+10:])),
	}, true
}
