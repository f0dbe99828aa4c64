package wire

import (
	"fmt"
	"net/netip"
)

// Lower-layer constants.
const (
	EthHeaderLen  = 14
	IPv4HeaderLen = 20 // without options; Encode never writes options
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8
	// MinFrameLen is the shortest Ethernet frame without FCS; shorter
	// frames are zero-padded by the encoders.
	MinFrameLen = 60

	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	ProtocolUDP   = 17

	// DefaultTTL is the IPv4 TTL / IPv6 hop limit used when Addrs.TTL is 0.
	DefaultTTL = 64

	maxFlowLabel = 1<<20 - 1
)

// BenchmarkSrcIP and BenchmarkDstIP are the addresses generated test
// traffic (app/traffic, bench/kgen) is sent from and to when none are
// given: RFC 2544's benchmarking range 198.18.0.0/15, the only range
// peregrine sends test traffic in (pmd/netns.TestRange). Treat them as
// constants.
var (
	BenchmarkSrcIP = netip.AddrFrom4([4]byte{198, 18, 0, 1})
	BenchmarkDstIP = netip.AddrFrom4([4]byte{198, 18, 0, 2})
)

// HopsFromTTL infers how many IP hops a packet crossed from the TTL (or
// hop limit) it arrived with: senders start from one of a few usual values
// (32, 64, 128, 255; peregrine uses DefaultTTL unless Addrs.TTL says
// otherwise), so the smallest of them at or above ttl is taken as the
// start, as passive fingerprinting tools do. A path longer than the gap to
// the next usual value reads short; datacenter paths are a few hops.
func HopsFromTTL(ttl uint8) uint8 {
	switch {
	case ttl <= 32:
		return 32 - ttl
	case ttl <= 64:
		return 64 - ttl
	case ttl <= 128:
		return 128 - ttl
	default:
		return 255 - ttl
	}
}

// Addrs is everything below the transport header: Ethernet, IP and UDP
// fields. Encoders read it; decoders fill it from the frame.
type Addrs struct {
	SrcMAC, DstMAC [6]byte
	// SrcIP and DstIP are both IPv4 or both IPv6; they choose the IP
	// version of the frame.
	SrcIP, DstIP netip.Addr
	// SrcPort and DstPort are the UDP ports; 0 means DefaultPort. The
	// transport is recognised by its destination port; the source port is
	// free for ECMP entropy.
	SrcPort, DstPort uint16
	// TOS is the IPv4 TOS byte or the IPv6 traffic class: DSCP<<2 | ECN.
	TOS uint8
	// TTL is the IPv4 TTL or IPv6 hop limit; 0 means DefaultTTL.
	TTL uint8
	// FlowLabel is the IPv6 flow label (20 bits); must be 0 for IPv4.
	FlowLabel uint32
	// NoUDPChecksum sends IPv4 datagrams with checksum 0 (none), which
	// saves a pass over the payload. IPv6 always carries a checksum and
	// ignores it (RFC 8200). Decoders set it when an IPv4 checksum is 0.
	NoUDPChecksum bool
}

// IPv6 reports whether the addresses are IPv6.
func (a *Addrs) IPv6() bool { return a.SrcIP.Is6() }

// l3Len validates a and returns the IP header length it encodes to.
func (a *Addrs) l3Len() (int, error) {
	if !a.SrcIP.IsValid() || !a.DstIP.IsValid() {
		return 0, fmt.Errorf("%w: source %v or destination %v is not set", ErrAddr, a.SrcIP, a.DstIP)
	}
	if a.SrcIP.Is4() != a.DstIP.Is4() {
		return 0, fmt.Errorf("%w: source %v and destination %v mix IPv4 and IPv6 (use Unmap or As16 to match them)", ErrAddr, a.SrcIP, a.DstIP)
	}
	if a.SrcIP.Is4() {
		if a.FlowLabel != 0 {
			return 0, fmt.Errorf("%w: flow label %#x on an IPv4 frame", ErrField, a.FlowLabel)
		}
		return IPv4HeaderLen, nil
	}
	if a.FlowLabel > maxFlowLabel {
		return 0, fmt.Errorf("%w: flow label %#x exceeds 20 bits", ErrField, a.FlowLabel)
	}
	return IPv6HeaderLen, nil
}

func portOrDefault(p uint16) uint16 {
	if p == 0 {
		return DefaultPort
	}
	return p
}

// Datagram is a decoded Ethernet/IP/UDP frame: the addresses plus offsets
// and a view of the UDP payload, all pointing into the decoded buffer.
type Datagram struct {
	Addrs
	L3Off   int    // offset of the IP header (EthHeaderLen)
	L4Off   int    // offset of the UDP header
	DataOff int    // offset of the UDP payload
	Len     int    // bytes of the buffer the frame covers (trailing Ethernet padding excluded)
	Data    []byte // the UDP payload, a view into the buffer
}

// DecodeUDP decodes an untagged Ethernet frame carrying IPv4 or IPv6 and
// UDP. It checks the IP version, IHL and lengths, the IPv4 header checksum,
// the UDP length against the IP length, and the UDP checksum (which IPv6
// requires and IPv4 may leave 0). Bytes after the IP packet (Ethernet
// padding) are ignored. It never panics and does not allocate.
func DecodeUDP(b []byte) (Datagram, error) {
	var d Datagram
	if err := d.Decode(b); err != nil {
		return Datagram{}, err
	}
	return d, nil
}

// Decode is DecodeUDP into d. On error d holds garbage.
func (d *Datagram) Decode(b []byte) error {
	*d = Datagram{L3Off: EthHeaderLen}
	if len(b) < EthHeaderLen {
		return ErrShort
	}
	d.DstMAC = [6]byte(b[0:6])
	d.SrcMAC = [6]byte(b[6:12])
	ip := b[EthHeaderLen:]
	var udp []byte
	var v6 bool
	switch be.Uint16(b[12:]) {
	case EtherTypeIPv4:
		if len(ip) < IPv4HeaderLen {
			return ErrShort
		}
		if ip[0]>>4 != 4 {
			return ErrIPHeader
		}
		ihl := int(ip[0]&0xf) * 4
		if ihl < IPv4HeaderLen {
			return ErrIPHeader
		}
		total := int(be.Uint16(ip[2:]))
		if len(ip) < ihl || len(ip) < total {
			return ErrShort
		}
		if total < ihl {
			return ErrLength
		}
		if csumFold(csumAdd(0, ip[:ihl])) != 0xffff {
			return ErrChecksum
		}
		if be.Uint16(ip[6:])&0x3fff != 0 {
			return ErrFragment
		}
		if ip[9] != ProtocolUDP {
			return ErrNotUDP
		}
		d.TOS = ip[1]
		d.TTL = ip[8]
		d.SrcIP = netip.AddrFrom4([4]byte(ip[12:16]))
		d.DstIP = netip.AddrFrom4([4]byte(ip[16:20]))
		d.L4Off = EthHeaderLen + ihl
		d.Len = EthHeaderLen + total
		udp = ip[ihl:total]
		ip = ip[:ihl]
	case EtherTypeIPv6:
		if len(ip) < IPv6HeaderLen {
			return ErrShort
		}
		w := be.Uint32(ip)
		if w>>28 != 6 {
			return ErrIPHeader
		}
		plen := int(be.Uint16(ip[4:]))
		if len(ip) < IPv6HeaderLen+plen {
			return ErrShort
		}
		if ip[6] != ProtocolUDP {
			return ErrNotUDP
		}
		v6 = true
		d.TOS = uint8(w >> 20)
		d.FlowLabel = w & maxFlowLabel
		d.TTL = ip[7]
		d.SrcIP = netip.AddrFrom16([16]byte(ip[8:24]))
		d.DstIP = netip.AddrFrom16([16]byte(ip[24:40]))
		d.L4Off = EthHeaderLen + IPv6HeaderLen
		d.Len = d.L4Off + plen
		udp = ip[IPv6HeaderLen : IPv6HeaderLen+plen]
		ip = ip[:IPv6HeaderLen]
	default:
		return ErrNotIP
	}
	if len(udp) < UDPHeaderLen || int(be.Uint16(udp[4:])) != len(udp) {
		return ErrLength
	}
	if be.Uint16(udp[6:]) == 0 {
		if v6 {
			return ErrChecksum
		}
		d.NoUDPChecksum = true
	} else if !udpChecksumOK(ip, v6, udp) {
		return ErrChecksum
	}
	d.SrcPort = be.Uint16(udp[0:])
	d.DstPort = be.Uint16(udp[2:])
	d.DataOff = d.L4Off + UDPHeaderLen
	d.Data = udp[UDPHeaderLen:]
	return nil
}

// UpdateUDPChecksum recomputes the UDP checksum of the frame d was decoded
// from, after its payload was patched in place (a HeaderView setter on a
// retransmission, say). A datagram without a checksum is left without one.
func (d *Datagram) UpdateUDPChecksum(b []byte) error {
	end := d.DataOff + len(d.Data)
	if d.L4Off < d.L3Off+IPv4HeaderLen || d.DataOff != d.L4Off+UDPHeaderLen || end > len(b) {
		return fmt.Errorf("%w: buffer of %d bytes does not hold the decoded datagram", ErrShort, len(b))
	}
	if d.NoUDPChecksum && !d.IPv6() {
		return nil
	}
	udp := b[d.L4Off:end]
	be.PutUint16(udp[6:], 0)
	be.PutUint16(udp[6:], udpChecksum(b[d.L3Off:d.L4Off], d.IPv6(), udp))
	return nil
}

// putDatagram writes the Ethernet, IP and UDP headers for a UDP payload of
// dataLen bytes that sits (or will sit) at b[off:], where off is returned.
// The UDP checksum is left 0; sealDatagram fills it once the payload is in
// place. It returns the frame length before padding.
func putDatagram(b []byte, a *Addrs, l3len, dataLen int) (off, end int, err error) {
	udpLen := UDPHeaderLen + dataLen
	if udpLen > 0xffff || (l3len == IPv4HeaderLen && l3len+udpLen > 0xffff) {
		return 0, 0, fmt.Errorf("%w: UDP payload of %d bytes does not fit an IP packet", ErrField, dataLen)
	}
	l4 := EthHeaderLen + l3len
	off = l4 + UDPHeaderLen
	end = off + dataLen
	if len(b) < end {
		return 0, 0, fmt.Errorf("%w: frame needs %d bytes, buffer has %d", ErrShort, end, len(b))
	}
	ttl := a.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	copy(b[0:6], a.DstMAC[:])
	copy(b[6:12], a.SrcMAC[:])
	ip := b[EthHeaderLen:l4]
	if l3len == IPv4HeaderLen {
		be.PutUint16(b[12:], EtherTypeIPv4)
		ip[0] = 0x45
		ip[1] = a.TOS
		be.PutUint16(ip[2:], uint16(l3len+udpLen))
		be.PutUint16(ip[4:], 0)      // ID: unused, DF is set (RFC 6864)
		be.PutUint16(ip[6:], 0x4000) // DF, offset 0
		ip[8] = ttl
		ip[9] = ProtocolUDP
		be.PutUint16(ip[10:], 0)
		s, d := a.SrcIP.As4(), a.DstIP.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		be.PutUint16(ip[10:], IPv4HeaderChecksum(ip))
	} else {
		be.PutUint16(b[12:], EtherTypeIPv6)
		be.PutUint32(ip[0:], 6<<28|uint32(a.TOS)<<20|a.FlowLabel)
		be.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = ProtocolUDP
		ip[7] = ttl
		s, d := a.SrcIP.As16(), a.DstIP.As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
	}
	udp := b[l4:off]
	be.PutUint16(udp[0:], portOrDefault(a.SrcPort))
	be.PutUint16(udp[2:], portOrDefault(a.DstPort))
	be.PutUint16(udp[4:], uint16(udpLen))
	be.PutUint16(udp[6:], 0)
	return off, end, nil
}

// sealDatagram fills the UDP checksum (unless IPv4 with NoUDPChecksum) and
// pads the frame to MinFrameLen; it returns the final frame length.
func sealDatagram(b []byte, a *Addrs, l3len, end int) (int, error) {
	v6 := l3len == IPv6HeaderLen
	if v6 || !a.NoUDPChecksum {
		l4 := EthHeaderLen + l3len
		be.PutUint16(b[l4+6:], udpChecksum(b[EthHeaderLen:l4], v6, b[l4:end]))
	}
	if end < MinFrameLen {
		if len(b) < MinFrameLen {
			return 0, fmt.Errorf("%w: a padded frame needs %d bytes, buffer has %d", ErrShort, MinFrameLen, len(b))
		}
		clear(b[end:MinFrameLen])
		end = MinFrameLen
	}
	return end, nil
}

// DatagramOverhead returns the bytes in front of the UDP payload in a
// frame built from a: Ethernet, IP and UDP headers.
func DatagramOverhead(a *Addrs) (int, error) {
	l3len, err := a.l3Len()
	if err != nil {
		return 0, err
	}
	return EthHeaderLen + l3len + UDPHeaderLen, nil
}

// EncodeUDP builds the Ethernet, IP and UDP headers of a plain UDP frame
// (no transport header) in front of a dataLen-byte payload that the caller
// already placed at b[DatagramOverhead(a):], checksums the payload where it
// lies (unless a.NoUDPChecksum on IPv4), pads to MinFrameLen and returns
// the frame length. It is the frame builder of the generators: for frames
// sent many times with only the length and source port changing, build a
// FrameTemplate and use its PutUDP. It does not allocate.
func EncodeUDP(b []byte, a *Addrs, dataLen int) (int, error) {
	l3len, err := a.l3Len()
	if err != nil {
		return 0, err
	}
	if dataLen < 0 {
		return 0, fmt.Errorf("%w: UDP payload length %d is negative", ErrField, dataLen)
	}
	_, end, err := putDatagram(b, a, l3len, dataLen)
	if err != nil {
		return 0, err
	}
	return sealDatagram(b, a, l3len, end)
}

// Frame is a decoded transport frame: the datagram below, the transport
// header and a view of the payload. Offsets and views point into the
// decoded buffer, which the caller keeps owning.
type Frame struct {
	Datagram
	HeaderLen  int // transport header length: base, body and extensions
	PayloadOff int // offset of the payload in the buffer
	Header     Header
	Payload    []byte // a view into the buffer, Header.PayloadLen bytes
}

// FrameOverhead returns the bytes in front of the payload in a frame built
// from a and h, so that a caller can place the payload at that offset and
// call EncodeFrameHeaders without a copy.
func FrameOverhead(a *Addrs, h *Header) (int, error) {
	l3len, err := a.l3Len()
	if err != nil {
		return 0, err
	}
	return EthHeaderLen + l3len + UDPHeaderLen + h.Len(), nil
}

// EncodeFrame builds Ethernet/IP/UDP/transport header/payload into b and
// returns the frame length. It copies payload to its place (the copy is a
// no-op move if the payload already sits at FrameOverhead in b) and sets the
// header's payload length from len(payload), ignoring h.PayloadLen. The
// IPv4 header checksum is always computed, the UDP checksum unless
// a.NoUDPChecksum on IPv4. It does not allocate.
func EncodeFrame(b []byte, a *Addrs, h *Header, payload []byte) (int, error) {
	off, err := FrameOverhead(a, h)
	if err != nil {
		return 0, err
	}
	if len(b) < off+len(payload) {
		return 0, fmt.Errorf("%w: frame needs %d bytes, buffer has %d", ErrShort, off+len(payload), len(b))
	}
	copy(b[off:], payload)
	return EncodeFrameHeaders(b, a, h, len(payload))
}

// EncodeFrameHeaders is EncodeFrame for a payload of payloadLen bytes that
// the caller already placed at b[FrameOverhead(a, h):]: it writes the
// headers in front and checksums the payload where it lies.
func EncodeFrameHeaders(b []byte, a *Addrs, h *Header, payloadLen int) (int, error) {
	if err := h.Validate(); err != nil {
		return 0, err
	}
	if payloadLen < 0 || payloadLen > 0xffff {
		return 0, fmt.Errorf("%w: payload length %d does not fit 16 bits", ErrField, payloadLen)
	}
	l3len, err := a.l3Len()
	if err != nil {
		return 0, err
	}
	hl := h.Len()
	off, end, err := putDatagram(b, a, l3len, hl+payloadLen)
	if err != nil {
		return 0, err
	}
	h.put(b[off:off+hl], uint16(payloadLen))
	return sealDatagram(b, a, l3len, end)
}

// DecodeFrame decodes a transport frame: DecodeUDP, then DecodeHeader on
// the UDP payload, which must hold exactly the header and its payload. It
// accepts any UDP port (the classifier in front of it chose the frame by
// DstPort). It never panics and does not allocate; the Frame is zero on
// error.
func DecodeFrame(b []byte) (Frame, error) {
	var f Frame
	if err := f.Decode(b); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// Decode is DecodeFrame into f. On error f holds garbage.
func (f *Frame) Decode(b []byte) error {
	if err := f.Datagram.Decode(b); err != nil {
		return err
	}
	n, err := f.Header.Decode(f.Data)
	if err != nil {
		return err
	}
	f.HeaderLen = n
	f.PayloadOff = f.DataOff + n
	f.Payload = f.Data[n:]
	return nil
}

// L4Offset finds the UDP header of an untagged Ethernet/IPv4 or IPv6/UDP
// frame without validating the rest: the cheap first step of a receive
// classifier (then PeekCID). ok is false for anything else or a frame too
// short to hold a UDP header.
func L4Offset(b []byte) (off int, ok bool) {
	if len(b) < EthHeaderLen+IPv4HeaderLen+UDPHeaderLen {
		return 0, false
	}
	switch be.Uint16(b[12:]) {
	case EtherTypeIPv4:
		ip := b[EthHeaderLen:]
		ihl := int(ip[0]&0xf) * 4
		if ip[0]>>4 != 4 || ihl < IPv4HeaderLen || ip[9] != ProtocolUDP || len(ip) < ihl+UDPHeaderLen {
			return 0, false
		}
		return EthHeaderLen + ihl, true
	case EtherTypeIPv6:
		if len(b) < EthHeaderLen+IPv6HeaderLen+UDPHeaderLen || b[EthHeaderLen]>>4 != 6 || b[EthHeaderLen+6] != ProtocolUDP {
			return 0, false
		}
		return EthHeaderLen + IPv6HeaderLen, true
	}
	return 0, false
}

// PeekCID reads the destination CID from the first word of the transport
// header that follows the UDP header at b[l4off:], checking only the
// version: the receiver finds the connection (and the core that owns it)
// before decoding anything else.
func PeekCID(b []byte, l4off int) (cid uint32, ok bool) {
	if l4off < 0 || l4off > len(b)-UDPHeaderLen-4 {
		return 0, false
	}
	w := be.Uint32(b[l4off+UDPHeaderLen:])
	if w>>28 != Version {
		return 0, false
	}
	return w & MaxCID, true
}
