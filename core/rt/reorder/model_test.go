package reorder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/internal/testenv"
)

// seeds returns the seeds a randomized test runs: the one -seed names if
// any, else n fixed ones, so every run is reproducible.
func seeds(t *testing.T, n int) []uint64 {
	if seed, ok := testenv.Replay(t); ok {
		return []uint64{seed}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i+1) * 0x9e3779b97f4a7c15
	}
	return out
}

func logSeedOnFailure(t *testing.T, seed uint64) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with: go test ./core/rt/reorder -run '^%s$' -seed=%d", strings.Split(t.Name(), "/")[0], seed)
		}
	})
}

// model is the reference engine: a map from key to entry (index and ready
// flag), its inverse, and the counters the engine should report.
type model struct {
	e       *Engine
	entries map[Key]modelEntry
	byIdx   map[uint32]Key
	stats   Stats
	// bases[c][s] is the caller's base of connection cids[c], space s.
	bases [len(modelCIDs)][MaxSpaces]uint32
}

type modelEntry struct {
	idx   uint32
	ready bool
}

// modelCIDs and modelBases cover zero, all ones, and bases just below the
// 2^32 wrap and the 2^31 midpoint.
var (
	modelCIDs  = [4]uint32{0, 1, math.MaxUint32, 0x00abcdef}
	modelBases = [4]uint32{0, math.MaxUint32 - 7, 1<<31 - 3, math.MaxUint32}
)

func newModel(t testing.TB, capacity int, seed uint64) *model {
	e, err := New(Options{Capacity: capacity, Seed: seed})
	require.NoError(t, err)
	m := &model{e: e, entries: map[Key]modelEntry{}, byIdx: map[uint32]Key{}}
	for c := range m.bases {
		for s := range m.bases[c] {
			m.bases[c][s] = modelBases[(c+s)%len(modelBases)]
		}
	}
	return m
}

// step decodes one operation from two bytes and applies it to the engine
// and the model. Byte b picks the operation and the connection; byte a picks
// the space (one in eight invalid) and the sequence number, near the
// stream's base so that keys collide and releases happen.
func (m *model) step(t testing.TB, b, a byte) {
	e := m.e
	c := int(b/10) % len(modelCIDs)
	cid := modelCIDs[c]
	sp := Space(a >> 5)
	if sp >= MaxSpaces && sp < 7 {
		sp -= MaxSpaces
	}
	var scratch uint32
	base := &scratch
	if sp.Valid() {
		base = &m.bases[c][sp]
	}
	// Mostly the next few sequence numbers; sometimes ones already behind
	// the base (never released in order) or far ahead.
	var seq uint32
	switch off := uint32(a & 31); {
	case off < 24:
		seq = *base + off%8
	case off < 28:
		seq = *base - 4 + (off - 24)
	default:
		seq = *base + 8 + (off-28)*5
	}
	sel := b / 40 // 0..6
	op := b % 10
	if (sel == 1 || sel == 4) && (op == 3 || op == 4 || op == 7) {
		// Aim an arrival or a Take at a live entry, of any stream.
		if k, ok := m.byIdx[uint32(a)%uint32(m.e.Cap())]; ok {
			c, cid, sp, seq = m.cidIndex(k.CID), k.CID, Space(k.Space), k.Seq
			base = &m.bases[c][sp]
		}
	}
	if (sel == 2 || sel == 5) && (op == 3 || op == 4) {
		seq = *base // arrivals for the head are frequent in practice
	}
	k := Key{CID: cid, Space: uint32(sp), Seq: seq}
	cur, present := m.entries[k]

	switch op {
	case 0, 1, 2:
		idx, err := e.Register(cid, sp, seq)
		switch {
		case !sp.Valid():
			require.ErrorIs(t, err, ErrBadSpace)
		case present:
			require.ErrorIs(t, err, ErrDuplicate)
			require.Equal(t, cur.idx, idx)
		case len(m.entries) == e.Cap():
			require.ErrorIs(t, err, ErrFull)
			m.stats.Full++
		default:
			require.NoError(t, err, "Register at Len %d of Cap %d", len(m.entries), e.Cap())
			require.Less(t, idx, uint32(e.Cap()))
			_, taken := m.byIdx[idx]
			require.False(t, taken, "index %d handed out while in use", idx)
			m.entries[k], m.byIdx[idx] = modelEntry{idx: idx}, k
			m.stats.Registered++
		}
	case 3, 4:
		idx, ok := e.MarkReady(*base, cid, sp, seq)
		switch {
		case !present:
			require.False(t, ok)
			m.stats.Unmatched++
		case cur.ready:
			require.False(t, ok)
			require.Equal(t, cur.idx, idx)
			m.stats.Duplicates++
		default:
			require.True(t, ok)
			require.Equal(t, cur.idx, idx)
			m.entries[k] = modelEntry{idx: idx, ready: true}
			if seq != *base {
				m.stats.Waits++
			}
		}
	case 5, 6:
		for {
			before := *base
			hk := Key{CID: cid, Space: uint32(sp), Seq: before}
			head, ok := m.entries[hk]
			idx, got := e.PopReady(cid, sp, base)
			if !ok || !head.ready {
				require.False(t, got, "PopReady released a missing or pending head")
				require.Equal(t, before, *base)
				break
			}
			require.True(t, got, "PopReady kept a ready head")
			require.Equal(t, head.idx, idx)
			require.Equal(t, before+1, *base)
			m.release(hk)
			m.stats.Released++
			if a&1 == 0 { // sometimes one PopReady, sometimes the loop
				break
			}
		}
	case 7:
		idx, ok := e.Take(cid, sp, seq)
		require.Equal(t, present, ok, "Take presence")
		if ok {
			require.Equal(t, cur.idx, idx)
			m.release(k)
			m.stats.Taken++
		}
	case 8:
		idx, ok := e.Lookup(cid, sp, seq)
		require.Equal(t, present, ok, "Lookup presence")
		if ok {
			require.Equal(t, cur.idx, idx)
		}
	case 9:
		if a&1 == 0 {
			idx := uint32(a>>1) % uint32(e.Cap()+2)
			hk, live := m.byIdx[idx]
			require.Equal(t, live && m.entries[hk].ready, e.Ready(idx), "Ready(%d)", idx)
			got, ok := e.KeyAt(idx)
			require.Equal(t, live, ok, "KeyAt(%d) presence", idx)
			if ok {
				require.Equal(t, hk, got)
			}
			break
		}
		var idxs [4]uint32
		burst := idxs[:1+int(a>>1)%len(idxs)]
		first := *base
		n := e.PopReadyBurst(cid, sp, base, burst)
		for i := range burst {
			hk := Key{CID: cid, Space: uint32(sp), Seq: first + uint32(i)}
			head, ok := m.entries[hk]
			if !ok || !head.ready {
				require.Equal(t, i, n, "PopReadyBurst count")
				break
			}
			require.Less(t, i, n, "PopReadyBurst stopped at a ready head")
			require.Equal(t, head.idx, burst[i])
			m.release(hk)
			m.stats.Released++
		}
		require.Equal(t, first+uint32(n), *base)
	}
	require.Equal(t, len(m.entries), e.Len(), "Len")
	require.Equal(t, m.stats, e.Stats(), "Stats")
	var held [MaxSpaces + 1]int
	for k := range m.entries {
		held[k.Space]++
	}
	for sp := range held {
		require.Equal(t, held[sp], e.Held(Space(sp)), "Held(%d)", sp)
	}
}

func (m *model) cidIndex(cid uint32) int {
	for c, x := range modelCIDs {
		if x == cid {
			return c
		}
	}
	panic("unknown CID")
}

func (m *model) release(k Key) {
	delete(m.byIdx, m.entries[k].idx)
	delete(m.entries, k)
}

// check compares every registered entry with the engine.
func (m *model) check(t testing.TB) {
	for k, want := range m.entries {
		idx, ok := m.e.Lookup(k.CID, Space(k.Space), k.Seq)
		require.True(t, ok, "registered key %+v lost", k)
		require.Equal(t, want.idx, idx, "key %+v moved", k)
		require.Equal(t, want.ready, m.e.Ready(idx), "key %+v ready", k)
	}
}

// run applies ops two bytes at a time.
func (m *model) run(t testing.TB, ops []byte) {
	for i := 0; i+1 < len(ops); i += 2 {
		m.step(t, ops[i], ops[i+1])
		if i%64 == 0 {
			m.check(t)
		}
	}
	m.check(t)
}

func TestRandomAgainstModel(t *testing.T) {
	var total Stats
	for _, seed := range seeds(t, 24) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logSeedOnFailure(t, seed)
			rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
			capacity := []int{1, 3, 16, 64, 200}[rng.IntN(5)]
			ops := make([]byte, 2*5000)
			for i := range ops {
				ops[i] = byte(rng.Uint32())
			}
			m := newModel(t, capacity, seed)
			m.run(t, ops)
			st := m.e.Stats()
			t.Logf("cap %d: %+v", capacity, st)
			total.Registered += st.Registered
			total.Released += st.Released
			total.Taken += st.Taken
			total.Waits += st.Waits
			total.Unmatched += st.Unmatched
			total.Duplicates += st.Duplicates
			total.Full += st.Full
		})
	}
	if _, replay := testenv.Replay(t); !replay {
		// The operation mix must reach every outcome, or the model
		// comparison proves little.
		require.NotZero(t, total.Released)
		require.NotZero(t, total.Taken)
		require.NotZero(t, total.Waits)
		require.NotZero(t, total.Unmatched)
		require.NotZero(t, total.Duplicates)
		require.NotZero(t, total.Full)
	}
}

// TestRandomStreamsReleaseInOrderOnce drives the engine as the transport
// does: each stream registers consecutive sequence numbers from a base near
// the wrap, arrivals come in random order, and after each arrival the
// stream is drained. Every transaction must be released exactly once and
// each stream's releases must be consecutive.
func TestRandomStreamsReleaseInOrderOnce(t *testing.T) {
	for _, seed := range seeds(t, 8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logSeedOnFailure(t, seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			const nStreams, capacity, total = 6, 96, 20000
			e, err := New(Options{Capacity: capacity, Seed: seed})
			require.NoError(t, err)
			type stream struct {
				cid             uint32
				sp              Space
				base, next      uint32
				pending         []uint32 // registered, not yet arrived
				ctx             []uint32 // caller's context array: the seq owning each index
				releasedThrough uint32
			}
			ctx := make([]uint32, capacity)
			owner := make([]int, capacity)
			for i := range owner {
				owner[i] = -1
			}
			streams := make([]*stream, nStreams)
			for i := range streams {
				start := math.MaxUint32 - uint32(rng.IntN(200))
				streams[i] = &stream{cid: uint32(i / 2), sp: Space(i % 2), base: start, next: start}
			}
			registered, released := 0, 0
			for released < total {
				s := streams[rng.IntN(nStreams)]
				si := int(s.cid)*2 + int(s.sp)
				if rng.IntN(2) == 0 && registered < total {
					idx, err := e.Register(s.cid, s.sp, s.next)
					if err != nil {
						require.ErrorIs(t, err, ErrFull)
						require.Equal(t, capacity, e.Len())
						continue
					}
					require.Equal(t, -1, owner[idx], "index %d handed out while owned", idx)
					owner[idx], ctx[idx] = si, s.next
					s.pending = append(s.pending, s.next)
					s.next++
					registered++
					continue
				}
				if len(s.pending) == 0 {
					continue
				}
				j := rng.IntN(len(s.pending))
				seq := s.pending[j]
				s.pending[j] = s.pending[len(s.pending)-1]
				s.pending = s.pending[:len(s.pending)-1]
				_, ok := e.MarkReady(s.base, s.cid, s.sp, seq)
				require.True(t, ok)
				for {
					want := s.base
					idx, ok := e.PopReady(s.cid, s.sp, &s.base)
					if !ok {
						break
					}
					require.Equal(t, si, owner[idx], "released another stream's entry")
					require.Equal(t, want, ctx[idx], "released out of order")
					owner[idx] = -1 // the caller drops the index
					released++
				}
			}
			for _, s := range streams {
				require.Empty(t, s.pending)
				require.Equal(t, s.next, s.base, "stream %d/%d not fully released", s.cid, s.sp)
			}
			require.Zero(t, e.Len())
			st := e.Stats()
			require.Equal(t, uint64(total), st.Released)
			require.Equal(t, uint64(total), st.Registered)
			require.Zero(t, st.Unmatched+st.Duplicates)
		})
	}
}

// FuzzEngine drives random operation sequences against the model; the first
// byte picks the capacity.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 30, 0, 50, 64})
	f.Add([]byte{7, 0, 1, 0, 2, 0, 3, 0, 0, 3, 0, 5, 1, 5, 65, 7, 2})
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		ops := make([]byte, 1+rng.IntN(400))
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		f.Add(ops)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		m := newModel(t, 1+int(data[0]%64), uint64(data[0]))
		m.run(t, data[1:])
	})
}
