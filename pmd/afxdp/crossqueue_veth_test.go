package afxdp

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// TestRedirectToOtherQueueDrops shows why the XDP program cannot steer a
// frame to the queue of the shard its CID names: the kernel's AF_XDP
// receive check (xsk_rcv_check in net/xdp/xsk.c) refuses a frame whose
// device or rx queue differs from the socket's binding. With slot 0 of the
// XSKMAP pointing at queue 1's socket, frames arriving on queue 0 reach no
// socket: veth counts them as receive-queue drops, and the target
// socket's XDP_STATISTICS do not count them. Put
// back, the same path delivers a second batch on queue 0, behind the first
// in veth's FIFO, so the first batch was dropped, not late.
func TestRedirectToOtherQueueDrops(t *testing.T) {
	const queues, perBatch, size = 2, 100, 96
	tp := topo(t, queues)
	pool := newPool(t, 8192, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, Queues: queues, RingSize: 512})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, Queues: queues, RingSize: 512})
	xsks := rx.att.prog.xsks

	send := func(batch byte) { // on transmit queue 0: veth receives on queue 0
		sendTagged(t, tx, pool, tp.MACB, tp.MACA, 0, batch, perBatch, size)
	}
	// got[q][batch] counts the test's frames received on queue q.
	var got [queues][2]int
	drain := func(want int) {
		bufs := make([]mbuf.Handle, 64)
		for empty := 0; got[0][1] < want && empty < 1<<18; {
			n := 0
			for q := range queues {
				k := rx.RxBurst(q, bufs)
				n += k
				for _, h := range bufs[:k] {
					if b := pool.Data(h); len(b) == size && b[12] == 0x88 && b[13] == 0xb5 && b[14] < 2 {
						got[q][b[14]]++
					}
				}
				pool.Free(bufs[:k])
			}
			if n == 0 {
				empty++
			} else {
				empty = 0
			}
		}
	}

	require.NoError(t, xsks.Put(uint32(0), uint32(rx.queues[1].sock.FD())), "point queue 0's slot at queue 1's socket")
	before := rx.KernelStats()[1]
	nicBefore := vethStats(t, tp.B.Exec, tp.IfB)
	send(0)
	require.NoError(t, xsks.Put(uint32(0), uint32(rx.queues[0].sock.FD())), "put queue 0's socket back")
	send(1)
	drain(perBatch)

	require.Equal(t, perBatch, got[0][1], "the control batch arrives on queue 0: %v", got)
	require.Zero(t, got[1][0], "queue 1's socket received frames that arrived on queue 0: %v", got)
	require.Zero(t, got[0][0], "frames redirected to queue 1's socket were delivered on queue 0: %v", got)
	after := rx.KernelStats()[1]
	nic := vethStats(t, tp.B.Exec, tp.IfB)
	require.Equal(t, before.RxDropped, after.RxDropped, "the refused frames are not in the target socket's rx_dropped")
	if rx.Mode() == ModeNative {
		// veth's native XDP counts a redirect the kernel refused as a
		// drop of the receive queue, and only completed ones as redirects.
		require.Equal(t, uint64(perBatch), nic["rx_queue_0_drops"]-nicBefore["rx_queue_0_drops"], "refused redirects: %v", nic)
		require.Equal(t, uint64(perBatch), nic["rx_queue_0_xdp_redirect"]-nicBefore["rx_queue_0_xdp_redirect"], "completed redirects (the control batch): %v", nic)
	}
	t.Logf("%d frames redirected from queue 0 into queue 1's socket: delivered to none; veth rx_queue_0_drops %d, rx_queue_0_xdp_redirect %d (control batch); queue 1 XDP_STATISTICS rx_dropped %d -> %d",
		perBatch, nic["rx_queue_0_drops"]-nicBefore["rx_queue_0_drops"], nic["rx_queue_0_xdp_redirect"]-nicBefore["rx_queue_0_xdp_redirect"], before.RxDropped, after.RxDropped)
}

// vethStats reads an interface's ethtool -S counters.
func vethStats(t *testing.T, exec func(...string) ([]byte, error), ifc string) map[string]uint64 {
	out, err := exec("ethtool", "-S", ifc)
	require.NoError(t, err, "ethtool -S %s: %s", ifc, out)
	m := map[string]uint64{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	return m
}
