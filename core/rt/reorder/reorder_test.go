package reorder

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/cam"
)

func newEngine(t testing.TB, capacity int) *Engine {
	t.Helper()
	e, err := New(Options{Capacity: capacity, Seed: 42})
	require.NoError(t, err)
	return e
}

// drain pops (cid, sp) until the head is missing or pending and returns the
// sequence numbers released, checking each index against want.
func drain(t *testing.T, e *Engine, cid uint32, sp Space, base *uint32, idxOf map[uint32]uint32) []uint32 {
	t.Helper()
	var out []uint32
	for {
		seq := *base
		idx, ok := e.PopReady(cid, sp, base)
		if !ok {
			require.Equal(t, seq, *base, "a failed PopReady moved the base")
			return out
		}
		require.Equal(t, seq+1, *base, "PopReady must increment the base by one")
		if idxOf != nil {
			require.Equal(t, idxOf[seq], idx, "seq %d released with another index", seq)
		}
		require.False(t, e.Ready(idx), "released index %d still ready", idx)
		out = append(out, seq)
	}
}

func registerRange(t *testing.T, e *Engine, cid uint32, sp Space, from uint32, n int) map[uint32]uint32 {
	t.Helper()
	idxOf := map[uint32]uint32{}
	for i := range n {
		seq := from + uint32(i)
		idx, err := e.Register(cid, sp, seq)
		require.NoError(t, err)
		require.Less(t, idx, uint32(e.Cap()))
		require.False(t, e.Ready(idx), "a new registration is pending")
		idxOf[seq] = idx
	}
	return idxOf
}

func seqRange(from uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

func TestNewValidatesCapacity(t *testing.T) {
	for _, c := range []int{0, -1, cam.MaxCapacity + 1} {
		_, err := New(Options{Capacity: c})
		require.Error(t, err, "capacity %d", c)
		require.Contains(t, err.Error(), "Options.Capacity")
	}
	e, err := New(Options{Capacity: 1})
	require.NoError(t, err)
	require.Equal(t, 1, e.Cap())
	require.Equal(t, 0, e.Len())
}

func TestInOrderArrivals(t *testing.T) {
	e := newEngine(t, 16)
	idxOf := registerRange(t, e, 7, SpaceRSN, 0, 10)
	var base uint32
	var released []uint32
	for seq := range uint32(10) {
		idx, ok := e.MarkReady(base, 7, SpaceRSN, seq)
		require.True(t, ok)
		require.Equal(t, idxOf[seq], idx)
		require.True(t, e.Ready(idx))
		got := drain(t, e, 7, SpaceRSN, &base, idxOf)
		require.Equal(t, []uint32{seq}, got, "an in-order arrival releases exactly itself")
		released = append(released, got...)
	}
	require.Equal(t, seqRange(0, 10), released)
	require.Equal(t, uint32(10), base)
	require.Zero(t, e.Len())
	require.Equal(t, Stats{Registered: 10, Released: 10}, e.Stats())
}

func TestOutOfOrderArrivalsReleaseInOrderOnce(t *testing.T) {
	arrival := []uint32{3, 1, 0, 2, 7, 5, 4, 9, 6, 8}
	e := newEngine(t, 16)
	idxOf := registerRange(t, e, 1, SpaceRSN, 0, 10)
	var base uint32
	var released []uint32
	arrived := map[uint32]bool{}
	for _, seq := range arrival {
		_, ok := e.MarkReady(base, 1, SpaceRSN, seq)
		require.True(t, ok)
		arrived[seq] = true
		released = append(released, drain(t, e, 1, SpaceRSN, &base, idxOf)...)
		// The base is exactly the first sequence number not yet arrived.
		want := uint32(0)
		for arrived[want] {
			want++
		}
		require.Equal(t, want, base, "after arrival of %d", seq)
	}
	require.Equal(t, seqRange(0, 10), released)
	require.Zero(t, e.Len())
	st := e.Stats()
	require.Equal(t, uint64(10), st.Released)
	require.Equal(t, uint64(5), st.Waits, "3, 1, 7, 5 and 9 arrive ahead of the base")
	// Released transactions are gone: a late duplicate matches nothing.
	_, ok := e.MarkReady(base, 1, SpaceRSN, 4)
	require.False(t, ok)
	require.Equal(t, uint64(1), e.Stats().Unmatched)
}

func TestHeadArrivalReleasesPresentFollowers(t *testing.T) {
	e := newEngine(t, 16)
	idxOf := registerRange(t, e, 5, SpaceSSN, 100, 10) // 100..109
	base := uint32(100)
	for seq := uint32(101); seq <= 106; seq++ {
		_, ok := e.MarkReady(base, 5, SpaceSSN, seq)
		require.True(t, ok)
	}
	_, ok := e.MarkReady(base, 5, SpaceSSN, 108) // gap at 107
	require.True(t, ok)
	require.Empty(t, drain(t, e, 5, SpaceSSN, &base, idxOf), "nothing is released before the head")
	require.Equal(t, 10, e.Len())

	_, ok = e.MarkReady(base, 5, SpaceSSN, 100)
	require.True(t, ok)
	require.Equal(t, seqRange(100, 7), drain(t, e, 5, SpaceSSN, &base, idxOf), "one head arrival releases its present followers, up to the gap")
	require.Equal(t, uint32(107), base)
	require.Equal(t, 3, e.Len())
	require.True(t, e.Ready(idxOf[108]), "108 still waits behind the gap")

	_, ok = e.MarkReady(base, 5, SpaceSSN, 107)
	require.True(t, ok)
	require.Equal(t, []uint32{107, 108}, drain(t, e, 5, SpaceSSN, &base, idxOf))
	require.Equal(t, uint32(109), base)
}

func TestSequenceWrapAround(t *testing.T) {
	start := uint32(math.MaxUint32 - 2)
	e := newEngine(t, 8)
	idxOf := registerRange(t, e, 9, SpaceRSN, start, 6) // 2^32-3 .. 2
	require.Contains(t, idxOf, uint32(0))
	require.Contains(t, idxOf, uint32(math.MaxUint32))
	base := start
	for _, seq := range []uint32{1, 0, math.MaxUint32, 2} {
		_, ok := e.MarkReady(base, 9, SpaceRSN, seq)
		require.True(t, ok)
	}
	require.Empty(t, drain(t, e, 9, SpaceRSN, &base, idxOf))
	_, ok := e.MarkReady(base, 9, SpaceRSN, start+1)
	require.True(t, ok)
	require.Empty(t, drain(t, e, 9, SpaceRSN, &base, idxOf))
	_, ok = e.MarkReady(base, 9, SpaceRSN, start)
	require.True(t, ok)
	require.Equal(t, seqRange(start, 6), drain(t, e, 9, SpaceRSN, &base, idxOf), "release runs across the wrap")
	require.Equal(t, uint32(3), base)
	require.Zero(t, e.Len())
}

func TestConnectionsAndSpacesAreIndependent(t *testing.T) {
	type stream struct {
		cid uint32
		sp  Space
	}
	streams := []stream{{1, SpaceRSN}, {1, SpaceSSN}, {2, SpaceRSN}, {2, SpaceSSN}, {1, 3}}
	e := newEngine(t, 64)
	idxOf := map[stream]map[uint32]uint32{}
	bases := map[stream]uint32{}
	for _, s := range streams {
		idxOf[s] = registerRange(t, e, s.cid, s.sp, 0, 5) // the same seqs in every stream
	}
	seen := map[uint32]bool{}
	for _, m := range idxOf {
		for _, idx := range m {
			require.False(t, seen[idx], "index %d handed out twice", idx)
			seen[idx] = true
		}
	}
	require.Equal(t, 25, e.Len())

	// Each stream's arrivals release only that stream.
	for i, s := range streams {
		base := bases[s]
		for seq := range uint32(i + 1) {
			_, ok := e.MarkReady(base, s.cid, s.sp, seq)
			require.True(t, ok)
		}
		for _, other := range streams {
			if other != s {
				b := bases[other]
				require.Empty(t, drain(t, e, other.cid, other.sp, &b, nil), "%v released by arrivals on %v", other, s)
			}
		}
		require.Equal(t, seqRange(0, min(i+1, 5)), drain(t, e, s.cid, s.sp, &base, idxOf[s]))
		bases[s] = base
	}
	for i, s := range streams {
		require.Equal(t, uint32(min(i+1, 5)), bases[s])
	}
	require.Equal(t, 25-(1+2+3+4+5), e.Len())
}

func TestCounters(t *testing.T) {
	e := newEngine(t, 8)
	registerRange(t, e, 3, SpaceRSN, 10, 3) // 10, 11, 12
	var base uint32 = 10

	_, ok := e.MarkReady(base, 3, SpaceRSN, 13) // never registered
	require.False(t, ok)
	_, ok = e.MarkReady(base, 4, SpaceRSN, 10) // other connection
	require.False(t, ok)
	_, ok = e.MarkReady(base, 3, SpaceSSN, 10) // other space
	require.False(t, ok)
	_, ok = e.MarkReady(base, 3, 7, 10) // invalid space
	require.False(t, ok)
	require.Equal(t, uint64(4), e.Stats().Unmatched)

	idx, ok := e.MarkReady(base, 3, SpaceRSN, 11) // ahead of the base: waits
	require.True(t, ok)
	require.Equal(t, uint64(1), e.Stats().Waits)
	dup, ok := e.MarkReady(base, 3, SpaceRSN, 11)
	require.False(t, ok, "a second arrival is refused")
	require.Equal(t, idx, dup, "a duplicate reports the existing index")
	require.Equal(t, uint64(1), e.Stats().Duplicates)
	require.True(t, e.Ready(idx))

	_, ok = e.MarkReady(base, 3, SpaceRSN, 10) // the head: no wait
	require.True(t, ok)
	require.Equal(t, uint64(1), e.Stats().Waits)

	_, ok = e.Take(3, SpaceRSN, 12)
	require.True(t, ok)
	_, ok = e.Take(3, SpaceRSN, 12)
	require.False(t, ok, "Take of a key no longer registered")

	n := 0
	for {
		if _, ok := e.PopReady(3, SpaceRSN, &base); !ok {
			break
		}
		n++
	}
	require.Equal(t, 2, n)
	_, err := e.Register(3, SpaceRSN, 99)
	require.NoError(t, err)
	_, err = e.Register(3, SpaceRSN, 99)
	require.ErrorIs(t, err, ErrDuplicate)
	require.Equal(t, Stats{Registered: 4, Released: 2, Taken: 1, Waits: 1, Unmatched: 4, Duplicates: 1}, e.Stats())
}

func TestFullLeavesEngineIntact(t *testing.T) {
	const capacity = 32
	e := newEngine(t, capacity)
	idxOf := registerRange(t, e, 11, SpaceRSN, math.MaxUint32-9, capacity)
	for i := range 3 {
		_, err := e.Register(12, SpaceRSN, uint32(i))
		require.ErrorIs(t, err, ErrFull)
	}
	// At capacity a present key still reports a duplicate, not full.
	idx, err := e.Register(11, SpaceRSN, math.MaxUint32-9)
	require.ErrorIs(t, err, ErrDuplicate)
	require.Equal(t, idxOf[math.MaxUint32-9], idx)
	require.Equal(t, uint64(3), e.Stats().Full)
	require.Equal(t, capacity, e.Len())
	for seq, want := range idxOf {
		got, ok := e.Lookup(11, SpaceRSN, seq)
		require.True(t, ok)
		require.Equal(t, want, got)
		require.False(t, e.Ready(got))
	}
	_, ok := e.Lookup(12, SpaceRSN, 0)
	require.False(t, ok, "a refused Register left a key behind")

	// The full engine still releases in order, and then accepts again.
	base := uint32(math.MaxUint32 - 9)
	for seq := range idxOf {
		_, ok := e.MarkReady(base, 11, SpaceRSN, seq)
		require.True(t, ok)
	}
	require.Equal(t, seqRange(math.MaxUint32-9, capacity), drain(t, e, 11, SpaceRSN, &base, idxOf))
	require.Zero(t, e.Len())
	registerRange(t, e, 12, SpaceRSN, 0, capacity)
	require.Equal(t, uint64(capacity*2), e.Stats().Registered)
}

func TestTakeLeavesAGap(t *testing.T) {
	e := newEngine(t, 8)
	idxOf := registerRange(t, e, 1, SpaceRSN, 0, 4)
	var base uint32
	idx, ok := e.Take(1, SpaceRSN, 2) // pending
	require.True(t, ok)
	require.Equal(t, idxOf[2], idx)
	for _, seq := range []uint32{3, 1, 0} {
		_, ok := e.MarkReady(base, 1, SpaceRSN, seq)
		require.True(t, ok)
	}
	require.Equal(t, []uint32{0, 1}, drain(t, e, 1, SpaceRSN, &base, idxOf), "release stops at the taken gap")
	idx, ok = e.Take(1, SpaceRSN, 3) // ready
	require.True(t, ok)
	require.Equal(t, idxOf[3], idx)
	require.False(t, e.Ready(idx))
	require.Zero(t, e.Len())
	_, ok = e.Take(1, 200, 3)
	require.False(t, ok)
}

func TestBadSpace(t *testing.T) {
	e := newEngine(t, 4)
	for _, sp := range []Space{MaxSpaces, 5, 255} {
		require.False(t, sp.Valid())
		_, err := e.Register(1, sp, 0)
		require.ErrorIs(t, err, ErrBadSpace)
		_, ok := e.Lookup(1, sp, 0)
		require.False(t, ok)
		base := uint32(0)
		_, ok = e.PopReady(1, sp, &base)
		require.False(t, ok)
	}
	for sp := range Space(MaxSpaces) {
		require.True(t, sp.Valid())
		_, err := e.Register(1, sp, 0)
		require.NoError(t, err)
	}
	require.Equal(t, MaxSpaces, e.Len())
	require.False(t, errors.Is(ErrBadSpace, ErrFull))
}

func TestPopReadyBurstKeyAtClear(t *testing.T) {
	e := newEngine(t, 16)
	idxOf := registerRange(t, e, 2, SpaceSSN, 0, 10)
	var base uint32
	for seq := range uint32(10) {
		_, ok := e.MarkReady(base, 2, SpaceSSN, seq)
		require.True(t, ok)
	}
	k, ok := e.KeyAt(idxOf[4])
	require.True(t, ok)
	require.Equal(t, Key{CID: 2, Space: uint32(SpaceSSN), Seq: 4}, k)

	var idxs [4]uint32
	require.Equal(t, 4, e.PopReadyBurst(2, SpaceSSN, &base, idxs[:]))
	require.Equal(t, [4]uint32{idxOf[0], idxOf[1], idxOf[2], idxOf[3]}, idxs)
	require.Equal(t, 4, e.PopReadyBurst(2, SpaceSSN, &base, idxs[:]))
	require.Equal(t, 2, e.PopReadyBurst(2, SpaceSSN, &base, idxs[:]))
	require.Equal(t, [2]uint32{idxOf[8], idxOf[9]}, [2]uint32(idxs[:2]))
	require.Equal(t, uint32(10), base)
	_, ok = e.KeyAt(idxOf[4])
	require.False(t, ok, "a released index holds no key")

	registerRange(t, e, 2, SpaceSSN, 10, 3)
	e.Clear()
	require.Zero(t, e.Len())
	for i := range uint32(16) {
		require.False(t, e.Ready(i))
	}
	registerRange(t, e, 2, SpaceSSN, 10, 16)
	require.False(t, e.Ready(math.MaxUint32), "an out-of-range index is not ready")
}

func TestZeroAllocs(t *testing.T) {
	e := newEngine(t, 64)
	var base, next uint32
	var idxs [8]uint32
	allocs := testing.AllocsPerRun(1000, func() {
		for range 4 {
			if _, err := e.Register(1, SpaceRSN, next); err != nil {
				panic(err)
			}
			next++
		}
		// Out of order: the last two arrive first and wait.
		for _, seq := range []uint32{next - 1, next - 2, base + 1, base} {
			if _, ok := e.MarkReady(base, 1, SpaceRSN, seq); !ok {
				panic("MarkReady")
			}
		}
		e.MarkReady(base, 1, SpaceRSN, base)      // duplicate
		e.MarkReady(base, 1, SpaceRSN, next+1000) // unmatched
		e.Lookup(1, SpaceRSN, base)               // hit
		e.Ready(0)                                // any
		if _, ok := e.PopReady(1, SpaceRSN, &base); !ok {
			panic("PopReady")
		}
		if e.PopReadyBurst(1, SpaceRSN, &base, idxs[:]) != 3 {
			panic("PopReadyBurst")
		}
		if _, err := e.Register(1, SpaceRSN, next); err != nil {
			panic(err)
		}
		e.Register(1, SpaceRSN, next) // duplicate
		e.Register(1, 9, next)        // bad space
		e.KeyAt(0)
		if _, ok := e.Take(1, SpaceRSN, next); !ok {
			panic("Take")
		}
		e.Stats()
	})
	require.Zero(t, allocs, "the per-transaction calls allocate")

	full := newEngine(t, 1)
	_, err := full.Register(1, SpaceRSN, 0)
	require.NoError(t, err)
	allocs = testing.AllocsPerRun(1000, func() {
		if _, err := full.Register(1, SpaceRSN, 1); err != ErrFull {
			panic(err)
		}
	})
	require.Zero(t, allocs, "a Register refused with ErrFull allocates")
}
