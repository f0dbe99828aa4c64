package afxdp

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// newPool returns a pool the test owns, in Debug mode so that a double or
// foreign free panics; cleanup requires it quiet.
func newPool(t testing.TB, frames, frameSize int) *mbuf.Pool {
	t.Helper()
	return newPoolWith(t, mbuf.Options{Name: t.Name(), Frames: frames, FrameSize: frameSize, Debug: true})
}

// newPoolWith returns a pool made with opts; cleanup requires it quiet.
func newPoolWith(t testing.TB, opts mbuf.Options) *mbuf.Pool {
	t.Helper()
	pool, err := mbuf.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, pool.CheckLeaks(), "frames leaked")
		require.NoError(t, pool.Close())
	})
	return pool
}

// topo is a veth pair between two namespaces, GRO on, IPv6 off.
func topo(t testing.TB, queues int) *netnstest.Topology {
	t.Helper()
	skipUnlessRoot(t)
	return netnstest.TwoNS(t, netns.VethOptions{Queues: queues, GRO: true})
}

// openPort opens an afxdp port and closes it at cleanup.
func openPort(t testing.TB, pool *mbuf.Pool, opts Options) *Port {
	t.Helper()
	p, err := New(pool, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// sendFrames allocates n frames of size bytes from pool (broadcast,
// EtherType 0x88b5, byte i of payload = seq+i) and sends them on queue,
// retrying refusals.
func sendFrames(t testing.TB, p *Port, pool *mbuf.Pool, queue, n, size int) {
	t.Helper()
	hs := allocFrames(t, pool, n, size)
	for i, h := range hs {
		b := pool.Data(h)
		for j := range b {
			b[j] = byte(i + j)
		}
		copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		b[12], b[13] = 0x88, 0xb5
	}
	txAll(t, p, queue, hs)
}

// txAll sends every frame of hs on queue, retrying refusals, and flushes.
func txAll(t testing.TB, p *Port, queue int, hs []mbuf.Handle) {
	t.Helper()
	sent := 0
	for tries := 0; sent < len(hs); tries++ {
		require.Less(t, tries, 1<<16, "TxBurst kept refusing frames")
		sent += p.TxBurst(queue, hs[sent:])
	}
	p.TxFlush(queue)
}

// receiveFrames polls queue until n frames arrived (bounded by empty
// polls), checks their length and frees them; it returns how many came.
func receiveFrames(t testing.TB, p *Port, pool *mbuf.Pool, queue, n, size int) int {
	t.Helper()
	bufs := make([]mbuf.Handle, 64)
	got := 0
	for empty := 0; got < n && empty < 1<<18; {
		k := p.RxBurst(queue, bufs[:min(len(bufs), n-got)])
		if k == 0 {
			empty++
			continue
		}
		empty = 0
		for _, h := range bufs[:k] {
			require.Equal(t, size, len(pool.Data(h)))
			require.Equal(t, pool.Headroom(), int(pool.Meta(h).DataOff), "received frame starts at the pool headroom")
		}
		pool.Free(bufs[:k])
		got += k
	}
	return got
}

// sendTagged sends n frames of size bytes from src to dst on transmit
// queue txq, EtherType 0x88b5, tag and the frame's index in bytes 14 and 15.
func sendTagged(t testing.TB, tx *Port, pool *mbuf.Pool, dst, src net.HardwareAddr, txq int, tag byte, n, size int) {
	t.Helper()
	hs := allocFrames(t, pool, n, size)
	for i, h := range hs {
		b := pool.Data(h)
		copy(b[0:6], dst)
		copy(b[6:12], src)
		b[12], b[13] = 0x88, 0xb5
		b[14], b[15] = tag, byte(i)
	}
	txAll(t, tx, txq, hs)
}

// allocFrames allocates n frames of size bytes from pool.
func allocFrames(t testing.TB, pool *mbuf.Pool, n, size int) []mbuf.Handle {
	t.Helper()
	hs := make([]mbuf.Handle, n)
	require.Equal(t, n, pool.AllocBulk(hs))
	for _, h := range hs {
		require.True(t, pool.SetLen(h, size))
	}
	return hs
}
