package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestWholePushesSkipTheReorderEngine: pushes that each come whole in one
// packet, in order, to a target holding no other request are placed and
// delivered — in RSN order on an ordered connection — without an entry in
// the target's reorder engine or a transaction context; a multi-packet
// push still takes both.
func TestWholePushesSkipTheReorderEngine(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(map[bool]string{false: "unordered", true: "ordered"}[ordered], func(t *testing.T) {
			p := newPair(t, 5, "", nil)
			c := p.connect(ConnOptions{Ordered: ordered})
			src := pattern(3, 64<<10)
			ra, _ := p.a.Register(src, 0)
			dst := make([]byte, 64<<10)
			rb, _ := p.b.Register(dst, RemoteWrite)
			const n = 64
			before, ctxs := p.b.ro.Stats().Registered, contextsTaken(p.b)
			for k := range n {
				_, err := c.Push(Op{Local: ra, LocalAddr: uint64(k * 64), Len: 64, Remote: wire.RegionRef{Key: rb.Key, Addr: uint64(k * 64)}})
				require.NoError(t, err)
			}
			p.run(func() bool { return len(p.cqA) == n }, 100*time.Millisecond)
			for _, cq := range p.cqA {
				require.Equal(t, StatusOK, cq.Status)
			}
			require.Equal(t, src[:n*64], dst[:n*64])
			require.Len(t, p.reqB, n)
			for k, r := range p.reqB {
				require.Equal(t, uint32(k), r.RSN-p.reqB[0].RSN, "delivery order")
				require.Equal(t, src[k*64:k*64+64], r.Data)
			}
			require.Equal(t, before, p.b.ro.Stats().Registered, "reorder entries registered for whole pushes")
			require.Zero(t, p.b.ro.Held(spacePeerRSN))
			require.Equal(t, ctxs, contextsTaken(p.b), "target contexts taken for whole pushes")

			big := p.b.Segment() + 1
			_, err := c.Push(Op{Local: ra, Len: big, Remote: wire.RegionRef{Key: rb.Key}})
			require.NoError(t, err)
			p.run(func() bool { return len(p.cqA) == n+1 }, 100*time.Millisecond)
			require.Equal(t, StatusOK, p.cqA[n].Status)
			require.Equal(t, src[:big], dst[:big])
			require.Equal(t, before+1, p.b.ro.Stats().Registered, "a multi-packet push is registered")
			require.Equal(t, ctxs+1, contextsTaken(p.b), "a multi-packet push takes a context")
		})
	}
}

// contextsTaken counts the transaction contexts e has ever handed out:
// each allocation moves its context's generation on by one.
func contextsTaken(e *Endpoint) uint64 {
	var n uint64
	for i := range e.xacts {
		n += uint64(e.xacts[i].gen)
	}
	return n
}
