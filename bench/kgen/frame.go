package kgen

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// Frame size limits of UDPFrame (bytes without the 4-byte FCS, as testpmd's
// --txpkts counts them).
const (
	MinFrameSize = 60 // the shortest Ethernet frame without FCS
	MaxFrameSize = 9014
	headerLen    = 14 + 20 + 8
)

// Default addresses of UDPFrame: RFC 2544's benchmarking range.
var (
	DefaultSrcIP = netip.AddrFrom4([4]byte{198, 18, 0, 1})
	DefaultDstIP = netip.AddrFrom4([4]byte{198, 18, 0, 2})
)

// FrameOptions describe an Ethernet/IPv4/UDP frame. Zero fields take their
// defaults.
type FrameOptions struct {
	// Size is the frame length without FCS, MinFrameSize..MaxFrameSize.
	// Default 64.
	Size int
	// Dst and Src are the Ethernet addresses (required, 6 bytes each).
	Dst, Src net.HardwareAddr
	// SrcIP and DstIP must lie in 198.18.0.0/15. Defaults DefaultSrcIP and
	// DefaultDstIP.
	SrcIP, DstIP netip.Addr
	// SrcPort and DstPort are the UDP ports. Default 9 (discard) each.
	SrcPort, DstPort uint16
}

// UDPFrame builds the frame opts describe: a valid IPv4 header checksum, no
// UDP checksum (allowed over IPv4), a zero payload.
func UDPFrame(opts FrameOptions) ([]byte, error) {
	if opts.Size == 0 {
		opts.Size = 64
	}
	if opts.Size < MinFrameSize || opts.Size > MaxFrameSize {
		return nil, fmt.Errorf("kgen: FrameOptions.Size %d is out of range (use %d..%d bytes without FCS, e.g. 64)", opts.Size, MinFrameSize, MaxFrameSize)
	}
	for _, m := range []struct {
		field string
		mac   net.HardwareAddr
	}{{"Dst", opts.Dst}, {"Src", opts.Src}} {
		if len(m.mac) != 6 {
			return nil, fmt.Errorf("kgen: FrameOptions.%s %q is not a 6-byte Ethernet address (e.g. 02:00:00:00:00:01)", m.field, m.mac)
		}
	}
	if !opts.SrcIP.IsValid() {
		opts.SrcIP = DefaultSrcIP
	}
	if !opts.DstIP.IsValid() {
		opts.DstIP = DefaultDstIP
	}
	for _, a := range []struct {
		field string
		addr  netip.Addr
	}{{"SrcIP", opts.SrcIP}, {"DstIP", opts.DstIP}} {
		if !a.addr.Is4() {
			return nil, fmt.Errorf("kgen: FrameOptions.%s %v is not an IPv4 address (use one in 198.18.0.0/15)", a.field, a.addr)
		}
		if err := netns.CheckTestPrefix(netip.PrefixFrom(a.addr, 32)); err != nil {
			return nil, fmt.Errorf("kgen: FrameOptions.%s: %w", a.field, err)
		}
	}
	if opts.SrcPort == 0 {
		opts.SrcPort = 9
	}
	if opts.DstPort == 0 {
		opts.DstPort = 9
	}
	f := make([]byte, opts.Size)
	copy(f[0:6], opts.Dst)
	copy(f[6:12], opts.Src)
	binary.BigEndian.PutUint16(f[12:14], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(opts.Size-14))
	binary.BigEndian.PutUint16(ip[6:8], 0x4000) // don't fragment
	ip[8] = 64
	ip[9] = 17 // UDP
	src, dst := opts.SrcIP.As4(), opts.DstIP.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:12], ipv4Checksum(ip))
	udp := f[34:headerLen]
	binary.BigEndian.PutUint16(udp[0:2], opts.SrcPort)
	binary.BigEndian.PutUint16(udp[2:4], opts.DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(opts.Size-34))
	return f, nil
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
