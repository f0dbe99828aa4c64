package afpacket_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/afpacket"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// sendFlows sends perFlow frames of each of flows UDP flows (source ports
// 1000…) from tx.
func sendFlows(t *testing.T, pool *mbuf.Pool, tx *afpacket.Port, topo *netnstest.Topology, flows, perFlow int) {
	t.Helper()
	hs := make([]mbuf.Handle, flows)
	for round := range perFlow {
		require.Equal(t, flows, pool.AllocBulk(hs))
		for i, h := range hs {
			require.True(t, pool.SetLen(h, 64))
			udpFrame(pool.Data(h), topo.MACB, topo.MACA, uint16(1000+i), uint32(round))
		}
		require.Equal(t, flows, tx.TxBurst(0, hs))
	}
	tx.TxFlush(0)
}

// perQueue receives from every queue of rx until total frames came (or the
// queues stay idle) and returns the count per queue.
func perQueue(t *testing.T, pool *mbuf.Pool, rx *afpacket.Port, total int) []int {
	t.Helper()
	n := make([]int, rx.Info().Queues)
	got := 0
	for q := range n {
		frames, err := receiveFrames(pool, rx, q, total-got)
		require.NoError(t, err)
		n[q] = len(frames)
		got += n[q]
	}
	return n
}

// TestFanoutGroupPerPort opens two 2-queue ports on one interface: each
// port's sockets form their own fanout group, so each port receives every
// frame once (one group shared by both would split the frames between
// them).
func TestFanoutGroupPerPort(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true, Queues: 2})
	pool := newPool(t, 4096)
	tx, err := afpacket.New(pool, afpacket.Options{Interface: topo.IfA, Netns: topo.A.Name})
	require.NoError(t, err)
	defer tx.Close()
	var rxs [2]*afpacket.Port
	for i := range rxs {
		rxs[i], err = afpacket.New(pool, afpacket.Options{Interface: topo.IfB, Netns: topo.B.Name, Queues: 2})
		require.NoError(t, err)
		defer rxs[i].Close()
	}
	const flows, rounds = 32, 4
	sendFlows(t, pool, tx, topo, flows, rounds)
	for i, rx := range rxs {
		n := perQueue(t, pool, rx, flows*rounds)
		require.Equal(t, flows*rounds, n[0]+n[1], "port %d received every frame: %v", i, n)
		require.Equal(t, uint64(flows*rounds), rx.Stats().RxPackets)
	}
}

// TestFanoutModes opens 2-queue ports by spec: fanout=lb deals one flow's
// frames out in turn over both queues; fanout=hash keeps the flow on one.
func TestFanoutModes(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true, Queues: 2})
	pool := newPool(t, 4096)
	env := &pmd.Env{Pool: pool}
	tx, err := afpacket.New(pool, afpacket.Options{Interface: topo.IfA, Netns: topo.A.Name})
	require.NoError(t, err)
	defer tx.Close()
	const frames = 100
	for _, mode := range []string{"lb", "hash"} {
		p, err := pmd.Open(env, fmt.Sprintf("afpacket:%s?netns=%s&queues=2&fanout=%s", topo.IfB, topo.B.Name, mode))
		require.NoError(t, err)
		rx := p.(*afpacket.Port)
		sendFlows(t, pool, tx, topo, 1, frames)
		n := perQueue(t, pool, rx, frames)
		st := rx.Stats()
		require.NoError(t, rx.Close())
		require.Equal(t, frames, n[0]+n[1], "%s: %v", mode, n)
		for q := range 2 {
			require.Equal(t, uint64(n[q]), st.Queues[q].RxPackets, "%s: queue %d counter", mode, q)
		}
		if mode == "lb" {
			require.InDelta(t, frames/2, n[0], 2, "lb alternates queues: %v", n)
		} else {
			require.Contains(t, []int{0, frames}, n[0], "hash keeps one flow on one queue: %v", n)
		}
	}
}
