package traffic

import (
	"encoding/binary"
	"net/netip"
)

// Frame layout constants.
const (
	ethLen     = 14
	ipv4Len    = 20
	udpLen     = 8
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

// Addresses of generated traffic: RFC 2544's benchmarking range, the only
// range peregrine ever sends to.
var (
	DefaultSrcIP = netip.MustParseAddr("198.18.0.1")
	DefaultDstIP = netip.MustParseAddr("198.18.0.2")
)

// Stamp is what the sink reads back from a frame.
type Stamp struct {
	Flow uint16 // UDP source port minus BaseSrcPort
	Seq  uint64
	Time int64
}

// writeHeaders fills frame[:HeaderLen] for a frame of len(frame) bytes.
func writeHeaders(frame []byte, src, dst [6]byte, srcIP, dstIP [4]byte, srcPort uint16) {
	_ = frame[HeaderLen-1]
	copy(frame[0:6], dst[:])
	copy(frame[6:12], src[:])
	binary.BigEndian.PutUint16(frame[12:14], 0x0800)
	ip := frame[ethLen : ethLen+ipv4Len]
	ip[0] = 0x45
	ip[1] = 0
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(frame)-ethLen))
	binary.BigEndian.PutUint16(ip[4:6], 0)
	binary.BigEndian.PutUint16(ip[6:8], 0x4000) // don't fragment
	ip[8] = 64
	ip[9] = 17
	ip[10], ip[11] = 0, 0
	copy(ip[12:16], srcIP[:])
	copy(ip[16:20], dstIP[:])
	binary.BigEndian.PutUint16(ip[10:12], ipv4Checksum(ip))
	udp := frame[ethLen+ipv4Len : HeaderLen]
	binary.BigEndian.PutUint16(udp[0:2], srcPort)
	binary.BigEndian.PutUint16(udp[2:4], DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(len(frame)-ethLen-ipv4Len))
	binary.BigEndian.PutUint16(udp[6:8], 0) // no UDP checksum (allowed over IPv4)
}

// headerTemplate is a frame's 42 header bytes built once, for a length of
// zero and UDP source port 0, with the IPv4 header's checksum sum kept
// unfolded: a frame's headers are then one copy and three stores, its
// checksum an addition, instead of writeHeaders' field-by-field build and
// 10-word sum per packet.
type headerTemplate struct {
	bytes [HeaderLen]byte
	sum   uint32 // one's-complement sum of the IPv4 header with length and checksum 0
}

func newHeaderTemplate(src, dst [6]byte, srcIP, dstIP [4]byte) headerTemplate {
	var t headerTemplate
	writeHeaders(t.bytes[:], src, dst, srcIP, dstIP, 0)
	ip := t.bytes[ethLen : ethLen+ipv4Len]
	binary.BigEndian.PutUint16(ip[2:4], 0)
	binary.BigEndian.PutUint16(ip[10:12], 0)
	for i := 0; i < len(ip); i += 2 {
		t.sum += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	return t
}

// write fills frame[:HeaderLen] exactly as writeHeaders would for a frame
// of len(frame) bytes from srcPort.
func (t *headerTemplate) write(frame []byte, srcPort uint16) {
	_ = frame[HeaderLen-1]
	*(*[HeaderLen]byte)(frame) = t.bytes
	ipLen := uint16(len(frame) - ethLen)
	sum := t.sum + uint32(ipLen)
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	binary.BigEndian.PutUint16(frame[ethLen+2:], ipLen)
	binary.BigEndian.PutUint16(frame[ethLen+10:], ^uint16(sum))
	binary.BigEndian.PutUint16(frame[ethLen+ipv4Len:], srcPort)
	binary.BigEndian.PutUint16(frame[ethLen+ipv4Len+4:], ipLen-ipv4Len)
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
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
