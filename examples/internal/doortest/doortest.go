// Package doortest gives the examples' tests the two places an example
// runs: a mem: pair or a veth pair between two network namespaces, and an
// appliance (host.Server, as peregrine serve runs it) for the sidecar door.
package doortest

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// The addresses of the two ends.
var (
	IPA = netip.MustParseAddr("198.18.0.1")
	IPB = netip.MustParseAddr("198.18.0.2")
)

var pairSeq atomic.Int64

// Ports are the two ends' port specs and the host they open on.
type Ports struct {
	Host *peregrine.Host
	A, B string
}

// Mem returns the two ends of a fresh mem: pair on a new host, closed
// (and checked for frames left in use) when t ends.
func Mem(t testing.TB) Ports {
	t.Helper()
	name := fmt.Sprintf("ex%d", pairSeq.Add(1))
	return Ports{Host: newHost(t), A: "mem:" + name + "/0", B: "mem:" + name + "/1"}
}

// Veth returns driver's ports on the two ends of a veth pair between two
// fresh namespaces. It skips t unless root.
func Veth(t testing.TB, driver string) Ports {
	t.Helper()
	tp := netnstest.TwoNS(t, netns.VethOptions{})
	h := newHost(t)
	return Ports{Host: h,
		A: fmt.Sprintf("%s:%s?netns=%s", driver, tp.IfA, tp.A.Name),
		B: fmt.Sprintf("%s:%s?netns=%s", driver, tp.IfB, tp.B.Name)}
}

func newHost(t testing.TB) *peregrine.Host {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("host: %v", err)
		}
	})
	return h
}

// Appliance opens spec on h at IPA and serves the sidecar on a socket in
// t's temporary directory, polled until t ends; it returns the socket.
func Appliance(t testing.TB, h *peregrine.Host, spec string) string {
	t.Helper()
	ep, err := h.Open(spec, peregrine.Options{IP: IPA})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "peregrine.sock")
	srv, err := host.New(host.Options{Socket: sock, Endpoint: ep, UID: -1, GID: -1})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
		if err := srv.Close(); err != nil {
			t.Errorf("appliance: %v", err)
		}
		if err := ep.Close(); err != nil {
			t.Errorf("appliance endpoint: %v", err)
		}
	})
	return sock
}

// EachPlace runs fn as a subtest in every place an example runs: in
// memory, and over a veth pair with AF_XDP and with AF_PACKET (root only),
// each through both doors. p.A is the port of the example's side that
// may go through the sidecar: sidecar is the appliance's socket over p.A
// in the sidecar door, "" in process.
func EachPlace(t *testing.T, fn func(t *testing.T, p Ports, sidecar string)) {
	for _, where := range []string{"mem", "afxdp", "afpacket"} {
		for _, door := range []string{"in-process", "sidecar"} {
			t.Run(where+"/"+door, func(t *testing.T) {
				var p Ports
				if where == "mem" {
					p = Mem(t)
				} else {
					p = Veth(t, where)
				}
				sidecar := ""
				if door == "sidecar" {
					sidecar = Appliance(t, p.Host, p.A)
				}
				fn(t, p, sidecar)
			})
		}
	}
}
