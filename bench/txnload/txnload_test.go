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
	"github.com/peregrine-net/peregrine/pmd/fabric"
)

func TestLoadCompletesAndVerifiesThroughLossyFabric(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "txnload", Frames: 16384})
	require.NoError(t, err)
	defer pool.Close()
	prof, err := fabric.ParseProfile("loss=1%,reorder=2%/20us,delay=5us")
	require.NoError(t, err)
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{AtoB: prof, BtoA: prof, Seed: 3})
	require.NoError(t, err)
	clk := clock.NewVirtual(0)
	ipA, ipB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	a, err := txn.New(txn.Options{Transport: rt.Options{Port: pa, Pool: pool, Clock: clk, LocalIP: ipA, Seed: 1}})
	require.NoError(t, err)
	var l *Load
	b, err := txn.New(txn.Options{Transport: rt.Options{Port: pb, Pool: pool, Clock: clk, LocalIP: ipB, Seed: 2},
		OnRequest: func(r *txn.Request) { l.CheckRequest(r) }})
	require.NoError(t, err)
	opts := Options{Initiator: a, Target: b, Peer: rt.PeerAddr{MAC: [6]byte(pb.Info().MAC), IP: ipB}, Count: 400, Conns: 4}
	l, err = New(opts, TargetMemory(32, []int{512, 4 << 10, 64 << 10}))
	require.NoError(t, err)
	for l.Stats().Completed+l.Stats().Failed < 400 {
		now := clk.Now()
		if l.Poll(now)+a.Poll(now)+fab.Poll(now)+b.Poll(now) == 0 {
			clk.Advance(time.Microsecond)
		}
		require.Less(t, clk.Now(), clock.Time(10*time.Second))
	}
	st := l.Stats()
	require.Equal(t, uint64(400), st.Completed)
	require.Zero(t, st.BadData)
	require.Equal(t, uint64(300), st.Checked, "the target checked every push (every 4th operation is a pull)")
	require.Zero(t, st.OutOfOrder)
	require.Zero(t, st.Failed)
	require.Positive(t, a.Transport().Stats().TxRetransmit+a.Transport().Stats().TxEarlyRetransmit, "the fabric lost something")
	now := clk.Now()
	a.Stop(now)
	b.Stop(now)
	fab.Stop(now)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, fab.Close())
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
