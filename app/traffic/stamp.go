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
	Flow uint16 // UDP source port minus BaseSrcPort
	Seq  uint64
	Time int64
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

func writeStamp(frame []byte, seq uint64, t int64) {
	_ = frame[MinFrame-1]
	binary.BigEndian.PutUint16(frame[offMagic:], stampMagic)
	binary.BigEndian.PutUint64(frame[offSeq:], seq)
	binary.BigEndian.PutUint64(frame[offTime:], uint64(t))
}

// ReadStamp decodes the stamp of a generated frame. It reports false for a
// frame too short, not IPv4/UDP, or without the magic number; it never panics.
func ReadStamp(frame []byte) (Stamp, bool) {
	if len(frame) < MinFrame ||
		binary.BigEndian.Uint16(frame[12:14]) != 0x0800 ||
		frame[ethLen]>>4 != 4 || frame[ethLen+9] != 17 ||
		binary.BigEndian.Uint16(frame[offMagic:]) != stampMagic {
		return Stamp{}, false
	}
	srcPort := binary.BigEndian.Uint16(frame[ethLen+ipv4Len:])
	return Stamp{
		Flow: srcPort - BaseSrcPort,
		Seq:  binary.BigEndian.Uint64(frame[offSeq:]),
		Time: int64(binary.BigEndian.Uint64(frame[offTime:])),
	}, true
}
