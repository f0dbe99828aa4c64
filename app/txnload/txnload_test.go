package txnload

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
)

// pair is an initiator and a target joined by an in-process fabric on a
// virtual clock; its load is set by the test.
type pair struct {
	clk  *clock.Virtual
	a, b *txn.Endpoint
	fab  *fabric.Fabric
	peer rt.PeerAddr
	l    *Load
}

func newPair(t *testing.T, profile string) *pair {
	t.Helper()
	p := &pair{}
	p.clk, p.a, p.b, p.fab, p.peer = linked(t, profile, txn.Options{}, txn.Options{OnRequest: func(r *txn.Request) { p.l.CheckRequest(r) }})
	return p
}

// linked makes an initiator (options a) and a target (options b, whose
// Transport field it fills) joined by an in-process fabric of profile on
// a virtual clock, stopped and closed when the test ends.
func linked(t *testing.T, profile string, a, b txn.Options) (*clock.Virtual, *txn.Endpoint, *txn.Endpoint, *fabric.Fabric, rt.PeerAddr) {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: "txnload", Frames: 16384})
	require.NoError(t, err)
	t.Cleanup(func() { pool.Close() })
	prof, err := fabric.ParseProfile(profile)
	require.NoError(t, err)
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{AtoB: prof, BtoA: prof, Seed: 3})
	require.NoError(t, err)
	clk := clock.NewVirtual(0)
	ipA, ipB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	a.Transport = rt.Options{Port: pa, Pool: pool, Clock: clk, LocalIP: ipA, Seed: 1}
	b.Transport = rt.Options{Port: pb, Pool: pool, Clock: clk, LocalIP: ipB, Seed: 2}
	ea, err := txn.New(a)
	require.NoError(t, err)
	eb, err := txn.New(b)
	require.NoError(t, err)
	t.Cleanup(func() {
		now := clk.Now()
		ea.Stop(now)
		eb.Stop(now)
		fab.Stop(now)
		require.NoError(t, ea.Close())
		require.NoError(t, eb.Close())
		require.NoError(t, fab.Close())
	})
	return clk, ea, eb, fab, rt.PeerAddr{MAC: [6]byte(pb.Info().MAC), IP: ipB}
}

// run polls everything until n operations ended.
func (p *pair) run(t *testing.T, n uint64) {
	t.Helper()
	for p.l.Stats().Completed+p.l.Stats().Failed < n {
		now := p.clk.Now()
		if p.l.Poll(now)+p.a.Poll(now)+p.fab.Poll(now)+p.b.Poll(now) == 0 {
			p.clk.Advance(time.Microsecond)
		}
		require.Less(t, p.clk.Now(), clock.Time(10*time.Second))
	}
}

func TestLoadCompletesAndVerifiesThroughLossyFabric(t *testing.T) {
	p := newPair(t, "loss=1%,reorder=2%/20us,delay=5us")
	var err error
	p.l, err = New(Options{Initiator: p.a, Target: p.b, Peer: p.peer, Count: 400, Conns: 4}, TargetMemory(32, []int{512, 4 << 10, 64 << 10}))
	require.NoError(t, err)
	p.run(t, 400)
	st := p.l.Stats()
	require.Equal(t, uint64(400), st.Completed)
	require.Zero(t, st.BadData)
	require.Equal(t, uint64(300), st.Checked, "the target checked every push (every 4th operation is a pull)")
	require.Zero(t, st.OutOfOrder)
	require.Zero(t, st.Failed)
	require.Positive(t, p.a.Transport().Stats().TxRetransmit+p.a.Transport().Stats().TxEarlyRetransmit, "the fabric lost something")
}

func TestVerifyCatchesWrongBytes(t *testing.T) {
	push := make([]byte, 1000)
	stamp(push, 7)
	require.True(t, PushIntact(push))
	other := make([]byte, 1000)
	stamp(other, 8)
	copy(push[512:768], other[512:768]) // a segment of another operation
	require.False(t, PushIntact(push))

	l := &Load{slot: 1024, src: make([]byte, 2048), dst: make([]byte, 2048), opts: Options{Window: 2}}
	pull := &slotState{kind: txn.OpPull, size: 1000}
	for i := range 1000 {
		l.dst[i] = pullByte(i)
	}
	require.True(t, l.verify(pull, 0))
	l.dst[999] ^= 1
	require.False(t, l.verify(pull, 0))
}

// An initiator that believes the target's region is larger than it is, or
// names a key the target never registered, gets error completions, counted
// by the target's reason.
func TestFailuresCountedByCause(t *testing.T) {
	sizes := []int{4 << 10}
	for _, c := range []struct {
		name                   string
		key                    func(txn.Region) uint32
		tooSmall, unregistered bool
	}{
		{"too small", func(r txn.Region) uint32 { return r.Key }, true, false},
		{"unregistered", func(r txn.Region) uint32 { return r.Key + 7 }, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, "")
			// The target registers room for a window of 2; the load uses 8.
			r, err := p.b.Register(TargetMemory(2, sizes), txn.RemoteWrite|txn.RemoteRead)
			require.NoError(t, err)
			claimed := txn.Region{Key: c.key(r), Len: TargetMemoryLen(8, sizes)}
			p.l, err = New(Options{Initiator: p.a, Peer: p.peer, TargetRegion: claimed, Window: 8, Sizes: sizes, Count: 64, PullEvery: -1}, nil)
			require.NoError(t, err)
			p.run(t, 64)
			st := p.l.Stats()
			require.Positive(t, st.Failed)
			require.Equal(t, st.Failed, st.RefusedTooSmall+st.RefusedUnregistered, "%+v", st)
			if c.tooSmall {
				require.Positive(t, st.Completed, "the slots inside the region still work")
				require.Equal(t, st.Failed, st.RefusedTooSmall)
			}
			if c.unregistered {
				require.Zero(t, st.Completed)
				require.Equal(t, st.Failed, st.RefusedUnregistered)
			}
		})
	}
}
