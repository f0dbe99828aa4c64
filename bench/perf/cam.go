package cam

import (
	"math/rand/v2"
	"time"
)

// TransportKey is the retransmission engine's key: connection, window
// (request or data) and packet sequence number. Win is 32 bits wide so the
// key has no padding; at 12 bytes a bucket of four keys is one cache line.
type TransportKey struct {
	CID uint32
	Win uint32
	PSN uint32
}

// workload is a pre-generated key set shared by the table and the map
// measurements, so both see identical key sequences and key generation is
// not timed.
type workload[K comparable] struct {
	n int
	// pool holds n+probes distinct keys; pool[:n] is the initial content.
	// Churn step i deletes pool[i] and inserts pool[i+n], both modulo
	// len(pool): a sliding window like a retransmission queue's.
	pool []K
	// hits are present keys in random order; misses are absent keys.
	hits, misses []K
}

// newWorkload draws keys shaped like a retransmission table's (few
// connections, two windows, random PSNs); probes must be a power of two.
func newWorkload(n, probes int, seed uint64) *workload[TransportKey] {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	seen := make(map[TransportKey]bool, n+2*probes)
	fresh := func() TransportKey {
		for {
			k := TransportKey{CID: uint32(r.IntN(max(n/16, 4))), Win: uint32(r.IntN(2)), PSN: r.Uint32()}
			if !seen[k] {
				seen[k] = true
				return k
			}
		}
	}
	w := &workload[TransportKey]{n: n, pool: make([]TransportKey, n+probes),
		hits: make([]TransportKey, probes), misses: make([]TransportKey, probes)}
	for i := range w.pool {
		w.pool[i] = fresh()
	}
	for i := range w.hits {
		w.hits[i] = w.pool[r.IntN(n)]
		w.misses[i] = fresh()
	}
	return w
}

// convertWorkload maps every key of w through conv, for a map baseline with
// another key type holding the same values.
func convertWorkload[K, M comparable](w *workload[K], conv func(K) M) *workload[M] {
	each := func(ks []K) []M {
		ms := make([]M, len(ks))
		for i, k := range ks {
			ms[i] = conv(k)
		}
		return ms
	}
	return &workload[M]{n: w.n, pool: each(w.pool), hits: each(w.hits), misses: each(w.misses)}
}

func fillTable[K comparable](t *Table[K], w *workload[K]) {
	t.Clear()
	for _, k := range w.pool[:w.n] {
		if _, err := t.Insert(k); err != nil {
			panic("cam: workload fill: " + err.Error())
		}
	}
}

func fillMap[K comparable](w *workload[K]) map[K]uint32 {
	m := make(map[K]uint32, w.n)
	for i, k := range w.pool[:w.n] {
		m[k] = uint32(i)
	}
	return m
}

// window tracks which pool keys a filled table or map holds: n of them from
// pool[oldest] on, wrapping.
type window struct{ oldest int }

func (w *workload[K]) next(win *window) (oldest, newest int) {
	oldest = win.oldest
	newest = oldest + w.n
	if newest >= len(w.pool) {
		newest -= len(w.pool)
	}
	return oldest, newest
}

func elapsedNs(start time.Time, ops int) float64 {
	return float64(time.Since(start).Nanoseconds()) / float64(max(ops, 1))
}

// sink keeps results live without a package global.
type sink struct{ sum uint32 }

//go:noinline
func (s *sink) keep() {}

// The measurement loops below run ops operations and return ns per key. The
// probe slices' lengths are powers of two.

func benchLookupTable[K comparable](t *Table[K], probes []K, ops int) float64 {
	var s sink
	mask := len(probes) - 1
	start := time.Now()
	for i := 0; i < ops; i++ {
		idx, ok := t.Lookup(probes[i&mask])
		if ok {
			s.sum += idx
		}
	}
	ns := elapsedNs(start, ops)
	s.keep()
	return ns
}

func benchLookupBurst[K comparable](t *Table[K], probes []K, burst, ops int) float64 {
	var s sink
	var idxs [MaxBurst]uint32
	mask := len(probes) - 1
	ops = (ops + burst - 1) / burst * burst
	start := time.Now()
	for i := 0; i < ops; i += burst {
		off := i & mask
		s.sum += uint32(t.LookupBurst(probes[off:off+burst], idxs[:burst])) + idxs[0]
	}
	ns := elapsedNs(start, ops)
	s.keep()
	return ns
}

func benchLookupMap[K comparable](m map[K]uint32, probes []K, ops int) float64 {
	var s sink
	mask := len(probes) - 1
	start := time.Now()
	for i := 0; i < ops; i++ {
		idx, ok := m[probes[i&mask]]
		if ok {
			s.sum += idx
		}
	}
	ns := elapsedNs(start, ops)
	s.keep()
	return ns
}

// The churn loops delete the oldest key of the window and insert the next
// one; each step is one Delete and one Insert.

func benchChurnTable[K comparable](t *Table[K], w *workload[K], win *window, ops int) float64 {
	pool := w.pool
	var s sink
	j, k := w.next(win)
	start := time.Now()
	for i := 0; i < ops; i++ {
		t.Delete(pool[j])
		idx, _ := t.Insert(pool[k])
		s.sum += idx
		if j++; j == len(pool) {
			j = 0
		}
		if k++; k == len(pool) {
			k = 0
		}
	}
	ns := elapsedNs(start, ops)
	win.oldest = j
	s.keep()
	return ns
}

// benchChurnBurst needs burst to divide both n and len(pool), so that bursts
// never straddle the wrap.
func benchChurnBurst[K comparable](t *Table[K], w *workload[K], win *window, burst, ops int) float64 {
	if w.n%burst != 0 || len(w.pool)%burst != 0 {
		panic("cam: benchChurnBurst: burst must divide n and the pool length")
	}
	pool := w.pool
	var s sink
	var idxs [MaxBurst]uint32
	ops = (ops + burst - 1) / burst * burst
	j, k := w.next(win)
	start := time.Now()
	for i := 0; i < ops; i += burst {
		t.DeleteBurst(pool[j:j+burst], idxs[:burst])
		n, _ := t.InsertBurst(pool[k:k+burst], idxs[:burst])
		s.sum += uint32(n)
		if j += burst; j == len(pool) {
			j = 0
		}
		if k += burst; k == len(pool) {
			k = 0
		}
	}
	ns := elapsedNs(start, ops)
	win.oldest = j
	s.keep()
	return ns
}

func benchChurnMap[K comparable](m map[K]uint32, w *workload[K], win *window, ops int) float64 {
	pool := w.pool
	var s sink
	j, k := w.next(win)
	start := time.Now()
	for i := 0; i < ops; i++ {
		delete(m, pool[j])
		m[pool[k]] = uint32(i)
		if j++; j == len(pool) {
			j = 0
		}
		if k++; k == len(pool) {
			k = 0
		}
	}
	ns := elapsedNs(start, ops)
	win.oldest = j
	s.keep()
	return ns
}

// CompareWithMap measures lookups (hit) and insert+delete churn for n entries
// on this table type (TransportKey keys) and on a Go map with the same keys
// and the same random access order; returns ns/op for each. A churn op is one
// Delete plus one Insert. Run it with ops ≥ 1e6 on a quiet machine; it
// allocates only while building its key sets.
func CompareWithMap(n, ops int) (camLookupNs, mapLookupNs, camChurnNs, mapChurnNs float64) {
	w, t, m := compareSetup(n)
	camLookupNs = benchLookupTable(t, w.hits, ops)
	mapLookupNs = benchLookupMap(m, w.hits, ops)
	camChurnNs = benchChurnTable(t, w, &window{}, ops)
	mapChurnNs = benchChurnMap(m, w, &window{}, ops)
	return camLookupNs, mapLookupNs, camChurnNs, mapChurnNs
}

// CompareBurstWithMap is CompareWithMap for the burst calls: LookupBurst, and
// DeleteBurst plus InsertBurst, burst keys at a time (1 to MaxBurst, dividing
// both n and 65536); the map figures are the same single-key loops.
func CompareBurstWithMap(n, burst, ops int) (camLookupNs, mapLookupNs, camChurnNs, mapChurnNs float64) {
	if burst < 1 || burst > MaxBurst || n%burst != 0 || (1<<16)%burst != 0 {
		panic("cam: CompareBurstWithMap: burst must be 1 to MaxBurst and divide n and 65536")
	}
	w, t, m := compareSetup(n)
	camLookupNs = benchLookupBurst(t, w.hits, burst, ops)
	mapLookupNs = benchLookupMap(m, w.hits, ops)
	camChurnNs = benchChurnBurst(t, w, &window{}, burst, ops)
	mapChurnNs = benchChurnMap(m, w, &window{}, ops)
	return camLookupNs, mapLookupNs, camChurnNs, mapChurnNs
}

func compareSetup(n int) (*workload[TransportKey], *Table[TransportKey], map[TransportKey]uint32) {
	if n < 1 || n > MaxCapacity {
		panic("cam: compare: n out of range")
	}
	w := newWorkload(n, 1<<16, 1)
	t, err := New[TransportKey](Options{Capacity: n, Name: "compare"})
	if err != nil {
		panic(err)
	}
	fillTable(t, w)
	m := fillMap(w)
	// Warm both once so the timed passes do not pay for first-touch faults.
	benchLookupTable(t, w.hits, len(w.hits))
	benchLookupMap(m, w.hits, len(w.hits))
	return w, t, m
}
