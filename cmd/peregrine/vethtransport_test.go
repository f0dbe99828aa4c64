package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
)

// vethTransport is the shape the transport's veth tests share: a fresh
// three-namespace topology, `peregrine fabric` in the middle one, a
// transport target in the sink namespace and the initiator in the gen
// namespace, each on a driver's port. The caller fills in what its test
// is about; run fills in the ports, addresses, the target's region and the
// ready hooks.
type vethTransport struct {
	prefix    string // namespace prefix, e.g. "pgtr"
	driver    string // afxdp or afpacket
	veth      netns.VethOptions
	fabric    fabricConfig    // portA, portB and ready are set by run
	target    transportConfig // role, port, ip and ready are set by run
	initiator transportConfig // role, port, ip, peer and region key are set by run
	// regionLen passes the target's region size to the initiator (else
	// the initiator derives it from its own window and sizes).
	regionLen bool
}

// run starts the fabric, then the target, runs the initiator to its end,
// stops the other two and removes the namespaces. It fails the test on any
// error or a failed initiator check, and returns the three outputs.
func (v vethTransport) run(t *testing.T) (initiator, target, fabric string) {
	t.Helper()
	topo, err := netns.ThreeNS(fmt.Sprintf("%s-%d", v.prefix, time.Now().UnixNano()%100000), v.prefix, v.veth)
	require.NoError(t, err)
	defer topo.Delete()
	spec := func(ns *netns.NS, ifn string) string { return fmt.Sprintf("%s:%s?netns=%s", v.driver, ifn, ns.Name) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var fabOut, tgtOut, out bytes.Buffer
	var fabErr, tgtErr error

	fabReady := make(chan struct{})
	fc := v.fabric
	fc.portA, fc.portB, fc.ready = spec(topo.Fwd, topo.FwdGenIf), spec(topo.Fwd, topo.FwdSinkIf), func() { close(fabReady) }
	wg.Add(1)
	go func() {
		defer wg.Done()
		fabErr = runFabric(ctx, fc, &fabOut)
	}()
	<-fabReady

	type region struct {
		key uint32
		len int
	}
	tgtReady := make(chan region, 1)
	tc := v.target
	tc.role, tc.port, tc.ip = "target", spec(topo.Sink, topo.SinkIf), topo.SinkAddr.Addr().String()
	tc.ready = func(key uint32, n int) { tgtReady <- region{key, n} }
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, tgtErr = runTransport(ctx, tc, &tgtOut)
	}()
	r := <-tgtReady

	ic := v.initiator
	ic.role, ic.port, ic.ip = "initiator", spec(topo.Gen, topo.GenIf), topo.GenAddr.Addr().String()
	ic.peerMAC, ic.peerIP, ic.regionKey = net.HardwareAddr(topo.SinkMAC).String(), topo.SinkAddr.Addr().String(), r.key
	if v.regionLen {
		ic.regionLen = r.len
	}
	ok, err := runTransport(context.Background(), ic, &out)
	cancel()
	wg.Wait()
	require.NoError(t, err)
	require.True(t, ok, "initiator:\n%s\ntarget:\n%s\nfabric:\n%s", out.String(), tgtOut.String(), fabOut.String())
	require.NoError(t, tgtErr, tgtOut.String())
	require.NoError(t, fabErr, fabOut.String())
	return out.String(), tgtOut.String(), fabOut.String()
}
