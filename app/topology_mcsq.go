package app

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// MCSQVethPair is the veth pair the demo's MCSQ part runs over with
// --veth: its initiator's end in the gen namespace, the targets' end in
// the sink namespace (where an N-port switch behind a bridge stage holds
// the target hosts).
type MCSQVethPair struct {
	// InitiatorSpec and TargetSpec are the two ends' port specs.
	InitiatorSpec, TargetSpec string
	// InitiatorIP is the initiator's address (the pair's subnet is
	// 198.19.0.0/30; the hosts are 198.19.1.x behind the switch).
	InitiatorIP netip.Addr
	// TargetMAC is the sink end's MAC: the initiator's next hop to every
	// host.
	TargetMAC [6]byte
}

// AddMCSQPair adds a veth pair between the topology's gen and sink
// namespaces for the MCSQ demo; Delete removes it with the namespaces.
func (t *VethTopology) AddMCSQPair() (MCSQVethPair, error) {
	pre := strings.TrimSuffix(t.GenIf, netns.GenIfSuffix)
	ifI, ifT := pre+"-m0", pre+"-m1"
	macI := net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x02, 0x01}
	macT := net.HardwareAddr{0x02, 0x70, 0x67, 0x00, 0x02, 0x02}
	ipI := netip.MustParsePrefix("198.19.0.1/30")
	if err := netns.Veth(t.Gen, ifI, t.Sink, ifT, netns.VethOptions{GRO: true, MACA: macI, MACB: macT,
		AddrA: ipI, AddrB: netip.MustParsePrefix("198.19.0.2/30")}); err != nil {
		return MCSQVethPair{}, err
	}
	spec := func(ns *netns.NS, ifname string) string {
		return fmt.Sprintf("%s:%s?netns=%s", t.Driver, ifname, ns.Name)
	}
	return MCSQVethPair{InitiatorSpec: spec(t.Gen, ifI), TargetSpec: spec(t.Sink, ifT), InitiatorIP: ipI.Addr(),
		TargetMAC: [6]byte(macT)}, nil
}
