package qpx_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/qpx"
)

func newTable(t testing.TB, o qpx.Options) *qpx.Table {
	t.Helper()
	tb, err := qpx.New(o)
	require.NoError(t, err)
	return tb
}

func TestOpenTranslateClose(t *testing.T) {
	tb := newTable(t, qpx.Options{})
	require.Equal(t, qpx.DefaultSlots, tb.Slots())
	q, l, err := tb.Open(qpx.Context{DestQPN: 0x1234, PKey: 0xffff, NextPSN: 7, ExpectedPSN: 9, Ref: 42})
	require.NoError(t, err)
	require.Equal(t, uint32(qpx.FirstQPN), q, "the counter starts at FirstQPN")
	got, ok := tb.Translate(q)
	require.True(t, ok)
	require.Equal(t, l, got)
	ctx := tb.Context(l)
	require.Equal(t, uint32(0x1234), ctx.DestQPN)
	require.Equal(t, uint64(42), ctx.Ref)
	require.Equal(t, q, tb.QPN(l))
	require.True(t, tb.Live(l))

	require.NoError(t, tb.Close(q))
	require.False(t, tb.Live(l))
	require.ErrorIs(t, tb.Close(q), qpx.ErrUnknown)
	_, ok = tb.Translate(q)
	require.False(t, ok, "a retired number matches nothing")
	_, ok = tb.Translate(0)
	require.False(t, ok)
	_, ok = tb.Translate(0x777777)
	require.False(t, ok)
	s := tb.Stats()
	require.Equal(t, uint64(1), s.Translated)
	require.Equal(t, uint64(1), s.DropRetired)
	require.Equal(t, uint64(2), s.DropUnknown)

	// The slot is free at once, under a new number.
	q2, l2, err := tb.Open(qpx.Context{})
	require.NoError(t, err)
	require.Equal(t, l, l2, "the freed context is reused at once (no Time-Wait)")
	require.NotEqual(t, q, q2, "but never under the retired number")
	require.Zero(t, tb.Context(l2).Ref, "the new QP starts from its own context")
}

func TestFullIsAnErrorNotAnEviction(t *testing.T) {
	const n = 8
	tb := newTable(t, qpx.Options{Slots: n})
	live := map[uint32]int{}
	for i := range n {
		q, l, err := tb.Open(qpx.Context{Ref: uint64(i)})
		require.NoError(t, err)
		live[q] = l
	}
	_, _, err := tb.Open(qpx.Context{})
	require.ErrorIs(t, err, qpx.ErrFull)
	require.Contains(t, err.Error(), "raise Slots")
	_, err = tb.Bind(0x100, qpx.Context{})
	require.ErrorIs(t, err, qpx.ErrFull)
	for q, l := range live {
		got, ok := tb.Lookup(q)
		require.True(t, ok, "live QP %#x evicted", q)
		require.Equal(t, l, got)
	}
	require.Equal(t, uint64(2), tb.Stats().RefusedFull)
}

func TestBind(t *testing.T) {
	tb := newTable(t, qpx.Options{Slots: 4})
	l, err := tb.Bind(0x11, qpx.Context{DestQPN: 0x22})
	require.NoError(t, err)
	got, ok := tb.Translate(0x11)
	require.True(t, ok)
	require.Equal(t, l, got)
	_, err = tb.Bind(0x11, qpx.Context{})
	require.ErrorIs(t, err, qpx.ErrLive)
	for _, bad := range []uint32{0, 1, qpx.MaxQPN, 1 << 24} {
		_, err = tb.Bind(bad, qpx.Context{})
		require.ErrorIs(t, err, qpx.ErrRange)
	}
	require.Equal(t, uint32(qpx.FirstQPN), tb.Next(), "Bind does not move the counter")
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []qpx.Options{{Slots: -1}, {Slots: qpx.MaxSlots + 1}, {Start: 1}, {Start: qpx.MaxQPN}} {
		_, err := qpx.New(o)
		require.Error(t, err, "%+v", o)
		require.Contains(t, err.Error(), "Options.")
	}
}

// Numbers rotate through the whole space: the counter passes LastQPN back
// to FirstQPN, skips a number still live, and reuses a retired number only
// after a full rotation.
func TestRotationWrapsAndSkipsLive(t *testing.T) {
	tb := newTable(t, qpx.Options{Slots: 4})
	held, _, err := tb.Open(qpx.Context{}) // FirstQPN, kept open through the rotation
	require.NoError(t, err)
	require.NoError(t, tb.FastForward(qpx.LastQPN-1))
	seen := map[uint32]bool{}
	var order []uint32
	for range 4 {
		q, _, err := tb.Open(qpx.Context{})
		require.NoError(t, err)
		require.False(t, seen[q])
		seen[q] = true
		order = append(order, q)
		require.NoError(t, tb.Close(q))
	}
	require.Equal(t, []uint32{qpx.LastQPN - 1, qpx.LastQPN, qpx.FirstQPN + 1, qpx.FirstQPN + 2}, order,
		"FirstQPN is live: skipped")
	s := tb.Stats()
	require.Equal(t, uint64(1), s.Rotations)
	require.Equal(t, uint64(1), s.SkippedLive)
	require.True(t, tb.Issued(qpx.LastQPN), "everything was handed out once")
	require.True(t, tb.Issued(0x800000))
	require.False(t, tb.Issued(0))
	_, ok := tb.Translate(qpx.LastQPN)
	require.False(t, ok)
	require.Equal(t, uint64(1), tb.Stats().DropRetired)
	_, ok = tb.Translate(held)
	require.True(t, ok)
}

func TestIssuedBeforeWrap(t *testing.T) {
	tb := newTable(t, qpx.Options{Start: 0x1000})
	for range 3 {
		q, _, err := tb.Open(qpx.Context{})
		require.NoError(t, err)
		require.NoError(t, tb.Close(q))
	}
	require.True(t, tb.Issued(0x1000))
	require.True(t, tb.Issued(0x1002))
	require.False(t, tb.Issued(0x1003))
	require.False(t, tb.Issued(0xfff))
	require.NoError(t, tb.FastForward(0x10))
	require.Equal(t, uint64(1), tb.Stats().Rotations)
	require.True(t, tb.Issued(qpx.LastQPN))
	require.True(t, tb.Issued(0xf))
	require.False(t, tb.Issued(0x10))
	require.False(t, tb.Issued(0xfff))
	require.NoError(t, tb.FastForward(0x1000))
	require.True(t, tb.Issued(0xfff))
	require.True(t, tb.Issued(0x10))
	require.Error(t, tb.FastForward(1))
}

func TestPSN(t *testing.T) {
	for _, c := range []struct {
		exp, psn uint32
		want     qpx.PSNOrder
	}{
		{5, 5, qpx.PSNInOrder},
		{5, 6, qpx.PSNAhead},
		{5, 4, qpx.PSNBehind},
		{qpx.MaxQPN, 0, qpx.PSNAhead},
		{0, qpx.MaxQPN, qpx.PSNBehind},
		{0, 1<<23 - 1, qpx.PSNAhead},
		{0, 1 << 23, qpx.PSNBehind},
	} {
		require.Equal(t, c.want, qpx.ComparePSN(c.exp, c.psn), "%d vs %d", c.psn, c.exp)
	}
	ctx := qpx.Context{ExpectedPSN: qpx.MaxQPN}
	require.Equal(t, qpx.PSNInOrder, ctx.CheckRx(qpx.MaxQPN, 1))
	require.Equal(t, uint32(0), ctx.ExpectedPSN)
	require.Equal(t, qpx.PSNAhead, ctx.CheckRx(3, 4))
	require.Equal(t, uint32(7), ctx.ExpectedPSN)
	require.Equal(t, qpx.PSNBehind, ctx.CheckRx(3, 1))
	require.Equal(t, uint32(7), ctx.ExpectedPSN)
	require.Equal(t, qpx.PSNInOrder, ctx.CheckTx(0, 1))
	require.Equal(t, "behind", qpx.PSNBehind.String())
}

func TestTranslateBurst(t *testing.T) {
	tb := newTable(t, qpx.Options{Slots: 16})
	var qs []uint32
	for range 10 {
		q, _, err := tb.Open(qpx.Context{})
		require.NoError(t, err)
		qs = append(qs, q)
	}
	require.NoError(t, tb.Close(qs[3]))
	keys := append([]uint32{0, 0xabcdef}, qs...)
	locals := make([]int32, len(keys))
	found := tb.TranslateBurst(keys, locals)
	for i, k := range keys {
		l, ok := tb.Lookup(k)
		require.Equal(t, ok, found&(1<<i) != 0, "key %#x", k)
		if ok {
			require.Equal(t, int32(l), locals[i])
		} else {
			require.Equal(t, int32(-1), locals[i])
		}
	}
	s := tb.Stats()
	require.Equal(t, uint64(9), s.Translated)
	require.Equal(t, uint64(1), s.DropRetired)
	require.Equal(t, uint64(2), s.DropUnknown)
}

func TestNoAllocations(t *testing.T) {
	tb := newTable(t, qpx.Options{Slots: 64})
	keys := make([]uint32, 32)
	locals := make([]int32, 32)
	allocs := testing.AllocsPerRun(1000, func() {
		q, l, err := tb.Open(qpx.Context{})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := tb.Translate(q); !ok || got != l {
			t.Fatal("lost")
		}
		tb.Context(l).CheckRx(0, 1)
		for i := range keys {
			keys[i] = q + uint32(i)
		}
		tb.TranslateBurst(keys, locals)
		if err := tb.Close(q); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
