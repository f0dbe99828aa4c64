package cam

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkInvariants recomputes everything the table keeps incrementally and
// compares: positions against bucket refs, overflow counts, the free list, the
// stash, and that every key is found by Lookup at its index.
// locate returns a key's tag and its primary and alternate buckets.
func locate[K comparable](tb *Table[K], k *K) (tag, primary, alt uint32) {
	h := tb.hashOf(k)
	primary = tb.primaryOf(h)
	return tagOf(h), primary, tb.altOf(h, primary)
}

func checkInvariants[K comparable](t *testing.T, tb *Table[K]) {
	t.Helper()
	live := 0
	overflow := make([]int, len(tb.buckets))
	for b := range tb.buckets {
		bk := &tb.buckets[b]
		for s := range slotsPerBucket {
			if bk.tag(s) == 0 {
				continue
			}
			live++
			idx := bk.index(s)
			require.Less(t, idx, uint32(tb.capacity), "bucket %d slot %d index", b, s)
			require.Equal(t, uint32(b)<<2|uint32(s), tb.pos[idx], "pos of index %d", idx)
			tag, p, a := locate(tb, &bk.keys[s])
			require.Equal(t, tag, bk.tag(s), "tag of index %d", idx)
			require.True(t, uint32(b) == p || uint32(b) == a, "index %d in bucket %d, not one of its own %d/%d", idx, b, p, a)
			if uint32(b) != p {
				overflow[p]++
			}
		}
	}
	for i := 0; i < tb.stashLen; i++ {
		s := &tb.stash[i]
		require.Equal(t, posStash|uint32(i), tb.pos[s.idx], "pos of stashed index %d", s.idx)
		tag, p, a := locate(tb, &s.key)
		require.Equal(t, [3]uint32{tag, p, a}, [3]uint32{s.tag, s.primary, s.alt})
		overflow[p]++
		live++
	}
	require.Equal(t, tb.length, live, "Len against slots in use")
	for b, want := range overflow {
		got := int(tb.overflow[b])
		if got != overflowSticky {
			require.Equal(t, want, got, "overflow count of bucket %d", b)
		}
	}
	free := 0
	seen := make([]bool, tb.capacity)
	for i := tb.freeHead; i != uint32(tb.capacity); i = tb.pos[i] & posLowMask {
		require.Less(t, i, uint32(tb.capacity), "free list link")
		require.False(t, seen[i], "index %d twice on the free list", i)
		require.NotZero(t, tb.pos[i]&posFree, "index %d on the free list not marked free", i)
		seen[i] = true
		free++
	}
	require.Equal(t, tb.capacity-tb.length, free, "free list length")
	tb.Range(func(idx uint32, k K) bool {
		got, ok := tb.Lookup(k)
		require.True(t, ok, "Lookup of the key at index %d", idx)
		require.Equal(t, idx, got)
		return true
	})
}

func TestNewValidatesOptions(t *testing.T) {
	for _, c := range []struct {
		capacity int
		want     string
	}{
		{0, "capacity 0 is out of range (use 1 to 16777216)"},
		{-5, "capacity -5 is out of range"},
		{MaxCapacity + 1, "capacity 16777217 is out of range"},
	} {
		_, err := New[uint32](Options{Capacity: c.capacity, Name: "qpn"})
		require.Error(t, err)
		require.Contains(t, err.Error(), "qpn: "+c.want)
	}
	tb, err := New[uint32](Options{Capacity: 1})
	require.NoError(t, err)
	require.Equal(t, 1, tb.Cap())
	require.Equal(t, "cam(0/1)", tb.String())
}

type paddedKey struct {
	CID uint32
	Win uint8
	PSN uint32
}

type tailPaddedKey struct {
	PSN uint32
	Win uint8
}

type blankKey struct {
	CID uint32
	_   uint32
}

type floatKey struct{ A, B float32 }

type goodKey struct {
	CID  uint32
	Win  uint8
	Opc  uint8
	Rsvd uint16
	PSN  uint32
}

func TestNewValidatesKeyType(t *testing.T) {
	check := func(err error, want string) {
		t.Helper()
		require.Error(t, err)
		require.Contains(t, err.Error(), want)
	}
	opts := Options{Capacity: 8}
	_, err := New[paddedKey](opts)
	check(err, "3 padding bytes before field PSN (widen the field before it")
	_, err = New[tailPaddedKey](opts)
	check(err, "3 padding bytes at the end")
	_, err = New[blankKey](opts)
	check(err, "blank field at offset 4")
	_, err = New[floatKey](opts)
	check(err, "holds a float32")
	_, err = New[uint16](opts)
	check(err, "key type uint16 is 2 bytes (use 4, 8, 12 or 16 bytes")
	_, err = New[[8]uint8](opts)
	check(err, "key type [8]uint8 has alignment 1")
	_, err = New[[3]uint64](opts)
	check(err, "is 24 bytes")
	_, err = New[string](opts)
	check(err, "key type string holds a string")

	_, err = New[goodKey](opts)
	require.NoError(t, err)
	_, err = New[Key16](opts)
	require.NoError(t, err)
	_, err = New[[3]int32](opts)
	require.NoError(t, err)
	_, err = New[uint64](opts)
	require.NoError(t, err)
}

func TestKeyWordsMatchBytes(t *testing.T) {
	k12 := TransportKey{CID: 0x04030201, Win: 0x08070605, PSN: 0x0c0b0a09}
	lo, hi := keyWords(&k12)
	require.Equal(t, uint64(0x0807060504030201), lo)
	require.Equal(t, uint64(0x0c0b0a09), hi)
	k16 := Key16{Lo: 1, Hi: 2}
	lo, hi = keyWords(&k16)
	require.Equal(t, [2]uint64{1, 2}, [2]uint64{lo, hi})
	k4 := uint32(0xdeadbeef)
	lo, hi = keyWords(&k4)
	require.Equal(t, [2]uint64{0xdeadbeef, 0}, [2]uint64{lo, hi})
	require.Equal(t, HashUint32(7, 9), HashWords(7, 0, 9))
	require.Equal(t, HashKey16(k16, 9), HashWords(1, 2, 9))
	require.NotEqual(t, HashUint64(7, 9), HashUint64(7, 10), "the seed changes the hash")
}

func TestInsertLookupDeleteBasics(t *testing.T) {
	tb, err := New[TransportKey](Options{Capacity: 4})
	require.NoError(t, err)
	a, b := TransportKey{CID: 1, PSN: 100}, TransportKey{CID: 1, Win: 1, PSN: 100}

	ia, err := tb.Insert(a)
	require.NoError(t, err)
	require.Equal(t, uint32(0), ia, "first index is 0")
	ib, err := tb.Insert(b)
	require.NoError(t, err)
	require.Equal(t, uint32(1), ib)

	again, err := tb.Insert(a)
	require.ErrorIs(t, err, ErrExists)
	require.Equal(t, ia, again, "ErrExists returns the existing index")
	require.Equal(t, 2, tb.Len())

	got, ok := tb.Lookup(b)
	require.True(t, ok)
	require.Equal(t, ib, got)
	k, ok := tb.KeyAt(ib)
	require.True(t, ok)
	require.Equal(t, b, k)

	del, ok := tb.Delete(a)
	require.True(t, ok)
	require.Equal(t, ia, del)
	_, ok = tb.Lookup(a)
	require.False(t, ok, "lookup after delete misses")
	_, ok = tb.Delete(a)
	require.False(t, ok, "second delete misses")
	_, ok = tb.KeyAt(ia)
	require.False(t, ok, "KeyAt of a freed index")
	require.False(t, tb.DeleteIndex(ia), "DeleteIndex of a freed index")
	require.False(t, tb.DeleteIndex(4), "DeleteIndex out of range")
	_, ok = tb.KeyAt(1 << 30)
	require.False(t, ok, "KeyAt out of range")

	// The freed index is the next one handed out (LIFO), to a new key.
	c := TransportKey{CID: 2, PSN: 7}
	ic, err := tb.Insert(c)
	require.NoError(t, err)
	require.Equal(t, ia, ic)

	require.True(t, tb.DeleteIndex(ib))
	_, ok = tb.Lookup(b)
	require.False(t, ok)
	require.Equal(t, 1, tb.Len())
	checkInvariants(t, tb)

	tb.Clear()
	require.Equal(t, 0, tb.Len())
	_, ok = tb.Lookup(c)
	require.False(t, ok)
	i0, err := tb.Insert(c)
	require.NoError(t, err)
	require.Equal(t, uint32(0), i0, "Clear restarts indexes at 0")
}

func TestFillToCapacityThenErrFull(t *testing.T) {
	for _, capacity := range []int{1, 2, 3, 7, 64, 100, 1000, 4096, 65536} {
		for seed := uint64(0); seed < 3; seed++ {
			t.Run(fmt.Sprintf("cap=%d/seed=%d", capacity, seed), func(t *testing.T) {
				tb, err := New[uint64](Options{Capacity: capacity, Seed: seed})
				require.NoError(t, err)
				r := rand.New(rand.NewPCG(seed, uint64(capacity)))
				seen := make([]bool, capacity)
				for i := range capacity {
					idx, err := tb.Insert(r.Uint64())
					require.NoError(t, err, "insert %d of %d", i+1, capacity)
					require.Less(t, idx, uint32(capacity))
					require.False(t, seen[idx], "index %d handed out twice", idx)
					seen[idx] = true
				}
				require.Equal(t, capacity, tb.Len())
				before := tb.Stats()
				_, err = tb.Insert(r.Uint64())
				require.ErrorIs(t, err, ErrFull, "insert number Capacity+1")
				require.Equal(t, capacity, tb.Len())
				require.Equal(t, before.FullRejects+1, tb.Stats().FullRejects)
				require.Zero(t, tb.Stats().Stashed, "the stash is for adversarial keys, not for a full table")
				if capacity <= 4096 {
					checkInvariants(t, tb)
				}
			})
		}
	}
}

// TestChurnAtFullCapacity replaces random keys of a full table with new ones:
// the steady state of a retransmission table that runs full. Every insert
// must succeed (Len < Cap after the delete) without the stash.
func TestChurnAtFullCapacity(t *testing.T) {
	for _, capacity := range []int{3, 64, 4096} {
		tb, err := New[uint64](Options{Capacity: capacity, Seed: uint64(capacity)})
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(5, uint64(capacity)))
		keys := make([]uint64, capacity)
		for i := range keys {
			keys[i] = r.Uint64()
			_, err := tb.Insert(keys[i])
			require.NoError(t, err)
		}
		for step := range 100_000 {
			i := r.IntN(capacity)
			_, ok := tb.Delete(keys[i])
			require.True(t, ok)
			keys[i] = r.Uint64()
			_, err := tb.Insert(keys[i])
			require.NoError(t, err, "cap %d step %d", capacity, step)
		}
		require.Zero(t, tb.Stats().InStash, "cap %d", capacity)
		require.Zero(t, tb.Stats().Stashed, "cap %d", capacity)
		checkInvariants(t, tb)
	}
}

// TestStructuredKeysFillToCapacity uses key sets that look adversarial to a
// weak hash: keys that differ only in high bits, only in one byte, or that
// count up in every field.
func TestStructuredKeysFillToCapacity(t *testing.T) {
	const capacity = 1 << 14
	sets := map[string]func(i int) TransportKey{
		"psn high bits":  func(i int) TransportKey { return TransportKey{CID: 5, PSN: uint32(i) << 18} },
		"cid high bits":  func(i int) TransportKey { return TransportKey{CID: uint32(i) << 18, PSN: 77} },
		"sequential psn": func(i int) TransportKey { return TransportKey{CID: 1, PSN: uint32(i)} },
		"window x cid x psn": func(i int) TransportKey {
			return TransportKey{CID: uint32(i >> 8), Win: uint32(i & 1), PSN: uint32(i >> 1 & 127)}
		},
		"low bits all equal": func(i int) TransportKey {
			return TransportKey{CID: uint32(i) << 16, Win: uint32(i) << 16, PSN: uint32(i) << 16}
		},
		"psn stride 2^24 -1 ": func(i int) TransportKey { return TransportKey{CID: 3, PSN: uint32(i) * (1<<24 - 1)} },
	}
	for name, gen := range sets {
		t.Run(name, func(t *testing.T) {
			tb, err := New[TransportKey](Options{Capacity: capacity})
			require.NoError(t, err)
			for i := range capacity {
				_, err := tb.Insert(gen(i))
				require.NoError(t, err, "key %d: %+v", i, gen(i))
			}
			_, err = tb.Insert(TransportKey{CID: 1 << 31, Win: 9, PSN: 9})
			require.ErrorIs(t, err, ErrFull)
			require.Zero(t, tb.Stats().InStash)
			for i := range capacity {
				idx, ok := tb.Lookup(gen(i))
				require.True(t, ok)
				k, _ := tb.KeyAt(idx)
				require.Equal(t, gen(i), k)
			}
		})
	}
}

// collidingKeys finds n uint64 keys whose primary and alternate buckets both
// lie in buckets, by brute force over the table's own hash.
func collidingKeys(tb *Table[uint64], buckets []uint32, n int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, 99))
	var keys []uint64
	for len(keys) < n {
		k := r.Uint64()
		_, p, a := locate(tb, &k)
		if slices.Contains(buckets, p) && slices.Contains(buckets, a) {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestCollidingKeysUseDisplacementStashAndFailCleanly drives the slow paths
// with keys crafted (knowing the seed) to share a few buckets.
func TestCollidingKeysUseDisplacementStashAndFailCleanly(t *testing.T) {
	tb, err := New[uint64](Options{Capacity: 512, Name: "victim"})
	require.NoError(t, err)
	require.Equal(t, 512, len(tb.buckets), "Capacity buckets: a load of at most 25 %")

	// Two buckets: 8 slots, then the 16-entry stash, then ErrFull below Cap.
	keys := collidingKeys(tb, []uint32{10, 11}, 30, 1)
	idxs := make([]uint32, 0, len(keys))
	for i, k := range keys {
		idx, err := tb.Insert(k)
		if i < 8+stashSize {
			require.NoError(t, err, "colliding key %d", i)
			idxs = append(idxs, idx)
			continue
		}
		require.ErrorIs(t, err, ErrFull, "colliding key %d", i)
		checkInvariants(t, tb)
	}
	require.Equal(t, 8+stashSize, tb.Len())
	require.Equal(t, stashSize, tb.Stats().InStash)
	require.Equal(t, uint64(len(keys)-8-stashSize), tb.Stats().FullRejects)
	for i, k := range keys[:8+stashSize] {
		idx, ok := tb.Lookup(k)
		require.True(t, ok, "colliding key %d after the refusals", i)
		require.Equal(t, idxs[i], idx, "index of colliding key %d is stable", i)
	}
	for _, k := range keys[8+stashSize:] {
		_, ok := tb.Lookup(k)
		require.False(t, ok, "a refused key is absent")
	}
	// Deleting bucket keys drains the stash into the freed slots; indexes stay.
	for i, k := range keys[:4] {
		_, ok := tb.Delete(k)
		require.True(t, ok, "delete colliding key %d", i)
	}
	require.Equal(t, stashSize-4, tb.Stats().InStash)
	checkInvariants(t, tb)
	for i, k := range keys[4 : 8+stashSize] {
		idx, ok := tb.Lookup(k)
		require.True(t, ok)
		require.Equal(t, idxs[4+i], idx)
	}
	// Delete a stashed key by index.
	var stashedIdx uint32
	for i := 0; i < tb.stashLen; i++ {
		stashedIdx = tb.stash[i].idx
	}
	require.True(t, tb.DeleteIndex(stashedIdx))
	checkInvariants(t, tb)
}

func TestDisplacementKeepsIndexes(t *testing.T) {
	tb, err := New[uint64](Options{Capacity: 512})
	require.NoError(t, err)
	// 24 keys that must all live in buckets 20..25, which have 24 slots: the
	// last inserts must displace keys to their other buckets to fit at all.
	buckets := []uint32{20, 21, 22, 23, 24, 25}
	keys := collidingKeys(tb, buckets, 24, 2)
	idxs := map[uint64]uint32{}
	for i, k := range keys {
		idx, err := tb.Insert(k)
		require.NoError(t, err, "key %d", i)
		idxs[k] = idx
		for k2, want := range idxs {
			got, ok := tb.Lookup(k2)
			require.True(t, ok)
			require.Equal(t, want, got, "index moved after insert %d", i)
		}
	}
	st := tb.Stats()
	require.NotZero(t, st.Displacements, "packing 24 keys into 24 slots needs displacement")
	require.Zero(t, st.InStash, "a displacement path existed for every key")
	checkInvariants(t, tb)
}

func TestBurstLimits(t *testing.T) {
	tb, err := New[uint32](Options{Capacity: 200})
	require.NoError(t, err)
	keys := make([]uint32, MaxBurst+1)
	for i := range keys {
		keys[i] = uint32(i) * 3
	}
	idxs := make([]uint32, len(keys))
	require.Panics(t, func() { tb.LookupBurst(keys, idxs) }, "more than MaxBurst keys")
	require.Panics(t, func() { tb.InsertBurst(keys, idxs) })
	require.Panics(t, func() { tb.DeleteBurst(keys, idxs) })
	require.Panics(t, func() { tb.LookupBurst(keys[:4], idxs[:3]) }, "idxs shorter than keys")

	n, err := tb.InsertBurst(keys[:MaxBurst], idxs)
	require.NoError(t, err)
	require.Equal(t, MaxBurst, n)
	for i := range MaxBurst {
		require.Equal(t, uint32(i), idxs[i], "indexes in order from 0")
	}
	require.Equal(t, ^uint64(0), tb.LookupBurst(keys[:MaxBurst], idxs), "all 64 found")
	// Stops at the first present key and reports its index.
	n, err = tb.InsertBurst([]uint32{1, 2, keys[5], 4}, idxs)
	require.ErrorIs(t, err, ErrExists)
	require.Equal(t, 2, n)
	require.Equal(t, uint32(5), idxs[2])
	require.Equal(t, uint64(0b1010), tb.DeleteBurst([]uint32{7, keys[9], 8, keys[10]}, idxs))
	require.Equal(t, []uint32{9, 10}, []uint32{idxs[1], idxs[3]})
	require.Zero(t, tb.LookupBurst(nil, nil))
}

func TestRangeVisitsLiveEntriesInIndexOrder(t *testing.T) {
	tb, err := New[uint32](Options{Capacity: 100})
	require.NoError(t, err)
	want := map[uint32]uint32{}
	for i := range uint32(100) {
		idx, err := tb.Insert(i * 7919)
		require.NoError(t, err)
		want[idx] = i * 7919
	}
	for i := range uint32(100) {
		if i%3 == 0 {
			idx, ok := tb.Delete(i * 7919)
			require.True(t, ok)
			delete(want, idx)
		}
	}
	got := map[uint32]uint32{}
	last := -1
	tb.Range(func(idx uint32, k uint32) bool {
		require.Greater(t, int(idx), last, "index order")
		last = int(idx)
		got[idx] = k
		return true
	})
	require.Equal(t, want, got)

	// Stop early.
	n := 0
	tb.Range(func(uint32, uint32) bool { n++; return n < 5 })
	require.Equal(t, 5, n)

	// A timeout scan deleting as it goes.
	tb.Range(func(idx uint32, k uint32) bool {
		if k%2 == 0 {
			require.True(t, tb.DeleteIndex(idx))
		}
		return true
	})
	tb.Range(func(_ uint32, k uint32) bool {
		require.NotZero(t, k%2, "even keys were deleted during Range")
		return true
	})
	checkInvariants(t, tb)
}

func TestIndexesStableUnderChurn(t *testing.T) {
	const capacity = 1000
	tb, err := New[TransportKey](Options{Capacity: capacity, Seed: 42})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(4, 2))
	owner := map[TransportKey]uint32{}
	var keys []TransportKey
	for step := range 200_000 {
		if len(keys) < capacity && (len(keys) < capacity/2 || r.IntN(2) == 0) {
			k := TransportKey{CID: r.Uint32N(64), Win: r.Uint32N(2), PSN: r.Uint32()}
			if _, dup := owner[k]; dup {
				continue
			}
			idx, err := tb.Insert(k)
			require.NoError(t, err)
			owner[k] = idx
			keys = append(keys, k)
		} else {
			i := r.IntN(len(keys))
			k := keys[i]
			keys[i] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			idx, ok := tb.Delete(k)
			require.True(t, ok)
			require.Equal(t, owner[k], idx, "index of %+v changed while present (step %d)", k, step)
			delete(owner, k)
		}
		if step%20_000 == 0 {
			for k, want := range owner {
				got, ok := tb.Lookup(k)
				require.True(t, ok)
				require.Equal(t, want, got)
			}
			checkInvariants(t, tb)
		}
	}
}

func TestDeterministicIndexes(t *testing.T) {
	run := func(seed uint64, simd bool) []uint32 {
		tb, err := New[TransportKey](Options{Capacity: 2000, Seed: seed})
		require.NoError(t, err)
		tb.matchSIMD = simd && simdAvailable()
		r := rand.New(rand.NewPCG(7, 7))
		var out []uint32
		var live []TransportKey
		for range 50_000 {
			if len(live) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(live))
				idx, ok := tb.Delete(live[i])
				require.True(t, ok)
				out = append(out, idx)
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				continue
			}
			k := TransportKey{CID: r.Uint32N(16), PSN: r.Uint32N(4096)}
			idx, err := tb.Insert(k)
			if err == nil {
				live = append(live, k)
			}
			out = append(out, idx, uint32(len(live)))
		}
		return out
	}
	a := run(1, false)
	require.Equal(t, a, run(1, false), "same seed, same ops, same indexes")
	require.Equal(t, a, run(1, true), "SIMD and SWAR tag matching agree")
	require.Equal(t, run(0, false), run(DefaultSeed, false), "seed 0 is DefaultSeed")
}

func TestMatchTagsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		var meta [16]byte
		for i := range meta {
			meta[i] = byte(r.IntN(4)) // small values so that tags repeat
		}
		tag := uint32(r.IntN(4))
		var want uint32
		for i := range slotsPerBucket {
			if uint32(meta[tagsOff+i]) == tag {
				want |= 1 << (8*i + 7)
			}
		}
		bk := bucket[uint32]{meta: meta}
		require.Equal(t, want, matchTags(bk.tags(), tag), "meta %x tag %d", meta, tag)
		if simdAvailable() {
			require.Equal(t, want, matchTagsSIMD(&meta, tag), "simd: meta %x tag %d", meta, tag)
		}
	}
	for h := range uint64(1024) {
		tag := tagOf(h * 0x9e3779b97f4a7c15)
		require.True(t, tag >= 0x80 && tag <= 255, "tag %d", tag)
	}
	require.Equal(t, uint32(0x80), tagOf(0x01ff_ffff_ffff_ffff), "tag 0 is taken by empty slots")
	require.Equal(t, uint32(0x83), tagOf(0x0700_0000_0000_0000))
}

func TestMatchFirstAgreesWithMatchTags(t *testing.T) {
	// matchFirst is used on valid metadata only: tags with the top bit set,
	// 0 for an empty slot. Its lowest set bit must be matchTags's, each set
	// bit must be a slot with the tag or an occupied slot above the first
	// match, and it must be exact for tag 0.
	seed := uint64(3)
	r := rand.New(rand.NewPCG(seed, 9))
	for range 50_000 {
		var tags uint32
		for i := range slotsPerBucket {
			if r.IntN(4) != 0 {
				tags |= uint32(0x80|r.IntN(4)) << (8 * i) // few values, so that tags repeat
			}
		}
		for _, tag := range []uint32{0, 0x80 | uint32(r.IntN(4))} {
			want, got := matchTags(tags, tag), matchFirst(tags, tag)
			require.Equal(t, want == 0, got == 0, "seed %d: tags %#x tag %#x", seed, tags, tag)
			require.Equal(t, want&-want, got&-got, "seed %d: lowest match of tags %#x tag %#x", seed, tags, tag)
			if tag == 0 {
				require.Equal(t, want, got, "seed %d: empty slots of tags %#x", seed, tags)
			}
			for m := got &^ want; m != 0; m &= m - 1 {
				slot := bits.TrailingZeros32(m) >> 3
				require.NotZero(t, tags>>(8*slot)&0xff, "seed %d: tags %#x tag %#x: extra match on empty slot %d", seed, tags, tag, slot)
				require.Less(t, bits.TrailingZeros32(want), bits.TrailingZeros32(m), "seed %d: extra match below the first", seed)
			}
		}
	}
}

func TestBucketIndexRoundTrip(t *testing.T) {
	var bk bucket[uint32]
	idxs := [4]uint32{0, indexMask, 0x123456, 0xabcdef}
	for s, idx := range idxs {
		bk.set(s, uint32(s+1), idx, uint32(100+s))
	}
	for s, idx := range idxs {
		require.Equal(t, idx, bk.index(s), "slot %d", s)
		require.Equal(t, uint32(s+1), bk.tag(s))
	}
	for s, idx := range idxs {
		require.Equal(t, idx, bk.indexAt(uintptr(s)), "slot %d (unchecked access)", s)
	}
	bk.clear(2)
	require.Equal(t, uint32(0x04000201), bk.tags(), "tags 1, 2, empty, 4")
	for _, s := range []int{0, 1, 3} {
		require.Equal(t, idxs[s], bk.index(s), "clearing a slot leaves the others")
	}
	// Overwriting one index leaves its neighbours' bytes alone.
	bk.set(2, 9, 0x777777, 102)
	for s, idx := range [4]uint32{idxs[0], idxs[1], 0x777777, idxs[3]} {
		require.Equal(t, idx, bk.index(s), "slot %d after re-setting slot 2", s)
	}
}

func TestZeroAllocs(t *testing.T) {
	tb, err := New[TransportKey](Options{Capacity: 1024})
	require.NoError(t, err)
	keys := make([]TransportKey, 512)
	for i := range keys {
		keys[i] = TransportKey{CID: uint32(i % 7), PSN: uint32(i * 31)}
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		k := keys[i%len(keys)]
		i++
		idx, err := tb.Insert(k)
		if err != nil && !errors.Is(err, ErrExists) {
			panic(err)
		}
		if _, ok := tb.Lookup(k); !ok {
			panic("lookup")
		}
		tb.KeyAt(idx)
		tb.Lookup(TransportKey{CID: 99})
		if i%2 == 0 {
			tb.Delete(k)
		} else {
			tb.DeleteIndex(idx)
		}
	})
	require.Zero(t, allocs, "Insert/Lookup/Delete/DeleteIndex/KeyAt allocate")
	var idxs [MaxBurst]uint32
	allocs = testing.AllocsPerRun(100, func() {
		tb.InsertBurst(keys[:MaxBurst], idxs[:])
		tb.LookupBurst(keys[:MaxBurst], idxs[:])
		tb.DeleteBurst(keys[:MaxBurst], idxs[:])
	})
	require.Zero(t, allocs, "the burst calls allocate")
	allocs = testing.AllocsPerRun(10, func() {
		tb.Range(func(uint32, TransportKey) bool { return true })
	})
	require.Zero(t, allocs, "Range allocates")
}

func TestBucketCountIsAPowerOfTwo(t *testing.T) {
	for _, c := range []int{1, 2, 3, 5, 63, 64, 65, 100, 1000, 65535, 65536, 65537} {
		tb, err := New[TransportKey](Options{Capacity: c})
		require.NoError(t, err)
		n := tb.Stats().Buckets
		least := max(c, 2)
		require.Zero(t, n&(n-1), "capacity %d: %d buckets", c, n)
		require.True(t, n >= least && n < 2*least, "capacity %d: %d buckets for a load of at most 25 %%", c, n)
		// Every key's two buckets differ and are in range.
		for i := range 1000 {
			k := TransportKey{CID: uint32(i % 7), Win: 1, PSN: uint32(i * 2654435761)}
			_, p, a := locate(tb, &k)
			require.NotEqual(t, p, a)
			require.Less(t, p, uint32(n))
			require.Less(t, a, uint32(n))
		}
		for i := range c {
			_, err := tb.Insert(TransportKey{CID: uint32(i % 5), Win: uint32(i % 2), PSN: uint32(i)})
			require.NoError(t, err, "capacity %d, key %d", c, i)
		}
		checkInvariants(t, tb)
	}
}
