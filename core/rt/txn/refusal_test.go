package txn

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
)

// A connection that waits for room in its window (ErrWindowFull) must
// reopen when its last outstanding packets are refused: the target NACKs
// them, resyncs take their places, and the resyncs' ACKs free the window
// without any packet being acknowledged as placed. Before EventResynced
// such a connection waited forever for an ACK (6 of these 12 seeds left
// operations outstanding for good). Half of the pushes aim past
// the end of the target's region; the fabric's jitter (far above the
// Swift target) keeps windows small and full.
func TestRefusedPacketsReopenAFullWindow(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			sp := swift.DefaultParams()
			p := newPair(t, seed, "delay=10us,jitter=2ms", func(a, b *Options) {
				a.Congestion, b.Congestion = &sp, &sp
				a.Transport.MinRTO, b.Transport.MinRTO = time.Millisecond, time.Millisecond
			})
			const size, slots = 64 << 10, 128
			tgt, err := p.b.Register(make([]byte, slots/2*size), RemoteWrite)
			require.NoError(t, err)
			src, err := p.a.Register(make([]byte, slots*size), 0)
			require.NoError(t, err)
			var conns []*Conn
			for i := range 4 {
				conns = append(conns, p.connect(ConnOptions{Ordered: i%2 == 0}))
			}
			free := make([]int, 0, slots)
			for s := slots - 1; s >= 0; s-- {
				free = append(free, s)
			}
			posted, ended := 0, 0
			post := func() {
				for len(free) > 0 {
					s := free[len(free)-1]
					op := Op{Local: src, LocalAddr: uint64(s * size), Len: size, Remote: wire.RegionRef{Key: tgt.Key, Addr: uint64(s * size)}, Tag: uint64(s)}
					if _, err := conns[posted%len(conns)].Push(op); err != nil {
						return
					}
					free = free[:len(free)-1]
					posted++
				}
			}
			reap := func() {
				for _, c := range p.cqA {
					require.True(t, c.Status == StatusOK || c.Status == StatusRemoteAccess && c.Refusal == RefusalTooSmall, "seed %d: %+v", seed, c)
					free = append(free, int(c.Tag))
					ended++
				}
				p.cqA = p.cqA[:0]
			}
			end := p.clk.Now().Add(200 * time.Millisecond)
			p.runFor(func() bool { reap(); post(); return p.clk.Now() >= end }, time.Second)
			drained := p.runFor(func() bool { reap(); return ended == posted }, 30*time.Second)
			require.True(t, drained, "seed %d: %d of %d operations still outstanding\nA:\n%s\nB:\n%s", seed, posted-ended, posted, p.a.dump(), p.b.dump())
			st := p.a.Stats()
			require.Positive(t, st.Completed)
			require.Positive(t, st.CompletedErr, "some pushes were refused")
		})
	}
}
