package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Topology3 is gen ↔ fwd ↔ sink in three namespaces: GenIf pairs with
// FwdGenIf, FwdSinkIf pairs with SinkIf. Addresses are fixed: gen
// 198.18.0.1/30, fwd 198.18.0.2/30 and 198.18.0.5/30, sink 198.18.0.6/30.
type Topology3 struct {
	Gen, Fwd, Sink          *NS
	GenIf, SinkIf           string
	FwdGenIf, FwdSinkIf     string
	GenMAC, SinkMAC         net.HardwareAddr
	FwdGenMAC, FwdSinkMAC   net.HardwareAddr
	GenAddr, SinkAddr       netip.Prefix
	FwdGenAddr, FwdSinkAddr netip.Prefix
}

// Interface names of a Topology3 are prefixed with the namespace prefix's
// first characters so several topologies can coexist.
const (
	GenIfSuffix     = "-g0"
	FwdGenIfSuffix  = "-f0"
	FwdSinkIfSuffix = "-f1"
	SinkIfSuffix    = "-s0"
)

// ThreeNS creates namespaces PREFIX-gen, PREFIX-fwd and PREFIX-sink joined
// by two veth pairs named with ifPrefix (at most 12 characters, so the
// interface names fit the kernel's 15). On error, what was built is torn
// down. Delete removes it all.
func ThreeNS(prefix, ifPrefix string, opts VethOptions) (*Topology3, error) {
	topo := &Topology3{
		GenIf: ifPrefix + GenIfSuffix, FwdGenIf: ifPrefix + FwdGenIfSuffix,
		FwdSinkIf: ifPrefix + FwdSinkIfSuffix, SinkIf: ifPrefix + SinkIfSuffix,

		GenMAC:     net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x01, 0x01},
		FwdGenMAC:  net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x01, 0x02},
		FwdSinkMAC: net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x01, 0x05},
		SinkMAC:    net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x01, 0x06},

		GenAddr:     netip.MustParsePrefix("198.18.0.1/30"),
		FwdGenAddr:  netip.MustParsePrefix("198.18.0.2/30"),
		FwdSinkAddr: netip.MustParsePrefix("198.18.0.5/30"),
		SinkAddr:    netip.MustParsePrefix("198.18.0.6/30"),
	}
	fail := func(err error) (*Topology3, error) {
		return nil, errors.Join(err, topo.Delete())
	}
	var err error
	for _, ns := range []struct {
		into **NS
		name string
	}{{&topo.Gen, prefix + "-gen"}, {&topo.Fwd, prefix + "-fwd"}, {&topo.Sink, prefix + "-sink"}} {
		if *ns.into, err = Create(ns.name); err != nil {
			return fail(err)
		}
	}
	first := opts
	first.MACA, first.MACB, first.AddrA, first.AddrB = topo.GenMAC, topo.FwdGenMAC, topo.GenAddr, topo.FwdGenAddr
	if err := Veth(topo.Gen, topo.GenIf, topo.Fwd, topo.FwdGenIf, first); err != nil {
		return fail(err)
	}
	second := opts
	second.MACA, second.MACB, second.AddrA, second.AddrB = topo.FwdSinkMAC, topo.SinkMAC, topo.FwdSinkAddr, topo.SinkAddr
	if err := Veth(topo.Fwd, topo.FwdSinkIf, topo.Sink, topo.SinkIf, second); err != nil {
		return fail(err)
	}
	return topo, nil
}

// Delete removes the namespaces (and with them the veth pairs). It is
// idempotent and tolerates a partly built topology.
func (t *Topology3) Delete() error {
	var err error
	for _, ns := range []*NS{t.Gen, t.Fwd, t.Sink} {
		if ns != nil {
			err = errors.Join(err, ns.Delete())
		}
	}
	return err
}

// Bridge joins the fwd namespace's two interfaces with a Linux bridge
// named name (the kernel forwarding between gen and sink, in softirq where
// the frames arrive) and returns what deletes it. On error nothing is
// left behind.
func (t *Topology3) Bridge(name string) (del func() error, err error) {
	ip := func(args ...string) error {
		out, err := t.Fwd.Exec(append([]string{"ip"}, args...)...)
		if err != nil {
			return fmt.Errorf("netns: ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	del = func() error { return ip("link", "del", name) }
	for _, step := range [][]string{
		{"link", "add", name, "type", "bridge"},
		{"link", "set", t.FwdGenIf, "master", name},
		{"link", "set", t.FwdSinkIf, "master", name},
		{"link", "set", name, "up"},
	} {
		if err := ip(step...); err != nil {
			if step[1] != "add" {
				err = errors.Join(err, del())
			}
			return nil, err
		}
	}
	return del, nil
}

// BenchMTU lets a 1518-byte frame (1514 without the FCS) through every
// path of a bench topology: AF_PACKET refuses to send a frame longer than
// MTU + 14 bytes.
const BenchMTU = 1518 - 14

// BenchThreeNS is the topology the benchmarks measure a forwarder in:
// ThreeNS with GRO on and BenchMTU, GRO re-armed on fwd's ends (RearmGRO)
// so any kind of port — AF_XDP, AF_PACKET, a kernel bridge — receives
// there from the first frame.
func BenchThreeNS(prefix, ifPrefix string) (*Topology3, error) {
	return BenchThreeNSQueues(prefix, ifPrefix, 1)
}

// BenchThreeNSQueues is BenchThreeNS with queues receive and transmit
// queues on every veth end: what is sent on transmit queue q arrives on
// the peer's receive queue q, so a forwarder of one loop per queue sees
// each of its queues fed by one of the generator's.
func BenchThreeNSQueues(prefix, ifPrefix string, queues int) (*Topology3, error) {
	t, err := ThreeNS(prefix, ifPrefix, VethOptions{Queues: queues, GRO: true, MTU: BenchMTU})
	if err != nil {
		return nil, err
	}
	if err := t.RearmGRO(); err != nil {
		return nil, errors.Join(err, t.Delete())
	}
	return t, nil
}

// RearmGRO turns GRO off and on again on the fwd namespace's interfaces,
// now that they are up. Veth turns GRO on before it brings a link up, and
// on this kernel (6.18) a veth whose GRO came on while it was down runs
// its NAPI but does not mark its peer as a target of XDP redirects: the
// generator's frames (redirected into gen's end) are then dropped silently
// until an XDP program has once been attached to fwd's end. An AF_XDP
// port on fwd attaches one, so a run can work by its order alone; an
// AF_PACKET port or a bridge there receives nothing.
func (t *Topology3) RearmGRO() error {
	for _, ifname := range []string{t.FwdGenIf, t.FwdSinkIf} {
		for _, state := range []string{"off", "on"} {
			if _, err := t.Fwd.Exec("ethtool", "-K", ifname, "gro", state); err != nil {
				return fmt.Errorf("netns: turning GRO %s on %s: %w", state, ifname, err)
			}
		}
	}
	return nil
}

// ClearXDP removes an XDP program left on ifname in ns (a killed
// dpdk-testpmd leaves the ones libxdp attached, which would block the next
// AF_XDP port) and reports whether there was one.
func (ns *NS) ClearXDP(ifname string) (bool, error) {
	out, err := ns.Exec("ip", "link", "show", "dev", ifname)
	if err != nil {
		return false, err
	}
	if !strings.Contains(string(out), "prog/xdp") {
		return false, nil
	}
	if _, err := ns.Exec("ip", "link", "set", "dev", ifname, "xdp", "off"); err != nil {
		return true, fmt.Errorf("netns: removing the XDP program left on %s: %w", ifname, err)
	}
	return true, nil
}
