package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// TestGlobalQPNs: with the transport's global QP numbers on, pushes and a
// pull over a lossy fabric (full-size segments, so the QPN extension's
// bytes are accounted for) complete byte-exact; the host finds each side's
// connection by its number through the CAM, and the number is retired
// when the connection closes.
func TestGlobalQPNs(t *testing.T) {
	p := newPair(t, 11, "loss=2%,reorder=5%/30us,dup=1%", func(a, b *Options) {
		a.Transport.QPN = rt.QPNOptions{Enabled: true}
		b.Transport.QPN = rt.QPNOptions{Enabled: true}
	})
	c := p.connect(ConnOptions{Ordered: true})
	q := c.QPN()
	require.NotZero(t, q)
	require.Same(t, c, p.a.ConnByQPN(q))
	require.NotZero(t, c.PeerQPN())

	const size = 100 << 10
	src, dst, mem := pattern(3, size), make([]byte, size), make([]byte, 2*size)
	copy(mem[size:], pattern(4, size))
	ra, err := p.a.Register(src, 0)
	require.NoError(t, err)
	rd, err := p.a.Register(dst, 0)
	require.NoError(t, err)
	rb, err := p.b.Register(mem, RemoteWrite|RemoteRead)
	require.NoError(t, err)
	_, err = c.Push(Op{Local: ra, Len: size, Remote: wire.RegionRef{Key: rb.Key}, Tag: 1})
	require.NoError(t, err)
	_, err = c.Pull(Op{Local: rd, Len: size, Remote: wire.RegionRef{Key: rb.Key, Addr: size}, Tag: 2})
	require.NoError(t, err)
	p.run(func() bool { return len(p.cqA) == 2 }, 5*time.Second)
	for _, cp := range p.cqA {
		require.Equal(t, StatusOK, cp.Status)
	}
	require.Equal(t, src, mem[:size])
	require.Equal(t, mem[size:], dst)

	// The target's side of the connection, by the number the initiator
	// learned in the setup.
	tc := p.b.ConnByQPN(c.PeerQPN())
	require.NotNil(t, tc)
	require.Equal(t, q, tc.PeerQPN())
	tq := tc.QPN()

	sa, sb := p.a.QPNStats(), p.b.QPNStats()
	require.Zero(t, sa.Dropped()+sb.Dropped(), "%v / %v", sa, sb)
	require.NotZero(t, sb.CAM.Translated)

	require.NoError(t, c.Close())
	p.run(func() bool { return p.a.ConnByQPN(q) == nil && p.b.ConnByQPN(tq) == nil }, 5*time.Second)
	require.Zero(t, c.QPN(), "gone: its number is retired")
}
