package txn

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/wire"
)

// TestInOrderLossKeepsEveryOp: with every data packet in order (one
// path), the transport's whole window outstanding and loss on the path,
// packets far past a lost one are not loss: the receiver buffers them
// (its in-order window covers the transport's), and a refusal for being
// too far ahead never spends the retry budget. Every push completes OK,
// its bytes in place. Generalised over both ways data goes in order:
// ModeInOrder, and a non-idempotent operation under IOI; pushes and pulls.
func TestInOrderLossKeepsEveryOp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   ioi.Mode
		nonIdm bool
		pull   bool
		window int
	}{
		{"inorder-push-128", ioi.ModeInOrder, false, false, 128},
		{"inorder-pull-128", ioi.ModeInOrder, false, true, 128},
		{"nonidempotent-push-256", ioi.ModeIOI, true, false, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				p := newPair(t, seed, "loss=2%,delay=10us,rate=10gbit", func(a, b *Options) {
					for _, o := range []*Options{a, b} {
						o.IOI = ioi.Config{Mode: tc.mode}
						o.SolicitThreshold = -1
						o.Transport.WindowSize = tc.window
						o.Transport.MaxOutstanding = tc.window
						o.Transport.MinRTO = time.Millisecond
					}
				})
				const size, n = 1 << 20, 6
				src := pattern(seed, size)
				ls, err := p.a.Register(src, 0)
				require.NoError(t, err)
				dst := make([]byte, size)
				ld, err := p.a.Register(dst, 0)
				require.NoError(t, err)
				tgt := make([]byte, size)
				copy(tgt, src)
				rr, err := p.b.Register(tgt, RemoteWrite|RemoteRead)
				require.NoError(t, err)
				c := p.connect(ConnOptions{Ordered: true})
				for range n {
					op := Op{Local: ls, Len: size, Remote: wire.RegionRef{Key: rr.Key}, NonIdempotent: tc.nonIdm}
					if tc.pull {
						op.Local = ld
						_, err = c.Pull(op)
					} else {
						_, err = c.Push(op)
					}
					require.NoError(t, err)
				}
				p.run(func() bool { return len(p.cqA) == n }, 30*time.Second)
				for i, cp := range p.cqA {
					require.Equal(t, StatusOK, cp.Status, "seed %d op %d: %v", seed, i, cp)
				}
				if tc.pull {
					require.True(t, bytes.Equal(dst, src), "seed %d: pulled bytes intact", seed)
				} else {
					require.True(t, bytes.Equal(tgt, src), "seed %d: pushed bytes intact", seed)
				}
				st := p.b.IOIStats()
				if tc.pull {
					st = p.a.IOIStats()
				}
				require.Zero(t, st.Refused, "seed %d: nothing within the transport's window is refused as too far ahead", seed)
				require.Zero(t, p.a.Transport().Stats().Abandoned, "seed %d", seed)
			}
		})
	}
}
