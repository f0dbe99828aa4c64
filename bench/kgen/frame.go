package kgen

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// Frame size limits of UDPFrame (bytes without the 4-byte FCS, as testpmd's
// --txpkts counts them).
const (
	MinFrameSize = 60 // the shortest Ethernet frame without FCS
	MaxFrameSize = 9014
	headerLen    = wire.EthHeaderLen + wire.IPv4HeaderLen + wire.UDPHeaderLen
)

// FrameOptions describe an Ethernet/IPv4/UDP frame. Zero fields take their
// defaults.
type FrameOptions struct {
	// Size is the frame length without FCS, MinFrameSize..MaxFrameSize.
	// Default 64.
	Size int
	// Dst and Src are the Ethernet addresses (required, 6 bytes each).
	Dst, Src net.HardwareAddr
	// SrcIP and DstIP must lie in 198.18.0.0/15. Defaults wire.BenchmarkSrcIP
	// and wire.BenchmarkDstIP.
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
		opts.SrcIP = wire.BenchmarkSrcIP
	}
	if !opts.DstIP.IsValid() {
		opts.DstIP = wire.BenchmarkDstIP
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
	a := wire.Addrs{
		SrcMAC: [6]byte(opts.Src), DstMAC: [6]byte(opts.Dst),
		SrcIP: opts.SrcIP, DstIP: opts.DstIP,
		SrcPort: opts.SrcPort, DstPort: opts.DstPort,
		NoUDPChecksum: true,
	}
	f := make([]byte, opts.Size)
	if _, err := wire.EncodeUDP(f, &a, opts.Size-headerLen); err != nil {
		return nil, fmt.Errorf("kgen: %w", err)
	}
	return f, nil
}
