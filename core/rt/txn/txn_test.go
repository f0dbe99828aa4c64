package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestPushAndPullByteExact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile string
	}{
		{"clean", ""},
		{"lossy", "loss=2%,reorder=5%/30us,dup=1%,delay=5us,jitter=2us"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, 7, tc.profile, nil)
			c := p.connect(ConnOptions{Ordered: true})

			const size = 300 << 10
			srcA := pattern(1, size)
			dstA := make([]byte, size)
			memB := make([]byte, 2*size)
			copy(memB[size:], pattern(2, size))
			ra, err := p.a.Register(srcA, 0)
			require.NoError(t, err)
			rd, err := p.a.Register(dstA, 0)
			require.NoError(t, err)
			rb, err := p.b.Register(memB, RemoteWrite|RemoteRead)
			require.NoError(t, err)

			// A small unsolicited push, a large solicited one, a pull.
			_, err = c.Push(Op{Local: ra, Len: 1000, Remote: wire.RegionRef{Key: rb.Key, Addr: 0}, Tag: 1})
			require.NoError(t, err)
			_, err = c.Push(Op{Local: ra, LocalAddr: 1000, Len: size - 1000, Remote: wire.RegionRef{Key: rb.Key, Addr: 1000}, Tag: 2})
			require.NoError(t, err)
			_, err = c.Pull(Op{Local: rd, Len: size, Remote: wire.RegionRef{Key: rb.Key, Addr: size}, Tag: 3})
			require.NoError(t, err)

			p.run(func() bool { return len(p.cqA) == 3 }, time.Second)
			for i, cp := range p.cqA {
				require.Equal(t, StatusOK, cp.Status, "completion %d", i)
				require.Equal(t, uint64(i+1), cp.Tag, "completions in posting order")
			}
			require.Equal(t, srcA, memB[:size], "pushed bytes")
			require.Equal(t, memB[size:], dstA, "pulled bytes")
			require.Len(t, p.reqB, 3)
			for i, r := range p.reqB {
				require.Equal(t, uint32(i), r.RSN, "requests in RSN order")
			}
			st := p.a.Stats()
			require.Equal(t, uint64(1), st.Solicited)
			require.Equal(t, uint64(1), st.Unsolicited)
			require.Equal(t, uint64(1), p.b.Stats().GrantsIssued)
			require.Zero(t, p.a.Outstanding())
			p.run(func() bool { return p.b.Outstanding() == 0 }, time.Second)
		})
	}
}
