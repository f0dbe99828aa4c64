package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// TestReorderingIsNotLoss: over a fabric that loses nothing but holds
// some frames back (reordering, sprayed paths of different delays), every
// early resend is one the receiver had already. The receiver reports each
// copy (a duplicate report in its ACK) and the sender widens its
// reordering window by what it learns, so after the first few the
// resends stop: copies stay a small fraction of the frames held back.
// Without reports (the transport before them) the window keeps wearing
// down between bursts and the copies keep coming.
func TestReorderingIsNotLoss(t *testing.T) {
	run := func(noDup bool, seed uint64) (copies, held uint64) {
		p := newPair(t, seed, "delay=20us,reorder=1%/150us,paths=4,path-rate=1gbit,path-delay=0/2us/5us/10us", func(a, b *Options) {
			for _, o := range []*Options{a, b} {
				o.Transport.NoDupReports = noDup
				o.Transport.MinRTO = 5 * time.Millisecond
				o.SolicitThreshold = -1
				o.IOI = ioi.Config{Mode: ioi.ModeIOI}
			}
		})
		const size, n = 1 << 20, 40
		ls, err := p.a.Register(pattern(seed, size), 0)
		require.NoError(t, err)
		rr, err := p.b.Register(make([]byte, size), RemoteWrite)
		require.NoError(t, err)
		c := p.connect(ConnOptions{})
		posted := 0
		p.run(func() bool {
			for posted < n && posted-len(p.cqA) < 8 {
				_, err := c.Push(Op{Local: ls, Len: size, Remote: wire.RegionRef{Key: rr.Key}})
				if err != nil {
					break
				}
				posted++
			}
			return len(p.cqA) == n
		}, 10*time.Second)
		for _, cp := range p.cqA {
			require.Equal(t, StatusOK, cp.Status)
		}
		bs := p.b.Transport().Stats()
		fs := p.fab.(*fabric.Fabric).Stats()
		return bs.RxDuplicate + bs.RxStalePSN, fs.AtoB.Reordered + fs.BtoA.Reordered
	}
	for seed := uint64(1); seed <= 3; seed++ {
		copies, held := run(false, seed)
		before, _ := run(true, seed)
		t.Logf("seed %d: %d frames held back; copies the receiver had already: %d with duplicate reports, %d without", seed, held, copies, before)
		require.LessOrEqual(t, copies, held/64, "seed %d: reordering is not loss", seed)
	}
}
