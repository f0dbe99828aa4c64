package cam

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/internal/testenv"
)

// model is the reference: a Go map from key to index and its inverse.
type model[K comparable] struct {
	byKey map[K]uint32
	byIdx map[uint32]K
}

func newModel[K comparable]() *model[K] {
	return &model[K]{byKey: map[K]uint32{}, byIdx: map[uint32]K{}}
}

// opRunner applies one operation to the table and the model and checks that
// they agree. Keys come from keyOf(n) for a small n so that inserts collide
// with present keys and lookups and deletes both hit and miss.
type opRunner[K comparable] struct {
	tb    *Table[K]
	m     *model[K]
	keyOf func(uint32) K
	space uint32
}

func (r *opRunner[K]) step(t testing.TB, op byte, arg uint32) {
	tb, m := r.tb, r.m
	k := r.keyOf(arg % r.space)
	switch op % 9 {
	case 0, 1: // insert weighted double so the table fills
		idx, err := tb.Insert(k)
		if want, ok := m.byKey[k]; ok {
			require.ErrorIs(t, err, ErrExists)
			require.Equal(t, want, idx)
			return
		}
		if len(m.byKey) == tb.Cap() {
			require.ErrorIs(t, err, ErrFull, "insert at Len == Cap")
			return
		}
		require.NoError(t, err, "insert at Len %d of Cap %d", len(m.byKey), tb.Cap())
		require.Less(t, idx, uint32(tb.Cap()))
		_, taken := m.byIdx[idx]
		require.False(t, taken, "index %d handed out while in use", idx)
		m.byKey[k], m.byIdx[idx] = idx, k
	case 2:
		idx, ok := tb.Lookup(k)
		want, wantOK := m.byKey[k]
		require.Equal(t, wantOK, ok, "Lookup presence")
		if ok {
			require.Equal(t, want, idx)
		}
	case 3:
		idx, ok := tb.Delete(k)
		want, wantOK := m.byKey[k]
		require.Equal(t, wantOK, ok, "Delete presence")
		if ok {
			require.Equal(t, want, idx)
			delete(m.byKey, k)
			delete(m.byIdx, idx)
		}
	case 4:
		idx := arg % uint32(tb.Cap()+2) // sometimes out of range
		want, wantOK := m.byIdx[idx]
		require.Equal(t, wantOK, tb.DeleteIndex(idx), "DeleteIndex(%d)", idx)
		if wantOK {
			delete(m.byKey, want)
			delete(m.byIdx, idx)
		}
	case 5:
		idx := arg % uint32(tb.Cap()+2)
		got, ok := tb.KeyAt(idx)
		want, wantOK := m.byIdx[idx]
		require.Equal(t, wantOK, ok, "KeyAt(%d) presence", idx)
		if ok {
			require.Equal(t, want, got)
		}
	case 6, 7, 8:
		r.burst(t, op%9, arg)
	}
	require.Equal(t, len(m.byKey), tb.Len())
}

// burst runs one of the burst calls on up to 9 keys (some repeated) and
// checks it against the single-key semantics applied in order.
func (r *opRunner[K]) burst(t testing.TB, op byte, arg uint32) {
	tb, m := r.tb, r.m
	keys := make([]K, arg%10)
	for j := range keys {
		keys[j] = r.keyOf((arg>>4 + uint32(j)*(arg%7+1)) % r.space)
	}
	idxs := make([]uint32, len(keys))
	switch op {
	case 6:
		found := tb.LookupBurst(keys, idxs)
		for j, k := range keys {
			want, ok := m.byKey[k]
			require.Equal(t, ok, found&(1<<j) != 0, "LookupBurst key %d presence", j)
			if ok {
				require.Equal(t, want, idxs[j])
			}
		}
	case 7:
		n, err := tb.InsertBurst(keys, idxs)
		for j, k := range keys[:n] {
			_, dup := m.byKey[k]
			require.False(t, dup, "InsertBurst inserted present key %d", j)
			_, taken := m.byIdx[idxs[j]]
			require.False(t, taken, "InsertBurst handed out index %d in use", idxs[j])
			m.byKey[k], m.byIdx[idxs[j]] = idxs[j], k
		}
		if n == len(keys) {
			require.NoError(t, err)
			break
		}
		if want, ok := m.byKey[keys[n]]; ok {
			require.ErrorIs(t, err, ErrExists)
			require.Equal(t, want, idxs[n])
		} else {
			require.ErrorIs(t, err, ErrFull)
			require.Equal(t, tb.Cap(), len(m.byKey))
		}
	case 8:
		found := tb.DeleteBurst(keys, idxs)
		for j, k := range keys {
			want, ok := m.byKey[k]
			require.Equal(t, ok, found&(1<<j) != 0, "DeleteBurst key %d presence", j)
			if ok {
				require.Equal(t, want, idxs[j])
				delete(m.byKey, k)
				delete(m.byIdx, want)
			}
		}
	}
}

func (r *opRunner[K]) checkRange(t testing.TB) {
	seen := 0
	r.tb.Range(func(idx uint32, k K) bool {
		want, ok := r.m.byIdx[idx]
		require.True(t, ok, "Range visited free index %d", idx)
		require.Equal(t, want, k)
		seen++
		return true
	})
	require.Equal(t, len(r.m.byIdx), seen, "Range visits every live entry")
}

// TestDifferentialAgainstMap runs about a million random operations over
// several seeds, capacities and key types against a map.
func TestDifferentialAgainstMap(t *testing.T) {
	total := 1_000_000
	if testenv.Race || testing.Short() {
		total = 200_000
	}
	type config struct {
		capacity int
		space    uint32
	}
	configs := []config{{1, 3}, {5, 12}, {64, 100}, {64, 1000}, {1000, 1500}, {5000, 6000}}
	perRun := total / (len(configs) * 3)
	for _, c := range configs {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("cap=%d/space=%d/seed=%d", c.capacity, c.space, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(c.capacity)))
				tb, err := New[TransportKey](Options{Capacity: c.capacity, Seed: seed})
				require.NoError(t, err)
				run := &opRunner[TransportKey]{tb: tb, m: newModel[TransportKey](), space: c.space,
					keyOf: func(n uint32) TransportKey { return TransportKey{CID: n >> 3, Win: n & 1, PSN: n * 2654435761} }}
				for i := range perRun {
					run.step(t, byte(r.Uint32()), r.Uint32())
					if i%(perRun/4) == 0 {
						run.checkRange(t)
						checkInvariants(t, tb)
					}
				}
				run.checkRange(t)
				checkInvariants(t, tb)
			})
		}
	}
}

// FuzzOps drives random operation sequences against the map model on small
// tables, where collisions, full tables and index reuse are frequent.
func FuzzOps(f *testing.F) {
	f.Add(uint8(4), uint64(1), []byte{0, 1, 0, 2, 1, 3, 2, 2, 3, 1, 4, 0, 5, 3})
	f.Add(uint8(1), uint64(0), []byte{0, 0, 0, 1, 3, 0, 0, 2})
	f.Add(uint8(63), uint64(7), []byte("insert lookup delete deleteindex keyat range"))
	f.Fuzz(func(t *testing.T, capacity uint8, seed uint64, ops []byte) {
		capn := int(capacity%64) + 1
		tb, err := New[uint32](Options{Capacity: capn, Seed: seed})
		require.NoError(t, err)
		run := &opRunner[uint32]{tb: tb, m: newModel[uint32](), space: uint32(capn)*2 + 1,
			keyOf: func(n uint32) uint32 { return n * 0x01000193 }}
		for i := 0; i+1 < len(ops); i += 2 {
			run.step(t, ops[i], uint32(ops[i+1]))
		}
		run.checkRange(t)
		checkInvariants(t, tb)
		// Refill to capacity: the guarantee holds whatever came before.
		for n := uint32(0); tb.Len() < capn; n++ {
			_, err := tb.Insert(1_000_000 + n)
			require.NoError(t, err)
		}
		_, err = tb.Insert(999_999)
		require.True(t, errors.Is(err, ErrFull))
	})
}
