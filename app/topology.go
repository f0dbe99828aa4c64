package app

import (
	"errors"
	"fmt"
	"os"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// CheckVethDriver refuses a driver a veth topology cannot use, naming the
// ones it can (a *FieldError on "Driver").
func CheckVethDriver(driver string) error {
	if driver == "afxdp" || driver == "afpacket" {
		return nil
	}
	return &FieldError{"Driver", -1, fmt.Errorf("%q: use afxdp or afpacket", driver)}
}

// VethTopology is three network namespaces joined by two veth pairs, made
// for one run (demo --veth) and removed by Delete: gen ⇄ fwd ⇄ sink, with
// the addresses of netns.Topology3 (198.18.0.0/15 only).
type VethTopology struct {
	*netns.Topology3
	// Driver opens the ports (afxdp or afpacket).
	Driver string
}

// NewVethTopology creates the three namespaces of demo --veth under a name
// unique to this process: PREFIX-PID-gen, -fwd and -sink (PREFIX "pgdemo"
// by default), with interfaces named from the PID. It refuses a driver
// other than afxdp or afpacket, and a caller that is not root, before
// creating anything. The caller must Delete it, also when the run ends on
// a signal or an error (hack/topo.sh down PREFIX removes what a kill -9
// leaves).
func NewVethTopology(prefix, driver string) (*VethTopology, error) {
	if err := CheckVethDriver(driver); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("a veth topology creates network namespaces and veth pairs: run as root (needs CAP_SYS_ADMIN and CAP_NET_ADMIN; the ports need CAP_NET_RAW, and afxdp also CAP_BPF and CAP_IPC_LOCK)")
	}
	if prefix == "" {
		prefix = "pgdemo"
	}
	id := os.Getpid() % 100000
	topo, err := netns.ThreeNS(fmt.Sprintf("%s-%d", prefix, id), fmt.Sprintf("pgd%d", id), netns.VethOptions{GRO: true})
	if err != nil {
		return nil, err
	}
	return &VethTopology{Topology3: topo, Driver: driver}, nil
}

// Specs returns the port specs of the four veth ends, in the order the demo
// builders take them: gen, fwd's gen side, fwd's sink side, sink.
func (t *VethTopology) Specs() []string {
	spec := func(ns *netns.NS, ifname string) string {
		return fmt.Sprintf("%s:%s?netns=%s", t.Driver, ifname, ns.Name)
	}
	return []string{spec(t.Gen, t.GenIf), spec(t.Fwd, t.FwdGenIf), spec(t.Fwd, t.FwdSinkIf), spec(t.Sink, t.SinkIf)}
}

// Delete removes the namespaces and with them the veth pairs; it is
// idempotent.
func (t *VethTopology) Delete() error { return t.Topology3.Delete() }
