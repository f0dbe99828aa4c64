package afxdp

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// TestMultiQueueVeth opens two-queue AF_XDP ports on both ends of a veth
// created with numtxqueues 2 numrxqueues 2 and checks that frames arrive
// on both receive queues, each on the queue that matches the sender's
// transmit queue, with the per-queue counters to match.
//
// That is veth's rule, and the gotcha of testing multi-queue code on it:
// veth has no RSS. A frame the sender puts on transmit queue q is received
// on the peer's receive queue q (the skb's queue mapping carries over), so
// the sender, not a hash, decides the receive queue: to spread flows over
// queues, spread them over transmit queues (XPS, or one AF_XDP socket per
// queue as here). The other half of the gotcha: a frame XDP-redirected into
// a veth (XDP_REDIRECT from another device's program) is dropped unless
// the veth's peer has an XDP program attached (or GRO on), because veth
// runs its NAPI receive only then.
func TestMultiQueueVeth(t *testing.T) {
	const queues, perQueue, size = 2, 200, 96
	// Created with four queues a side, then cut to two with ethtool -L
	// (veth implements set_channels): the port uses the two that are live.
	tp := topo(t, 4)
	for _, end := range []struct {
		exec func(...string) ([]byte, error)
		ifc  string
	}{{tp.A.Exec, tp.IfA}, {tp.B.Exec, tp.IfB}} {
		if out, err := end.exec("ethtool", "-L", end.ifc, "rx", "2", "tx", "2"); err != nil {
			t.Skipf("ethtool -L %s rx 2 tx 2: veth channels cannot be set on this kernel (%v: %s)", end.ifc, err, strings.TrimSpace(string(out)))
		}
		out, err := end.exec("ethtool", "-l", end.ifc)
		require.NoError(t, err, "ethtool -l %s: %s", end.ifc, out)
		_, current, ok := strings.Cut(string(out), "Current hardware settings:")
		require.True(t, ok, "ethtool -l output: %s", out)
		require.Regexp(t, `RX:\s+2\s+TX:\s+2`, current, "%s has two live queues a direction", end.ifc)
	}
	pool := newPool(t, 8192, 2048)
	_, err := New(pool, Options{Interface: tp.IfB, Namespace: tp.B, Queues: 4, RingSize: 512})
	require.Error(t, err, "queues 2 and 3 were taken away by ethtool -L: no socket binds there")
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, Queues: queues, RingSize: 512})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, Queues: queues, RingSize: 512})
	require.Equal(t, queues, rx.Info().Queues)

	for q := range queues {
		sendTagged(t, tx, pool, tp.MACB, tp.MACA, q, byte(q), perQueue, size)
	}

	// Each receive queue is drained by its own goroutine, as a shard
	// would; each records the sending queue of every frame it got.
	from := make([][queues]int, queues)
	var wg sync.WaitGroup
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := make([]mbuf.Handle, 64)
			got := 0
			for empty := 0; got < perQueue && empty < 1<<18; {
				k := rx.RxBurst(q, bufs)
				if k == 0 {
					empty++
					continue
				}
				empty = 0
				for _, h := range bufs[:k] {
					if b := pool.Data(h); len(b) == size && b[12] == 0x88 && b[13] == 0xb5 && int(b[14]) < queues {
						from[q][b[14]]++
						got++
					}
				}
				pool.Free(bufs[:k])
			}
		}()
	}
	wg.Wait()
	st := rx.Stats()
	for q := range queues {
		require.Equal(t, perQueue, from[q][q], "receive queue %d got what transmit queue %d sent: %v", q, q, from)
		require.Equal(t, perQueue, from[q][0]+from[q][1], "receive queue %d got frames of transmit queue %d only: %v", q, q, from)
		require.GreaterOrEqual(t, st.Queues[q].RxPackets, uint64(perQueue), "queue %d counter", q)
		require.Equal(t, uint64(perQueue), tx.Stats().Queues[q].TxPackets, "transmit queue %d counter", q)
	}
}
