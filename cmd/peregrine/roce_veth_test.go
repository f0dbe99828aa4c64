package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestRoCEOverVeth runs `peregrine roce` live in the middle of three
// namespaces (AF_PACKET on veth): RoCEv2 frames sent from the gen side
// reach the sink side with local QP numbers and good ICRCs, the retired
// QP's frames are dropped, and the host side's frames go back out with
// the peer's global QPN.
func TestRoCEOverVeth(t *testing.T) {
	topo := netnstest.ThreeNS(t, netns.VethOptions{GRO: true})
	spec := func(ns *netns.NS, ifn string) string { return fmt.Sprintf("afpacket:%s?netns=%s", ifn, ns.Name) }
	pool, err := mbuf.New(mbuf.Options{Name: "roce-veth", Frames: 2048})
	require.NoError(t, err)
	env := &pmd.Env{Pool: pool}
	gen, err := pmd.Open(env, spec(topo.Gen, topo.GenIf))
	require.NoError(t, err)
	sink, err := pmd.Open(env, spec(topo.Sink, topo.SinkIf))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	var out bytes.Buffer
	var runErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// --retire 1 retires QPN 2; --open 1 opens QPN 3 as local 0, its
		// peer QPN its own number.
		runErr = runRoCE(ctx, roceConfig{ports: []string{spec(topo.Fwd, topo.FwdGenIf), spec(topo.Fwd, topo.FwdSinkIf)},
			burst: 32, lcores: "1", idle: "yield", period: time.Hour, frames: 4096, slots: 8, retire: 1, open: 1, pmtu: 1024,
			ready: func() { close(ready) }}, &out)
	}()
	<-ready

	a := wire.Addrs{SrcMAC: [6]byte(topo.GenMAC), DstMAC: [6]byte(topo.SinkMAC),
		SrcIP: topo.GenAddr.Addr(), DstIP: netip.MustParseAddr("198.18.0.6"), SrcPort: 49152, NoUDPChecksum: true}
	var frames [][]byte
	psn3 := uint32(0) // QP 3: PSNs 0..19 in order
	for i := range 30 {
		qp, psn := uint32(3), psn3
		if i%3 == 2 {
			qp, psn = 2, uint32(i) // the retired QP
		} else {
			psn3++
		}
		f := roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: qp, PSN: psn}, Payload: []byte("over veth!!!")}
		b := make([]byte, 256)
		n, err := f.Encode(b)
		require.NoError(t, err)
		frames = append(frames, b[:n])
	}
	roceSend(t, pool, gen, frames)
	got := roceReceive(t, pool, sink, 0x04, 20, 10*time.Second)
	require.Len(t, got, 20)
	for i, g := range got {
		var v wire.RoCEView
		require.NoError(t, wire.ParseRoCE(g, wire.RoCEv2Port, &v))
		require.True(t, v.CheckICRC(g), "frame %d: ICRC", i)
		require.Equal(t, uint32(0), v.DestQP, "frame %d: global QPN 3 → local 0", i)
		require.Equal(t, uint32(i), v.PSN)
	}

	// The host answers on local QP 0: the frame leaves with QPN 3.
	back := roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x11, PKey: 0xffff, DestQP: 0, PSN: 19}}
	b := make([]byte, 256)
	n, err := back.Encode(b)
	require.NoError(t, err)
	roceSend(t, pool, sink, [][]byte{b[:n]})
	ret := roceReceive(t, pool, gen, 0x11, 1, 10*time.Second)
	require.Len(t, ret, 1)
	f, err := wire.DecodeRoCEFrame(ret[0])
	require.NoError(t, err)
	require.Equal(t, uint32(3), f.BTH.DestQP)

	cancel()
	wg.Wait()
	require.NoError(t, runErr, out.String())
	require.Contains(t, out.String(), "retired_qpn=10", out.String())
	require.NoError(t, gen.Close())
	require.NoError(t, sink.Close())
	require.NoError(t, pool.CheckLeaks())
	require.NoError(t, pool.Close())
}

func roceSend(t *testing.T, pool *mbuf.Pool, p port.Port, frames [][]byte) {
	t.Helper()
	hs := make([]mbuf.Handle, len(frames))
	require.Equal(t, len(hs), pool.AllocBulk(hs))
	for i, f := range frames {
		require.True(t, pool.SetLen(hs[i], len(f)))
		copy(pool.Data(hs[i]), f)
	}
	sent := 0
	deadline := time.Now().Add(5 * time.Second)
	for sent < len(hs) && time.Now().Before(deadline) {
		sent += p.TxBurst(0, hs[sent:])
		port.FlushTx(p, 0)
	}
	require.Equal(t, len(hs), sent)
}

// roceReceive polls p until want RoCEv2 frames with opcode op arrived
// (others — the kernel's, or our own sent ones seen going out — are
// skipped) or timeout passed.
func roceReceive(t *testing.T, pool *mbuf.Pool, p port.Port, op uint8, want int, timeout time.Duration) [][]byte {
	t.Helper()
	var got [][]byte
	hs := make([]mbuf.Handle, 32)
	deadline := time.Now().Add(timeout)
	for len(got) < want && time.Now().Before(deadline) {
		n := p.RxBurst(0, hs)
		for _, h := range hs[:n] {
			d := pool.Data(h)
			var v wire.RoCEView
			if wire.ParseRoCE(d, wire.RoCEv2Port, &v) == nil && v.Opcode == op {
				got = append(got, append([]byte(nil), d...))
			}
		}
		pool.Free(hs[:n])
	}
	return got
}
