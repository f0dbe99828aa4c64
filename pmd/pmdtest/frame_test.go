package pmdtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// TestFrameCheck makes sure the suite's frame check catches what it is
// there to catch; a check that passes everything would make Run vacuous.
func TestFrameCheck(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "frames", Frames: 64})
	require.NoError(t, err)
	defer pool.Close()
	fm := frameMaker{run: 7}
	hs := make([]mbuf.Handle, 1)
	require.Equal(t, 1, pool.AllocBulk(hs))
	defer pool.Free(hs)
	h := hs[0]
	fm.build(pool, h, 42, 3, 200)

	r, ours, err := fm.check(pool.Data(h))
	require.True(t, ours)
	require.NoError(t, err)
	require.Equal(t, received{seq: 42, queue: 3, size: 200}, r)

	_, ours, _ = (&frameMaker{run: 8}).check(pool.Data(h))
	require.False(t, ours, "another run's frame is foreign")
	_, ours, _ = fm.check(pool.Data(h)[:20])
	require.False(t, ours, "too short to be ours")

	data := pool.Data(h)
	data[150] ^= 1
	_, ours, err = fm.check(data)
	require.True(t, ours)
	require.ErrorContains(t, err, "byte 150")
	data[150] ^= 1

	_, _, err = fm.check(data[:199])
	require.ErrorContains(t, err, "199 bytes received, 200 sent")

	fm.build(pool, h, 43, 3, 200)
	data = pool.Data(h)
	other := make([]byte, len(data))
	copy(other, data)
	fm.build(pool, h, 42, 3, 200)
	copy(other[offSeq:offSeq+4], pool.Data(h)[offSeq:offSeq+4])
	_, _, err = fm.check(other)
	require.Error(t, err, "a payload from another sequence number is caught")
}
