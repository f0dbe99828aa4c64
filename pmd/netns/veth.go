package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
)

// TestRange returns 198.18.0.0/15, the only prefix Veth accepts addresses
// from: RFC 2544's benchmarking range, which is never routed on the
// Internet.
func TestRange() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, 0}), 15)
}

// ErrOutsideTestRange is wrapped when an address is not in 198.18.0.0/15.
var ErrOutsideTestRange = errors.New("netns: address outside the benchmarking range 198.18.0.0/15")

// Limits of VethOptions.
const (
	MaxQueues = 4096 // the kernel's limit for veth numrxqueues/numtxqueues
	MinMTU    = 68
	MaxMTU    = 65535
	// MaxIfNameLen is IFNAMSIZ minus the terminating NUL.
	MaxIfNameLen = 15
)

// VethOptions configure Veth. Zero fields take their defaults.
type VethOptions struct {
	// Queues is the number of RX and TX queues of each end (numrxqueues,
	// numtxqueues). Default 1, at most 4096.
	Queues int
	// MTU of both ends. Default 1500.
	MTU int
	// GRO turns generic receive offload on at both ends. A veth delivers
	// to AF_PACKET and generic-XDP sockets only with GRO on.
	GRO bool
	// AddrA and AddrB, when valid, are assigned to the A and B ends. They
	// must lie inside 198.18.0.0/15.
	AddrA, AddrB netip.Prefix
	// MACA and MACB, when set, are the ends' MAC addresses; otherwise the
	// kernel picks random ones.
	MACA, MACB net.HardwareAddr
	// KeepIPv6 leaves IPv6 enabled on both ends. By default it is disabled
	// before the links come up, so the kernel sends no router or neighbour
	// solicitations of its own and a receiver sees only what a test sent.
	KeepIPv6 bool
}

func (o *VethOptions) validate() error {
	if o.Queues == 0 {
		o.Queues = 1
	}
	if o.MTU == 0 {
		o.MTU = 1500
	}
	if o.Queues < 1 || o.Queues > MaxQueues {
		return fmt.Errorf("netns: VethOptions.Queues %d is out of range (use 1..%d)", o.Queues, MaxQueues)
	}
	if o.MTU < MinMTU || o.MTU > MaxMTU {
		return fmt.Errorf("netns: VethOptions.MTU %d is out of range (use %d..%d)", o.MTU, MinMTU, MaxMTU)
	}
	for _, a := range []struct {
		field string
		p     netip.Prefix
	}{{"AddrA", o.AddrA}, {"AddrB", o.AddrB}} {
		if err := CheckTestPrefix(a.p); a.p.IsValid() && err != nil {
			return fmt.Errorf("netns: VethOptions.%s: %w", a.field, err)
		}
	}
	for _, m := range []struct {
		field string
		mac   net.HardwareAddr
	}{{"MACA", o.MACA}, {"MACB", o.MACB}} {
		if m.mac != nil && len(m.mac) != 6 {
			return fmt.Errorf("netns: VethOptions.%s %v is not a 6-byte Ethernet address (e.g. 02:00:00:00:00:01)", m.field, m.mac)
		}
		if len(m.mac) == 6 && m.mac[0]&1 != 0 {
			return fmt.Errorf("netns: VethOptions.%s %v is a multicast address (clear the low bit of the first byte, e.g. 02:...)", m.field, m.mac)
		}
	}
	return nil
}

// CheckTestPrefix returns an error wrapping ErrOutsideTestRange unless p is
// a valid IPv4 prefix inside 198.18.0.0/15.
func CheckTestPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("%w: %v is not a valid prefix (use e.g. 198.18.0.1/30)", ErrOutsideTestRange, p)
	}
	if r := TestRange(); !r.Contains(p.Addr()) || p.Bits() < r.Bits() {
		return fmt.Errorf("%w: %v is not inside it (use e.g. 198.18.0.1/30)", ErrOutsideTestRange, p)
	}
	return nil
}

func checkIfName(field, name string) error {
	if name == "" || len(name) > MaxIfNameLen {
		return fmt.Errorf("netns: Veth: %s %q must be 1..%d characters (e.g. \"pg0\")", field, name, MaxIfNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("netns: Veth: %s %q may hold only letters, digits, '-', '_' and '.'", field, name)
		}
	}
	return nil
}

// Veth creates a veth pair with end ifA in namespace a and end ifB in
// namespace b, configures both as opts says, sets them up and returns once
// the kernel has finished bringing both up (frames sent earlier would be
// dropped). On failure nothing is left behind.
func Veth(a *NS, ifA string, b *NS, ifB string, opts VethOptions) error {
	if a == nil || b == nil {
		return errors.New("netns: Veth: both namespaces must be non-nil (create them with netns.Create)")
	}
	if err := checkIfName("ifA", ifA); err != nil {
		return err
	}
	if err := checkIfName("ifB", ifB); err != nil {
		return err
	}
	if a.Name == b.Name && ifA == ifB {
		return fmt.Errorf("netns: Veth: both ends are named %q in namespace %q (give them different names)", ifA, a.Name)
	}
	if err := opts.validate(); err != nil {
		return err
	}
	q := strconv.Itoa(opts.Queues)
	args := []string{"-n", a.Name, "link", "add", ifA, "numtxqueues", q, "numrxqueues", q, "mtu", strconv.Itoa(opts.MTU)}
	if opts.MACA != nil {
		args = append(args, "address", opts.MACA.String())
	}
	args = append(args, "type", "veth", "peer", "name", ifB, "numtxqueues", q, "numrxqueues", q, "mtu", strconv.Itoa(opts.MTU))
	if opts.MACB != nil {
		args = append(args, "address", opts.MACB.String())
	}
	args = append(args, "netns", b.Name)
	if _, err := run("ip", args...); err != nil {
		return fmt.Errorf("netns: Veth %s/%s-%s/%s: %w", a.Name, ifA, b.Name, ifB, err)
	}
	ends := []struct {
		ns   *NS
		name string
		addr netip.Prefix
	}{{a, ifA, opts.AddrA}, {b, ifB, opts.AddrB}}
	for _, e := range ends {
		if err := configureEnd(e.ns, e.name, e.addr, opts); err != nil {
			// Deleting one end removes the pair.
			_, _ = run("ip", "-n", a.Name, "link", "del", ifA)
			return fmt.Errorf("netns: Veth %s/%s-%s/%s: %w", a.Name, ifA, b.Name, ifB, err)
		}
	}
	for _, e := range ends {
		if err := waitLinkReady(e.ns, e.name); err != nil {
			_, _ = run("ip", "-n", a.Name, "link", "del", ifA)
			return fmt.Errorf("netns: Veth %s/%s-%s/%s: %w", a.Name, ifA, b.Name, ifB, err)
		}
	}
	return nil
}

func configureEnd(ns *NS, name string, addr netip.Prefix, opts VethOptions) error {
	if !opts.KeepIPv6 {
		// Before the link is up, so no router solicitation ever leaves.
		err := ns.Do(func() error {
			return os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) { // ErrNotExist: kernel without IPv6
			return fmt.Errorf("disable IPv6 on %s: %w", name, err)
		}
	}
	if addr.IsValid() {
		if _, err := run("ip", "-n", ns.Name, "addr", "add", addr.String(), "dev", name); err != nil {
			return err
		}
	}
	if _, err := run("ip", "-n", ns.Name, "link", "set", name, "up"); err != nil {
		return err
	}
	if opts.GRO {
		// After the link is up: on 6.18, GRO switched on while the link was
		// down left frames XDP-redirected into this end dropped until an
		// XDP program had once been attached here.
		if _, err := ns.Exec("ethtool", "-K", name, "gro", "on"); err != nil {
			return err
		}
	}
	return nil
}
