package traffic

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Addressing is what a generator's frames carry beyond the defaults
// (198.18.0.1:10000+flow → 198.18.0.2:9, untagged), as pktgen's range
// commands set it: each range is walked one step per frame, wrapping.
type Addressing struct {
	// SrcIP and DstIP are both IPv4 or both IPv6 (the zero range: the
	// default address).
	SrcIP, DstIP IPRange
	// SrcPort is flow 0's UDP source port; flow i sends from SrcPort+i
	// (0: BaseSrcPort). The sink must be given the same.
	SrcPort uint16
	// DstPort is the UDP destination port range (zero: DstPort).
	DstPort PortRange
	// VLAN, when not 0, tags every frame with this 802.1Q VLAN ID.
	VLAN uint16
}

// IPRange is the addresses Lo..Hi, one family, Lo <= Hi.
type IPRange struct{ Lo, Hi netip.Addr }

// PortRange is the ports Lo..Hi.
type PortRange struct{ Lo, Hi uint16 }

// ParseIPRange reads "198.18.0.1", "198.18.0.1-198.18.0.200" or the same
// in IPv6. A range spans at most 2^32 addresses.
func ParseIPRange(s string) (IPRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := netip.ParseAddr(strings.TrimSpace(lo))
	if err != nil {
		return IPRange{}, fmt.Errorf("%q is not an IP address or range (e.g. 198.18.0.1-198.18.0.200, 2001:db8::1)", s)
	}
	b := a
	if isRange {
		if b, err = netip.ParseAddr(strings.TrimSpace(hi)); err != nil || b.Is4() != a.Is4() || b.Less(a) {
			return IPRange{}, fmt.Errorf("%q: give LOW-HIGH of one family, low first (e.g. 198.18.0.1-198.18.0.200)", s)
		}
	}
	r := IPRange{a.Unmap(), b.Unmap()}
	if r.span() == 0 {
		return IPRange{}, fmt.Errorf("%q spans more than 2^32 addresses", s)
	}
	return r, nil
}

// span is the number of addresses (0: more than 2^32).
func (r IPRange) span() uint64 {
	lo, hi := r.Lo.As16(), r.Hi.As16()
	if [12]byte(lo[:12]) != [12]byte(hi[:12]) {
		return 0
	}
	return uint64(binary.BigEndian.Uint32(hi[12:])-binary.BigEndian.Uint32(lo[12:])) + 1
}

// ParsePortRange reads "9" or "1000-1099".
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	b := a
	if err == nil && isRange {
		b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
	}
	if err != nil || a == 0 || b < a {
		return PortRange{}, fmt.Errorf("%q is not a UDP port or range (1..65535, e.g. 9 or 1000-1099)", s)
	}
	return PortRange{uint16(a), uint16(b)}, nil
}

// addrs fills the template's addresses from the first of each range.
func (a *Addressing) addrs(src, dst [6]byte) wire.Addrs {
	w := wire.Addrs{SrcMAC: src, DstMAC: dst, SrcIP: wire.BenchmarkSrcIP, DstIP: wire.BenchmarkDstIP,
		SrcPort: BaseSrcPort, DstPort: DstPort, NoUDPChecksum: true}
	if a.SrcIP.Lo.IsValid() {
		w.SrcIP = a.SrcIP.Lo
	}
	if a.DstIP.Lo.IsValid() {
		w.DstIP = a.DstIP.Lo
	}
	if a.DstPort.Lo != 0 {
		w.DstPort = a.DstPort.Lo
	}
	return w
}

// MinFrame is the smallest frame a generator with these headers can
// send: Ethernet (with the VLAN tag when there is one), IPv4 or IPv6, UDP
// and the stamp. A nil Addressing is the defaults' (MinFrame).
func (a *Addressing) MinFrame() int {
	if a == nil {
		return MinFrame
	}
	n := ethLen + ipv4Len + udpLen + StampLen
	if a.VLAN != 0 {
		n += 4
	}
	if a.SrcIP.Lo.Is6() || a.DstIP.Lo.Is6() {
		n += wire.IPv6HeaderLen - ipv4Len
	}
	return n
}

func (a *Addressing) check() error {
	if a.SrcIP.Lo.IsValid() && a.DstIP.Lo.IsValid() && a.SrcIP.Lo.Is4() != a.DstIP.Lo.Is4() {
		return fmt.Errorf("source %v and destination %v are not of one IP family", a.SrcIP.Lo, a.DstIP.Lo)
	}
	v6 := a.SrcIP.Lo.Is6() || a.DstIP.Lo.Is6()
	if v6 && (!a.SrcIP.Lo.IsValid() || !a.DstIP.Lo.IsValid()) {
		return fmt.Errorf("IPv6 needs both a source and a destination address")
	}
	if a.VLAN > 4094 {
		return fmt.Errorf("VLAN ID %d is out of range (1..4094)", a.VLAN)
	}
	return nil
}

// walker steps a generator's ranges, one step per frame.
type walker struct {
	srcSpan, dstSpan uint64
	portSpan         uint32
	src, dst         uint64
	port             uint32
	srcLo, dstLo     uint32 // the ranges' low 32 bits
	portLo           uint16
	on               bool
}

func newWalker(a *Addressing, t *wire.Addrs) walker {
	w := walker{srcSpan: 1, dstSpan: 1, portSpan: 1}
	if a.SrcIP.Lo.IsValid() {
		w.srcSpan = a.SrcIP.span()
	}
	if a.DstIP.Lo.IsValid() {
		w.dstSpan = a.DstIP.span()
	}
	if a.DstPort.Lo != 0 {
		w.portSpan = uint32(a.DstPort.Hi-a.DstPort.Lo) + 1
	}
	s, d := t.SrcIP.As16(), t.DstIP.As16()
	w.srcLo, w.dstLo, w.portLo = binary.BigEndian.Uint32(s[12:]), binary.BigEndian.Uint32(d[12:]), t.DstPort
	w.on = w.srcSpan > 1 || w.dstSpan > 1 || w.portSpan > 1
	return w
}

// apply writes this frame's addresses and port into the frame built by
// the template (l3 at off, IPv4 or IPv6), fixes the checksums they
// change, and steps the ranges.
func (w *walker) apply(b []byte, l3 int, v6 bool) {
	src, dst := w.srcLo+uint32(w.src), w.dstLo+uint32(w.dst)
	port := w.portLo + uint16(w.port)
	if v6 {
		// Only the addresses' low 32 bits and the port change: the
		// template's UDP checksum is updated for those words (RFC 1624)
		// rather than summed again over the payload.
		l4 := l3 + wire.IPv6HeaderLen
		ck := binary.BigEndian.Uint16(b[l4+6:])
		put := func(off int, v uint16) {
			ck = wire.UpdateChecksum(ck, binary.BigEndian.Uint16(b[off:]), v)
			binary.BigEndian.PutUint16(b[off:], v)
		}
		put(l3+20, uint16(src>>16))
		put(l3+22, uint16(src))
		put(l3+36, uint16(dst>>16))
		put(l3+38, uint16(dst))
		put(l4+2, port)
		if ck == 0 {
			ck = 0xffff
		}
		binary.BigEndian.PutUint16(b[l4+6:], ck)
	} else {
		binary.BigEndian.PutUint32(b[l3+12:], src)
		binary.BigEndian.PutUint32(b[l3+16:], dst)
		binary.BigEndian.PutUint16(b[l3+wire.IPv4HeaderLen+2:], port)
		binary.BigEndian.PutUint16(b[l3+10:], 0)
		binary.BigEndian.PutUint16(b[l3+10:], wire.IPv4HeaderChecksum(b[l3:l3+wire.IPv4HeaderLen]))
	}
	if w.src++; w.src == w.srcSpan {
		w.src = 0
	}
	if w.dst++; w.dst == w.dstSpan {
		w.dst = 0
	}
	if w.port++; w.port == w.portSpan {
		w.port = 0
	}
}

// tagVLAN turns the untagged frame the template wrote at b[4:] into one
// tagged with vid at b[0:].
func tagVLAN(b []byte, vid uint16) {
	copy(b[0:12], b[4:16])
	binary.BigEndian.PutUint16(b[12:], 0x8100)
	binary.BigEndian.PutUint16(b[14:], vid&0x0fff)
}
