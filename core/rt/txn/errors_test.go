package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestBadRemoteRegionFailsAndWritesNothing(t *testing.T) {
	p := newPair(t, 3, "", nil)
	c := p.connect(ConnOptions{Ordered: true})
	src := pattern(5, 64<<10)
	ra, err := p.a.Register(src, 0)
	require.NoError(t, err)
	memB := make([]byte, 16<<10)
	rb, err := p.b.Register(memB, RemoteWrite) // no RemoteRead
	require.NoError(t, err)

	ops := []struct {
		kind OpKind
		op   Op
		want Status
		why  Refusal
	}{
		{OpPush, Op{Local: ra, Len: 100, Remote: wire.RegionRef{Key: rb.Key, Addr: 0}, Tag: 1}, StatusOK, RefusalUnspecified},
		{OpPush, Op{Local: ra, Len: 100, Remote: wire.RegionRef{Key: 0x777, Addr: 0}, Tag: 2}, StatusRemoteAccess, RefusalUnregistered},
		{OpPush, Op{Local: ra, Len: 32 << 10, Remote: wire.RegionRef{Key: rb.Key, Addr: 0}, Tag: 3}, StatusRemoteAccess, RefusalTooSmall},       // solicited
		{OpPush, Op{Local: ra, Len: 8 << 10, Remote: wire.RegionRef{Key: rb.Key, Addr: 10 << 10}, Tag: 4}, StatusRemoteAccess, RefusalTooSmall}, // runs past the end
		{OpPull, Op{Local: ra, Len: 100, Remote: wire.RegionRef{Key: rb.Key, Addr: 0}, Tag: 5}, StatusRemoteAccess, RefusalAccess},              // no read access
		{OpPush, Op{Local: ra, LocalAddr: 100, Len: 100, Remote: wire.RegionRef{Key: rb.Key, Addr: 100}, Tag: 6}, StatusOK, RefusalUnspecified},
	}
	for _, o := range ops {
		var err error
		if o.kind == OpPush {
			_, err = c.Push(o.op)
		} else {
			_, err = c.Pull(o.op)
		}
		require.NoError(t, err)
	}
	p.run(func() bool { return len(p.cqA) == len(ops) }, time.Second)
	for i, cp := range p.cqA {
		require.Equal(t, ops[i].op.Tag, cp.Tag, "ordered completions")
		require.Equal(t, ops[i].want, cp.Status, "op %d", cp.Tag)
		require.Equal(t, ops[i].why, cp.Refusal, "op %d: the target's reason crosses the wire", cp.Tag)
	}
	require.Equal(t, src[:200], memB[:200])
	require.Equal(t, make([]byte, len(memB)-200), memB[200:], "nothing written by the refused pushes")
	st := p.b.Stats()
	require.GreaterOrEqual(t, st.RefusedUnregistered, uint64(1))
	require.GreaterOrEqual(t, st.RefusedAccess, uint64(1))
	require.GreaterOrEqual(t, st.RefusedTooSmall, uint64(2))
	require.Len(t, p.reqB, 2, "only the good requests reach the ULP")
	require.Equal(t, StateOK(t, p), true)
}

// StateOK checks that both transports are established and clean.
func StateOK(t *testing.T, p *pair) bool {
	t.Helper()
	require.Zero(t, p.a.Transport().Stats().Internal)
	require.Zero(t, p.b.Transport().Stats().Internal)
	return true
}

func TestLocalRegionAndBusyErrors(t *testing.T) {
	p := newPair(t, 4, "", func(a, b *Options) { a.MaxOps = 4 })
	c := p.connect(ConnOptions{})
	src := make([]byte, 1000)
	ra, err := p.a.Register(src, 0)
	require.NoError(t, err)
	_, err = c.Push(Op{Local: ra, LocalAddr: 900, Len: 200})
	require.ErrorIs(t, err, ErrLocalRegion)
	require.ErrorContains(t, err, "too small")
	_, err = c.Push(Op{Local: Region{Key: 99}, Len: 10})
	require.ErrorIs(t, err, ErrLocalRegion)
	require.ErrorContains(t, err, "not registered")

	memB := make([]byte, 1000)
	rb, err := p.b.Register(memB, RemoteWrite)
	require.NoError(t, err)
	for i := range 4 {
		_, err := c.Push(Op{Local: ra, Len: 10, Remote: wire.RegionRef{Key: rb.Key}, Tag: uint64(i)})
		require.NoError(t, err)
	}
	_, err = c.Push(Op{Local: ra, Len: 10, Remote: wire.RegionRef{Key: rb.Key}})
	require.ErrorIs(t, err, ErrBusy)
	p.run(func() bool { return len(p.cqA) == 4 }, time.Second)
	_, err = c.Push(Op{Local: ra, Len: 10, Remote: wire.RegionRef{Key: rb.Key}})
	require.NoError(t, err, "room again after completions drained")
	p.run(func() bool { return len(p.cqA) == 5 }, time.Second)
}

func TestPeerRestartFailsEveryOutstandingOp(t *testing.T) {
	p := newPair(t, 5, "", nil)
	c := p.connect(ConnOptions{Ordered: true})
	src := pattern(9, 1<<20)
	ra, err := p.a.Register(src, 0)
	require.NoError(t, err)
	memB := make([]byte, 1<<20)
	rb, err := p.b.Register(memB, RemoteWrite)
	require.NoError(t, err)
	for i := range 16 {
		_, err := c.Push(Op{Local: ra, LocalAddr: uint64(i) << 16, Len: 64 << 10, Remote: wire.RegionRef{Key: rb.Key, Addr: uint64(i) << 16}, Tag: uint64(i)})
		require.NoError(t, err)
	}
	// Let a few complete, then B loses all its state.
	p.run(func() bool { return len(p.cqA) >= 2 }, time.Second)
	p.b.Stop(p.clk.Now())
	p.run(func() bool { return len(p.cqA) == 16 }, 10*time.Second)
	failed := 0
	for i, cp := range p.cqA {
		require.Equal(t, uint64(i), cp.Tag)
		if cp.Status != StatusOK {
			failed++
			require.Equal(t, StatusConnFailed, cp.Status)
		}
	}
	require.Positive(t, failed)
	require.Zero(t, p.a.Outstanding())
	require.Zero(t, p.a.Transport().Outstanding(), "nothing left in the retransmission engine")
}
