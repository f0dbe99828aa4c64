package config

import (
	"fmt"
	"net"

	"github.com/peregrine-net/peregrine/app/traffic"
)

// Addresses are a generator's headers as written — the gen command's
// --src-mac, --dst-mac, --src-ip, --dst-ip, --src-port, --dst-port and
// --vlan, a generator stage's src_mac … vlan — before CheckAddresses reads
// them. An empty string, or a zero SrcPort, is the default.
type Addresses struct {
	SrcMAC, DstMAC, SrcIP, DstIP, DstPort string
	SrcPort, VLAN                         int
}

// The defaults of Addresses: 198.18.0.1:10000+flow → 198.18.0.2:9
// between two locally administered MACs, untagged.
const (
	DefaultSrcMAC  = "02:00:00:00:00:01"
	DefaultDstMAC  = "02:00:00:00:00:02"
	DefaultSrcIP   = "198.18.0.1"
	DefaultDstIP   = "198.18.0.2"
	DefaultDstPort = "9"
)

// CheckAddresses reads a for a generator of flows flows: the MACs, the
// IP ranges (both IPv4 or both IPv6), the destination port range, flow
// 0's source port (every flow's must fit under 65536) and the VLAN ID.
// Each problem goes to report with its key (src_mac; the flag is the same
// in kebab case, --src-mac) and an error that starts with the value, as
// the value rules' do; name spells another key as the caller's user
// writes it (--flows, flows), for a problem between two. What did not
// read is left at its default in the result.
func CheckAddresses(a Addresses, flows int, name func(key string) string, report func(key string, err error)) (addr *traffic.Addressing, srcMAC, dstMAC net.HardwareAddr) {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	mac := func(key, s, def string) net.HardwareAddr {
		s = or(s, def)
		m, err := net.ParseMAC(s)
		if err != nil || len(m) != 6 {
			report(key, fmt.Errorf("%q: give an Ethernet address, e.g. %s", s, def))
			m, _ = net.ParseMAC(def)
		}
		return m
	}
	srcMAC, dstMAC = mac("src_mac", a.SrcMAC, DefaultSrcMAC), mac("dst_mac", a.DstMAC, DefaultDstMAC)
	addr = &traffic.Addressing{SrcPort: traffic.BaseSrcPort}
	ip := func(key, s, def string) (traffic.IPRange, bool) {
		r, err := traffic.ParseIPRange(or(s, def))
		if err != nil {
			report(key, err)
			r, _ = traffic.ParseIPRange(def)
			return r, false
		}
		return r, true
	}
	src, srcOK := ip("src_ip", a.SrcIP, DefaultSrcIP)
	dst, dstOK := ip("dst_ip", a.DstIP, DefaultDstIP)
	switch {
	case srcOK && dstOK && src.Lo.Is4() != dst.Lo.Is4():
		report("src_ip", fmt.Errorf("%s and %s %s: give both IPv4 or both IPv6", or(a.SrcIP, DefaultSrcIP), name("dst_ip"), or(a.DstIP, DefaultDstIP)))
	case srcOK && dstOK:
		addr.SrcIP, addr.DstIP = src, dst
	}
	dport := or(a.DstPort, DefaultDstPort)
	if r, err := traffic.ParsePortRange(dport); err != nil {
		report("dst_port", err)
	} else {
		addr.DstPort = r
	}
	if a.SrcPort != 0 {
		if a.SrcPort < 1 || a.SrcPort+max(flows, 1)-1 > 65535 {
			report("src_port", fmt.Errorf("%d: give 1..%d, so that the %s %d source ports fit under 65536", a.SrcPort, 65536-max(flows, 1), name("flows"), flows))
		} else {
			addr.SrcPort = uint16(a.SrcPort)
		}
	}
	if a.VLAN < 0 || a.VLAN > 4094 {
		report("vlan", fmt.Errorf("%d: give a VLAN ID 1..4094, or 0 for untagged frames", a.VLAN))
	} else {
		addr.VLAN = uint16(a.VLAN)
	}
	return addr, srcMAC, dstMAC
}

// CheckFrameFits refuses frame sizes too small for addr's headers (a VLAN
// tag, IPv6) and the stamp; the error starts with the size spec.
func CheckFrameFits(spec string, sizes traffic.Sizes, addr *traffic.Addressing) error {
	if least := addr.MinFrame(); sizes.Min() < least {
		return fmt.Errorf("%q: frames of %d B are too small for these headers (a VLAN tag adds 4 B, IPv6 20 B) and the stamp: use %d B or more", spec, sizes.Min(), least)
	}
	return nil
}
