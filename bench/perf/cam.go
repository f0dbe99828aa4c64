package perf

import (
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/cam"
)

// CAMWorkload is a pre-generated key set shared by the table and the map
// measurements, so both see identical key sequences and key generation is
// not timed.
type CAMWorkload[K comparable] struct {
	// N is how many keys a filled table or map holds.
	N int
	// pool holds N+probes distinct keys; pool[:N] is the initial content.
	// Churn step i deletes pool[i] and inserts pool[i+N], both modulo
	// len(pool): a sliding window like a retransmission queue's.
	pool []K
	// Hits are present keys in random order; Misses are absent keys.
	Hits, Misses []K
}

// NewCAMWorkload draws keys shaped like a retransmission table's (few
// connections, two windows, random PSNs); probes must be a power of two.
func NewCAMWorkload(n, probes int, seed uint64) *CAMWorkload[cam.TransportKey] {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	seen := make(map[cam.TransportKey]bool, n+2*probes)
	fresh := func() cam.TransportKey {
		for {
			k := cam.TransportKey{CID: uint32(r.IntN(max(n/16, 4))), Win: uint32(r.IntN(2)), PSN: r.Uint32()}
			if !seen[k] {
				seen[k] = true
				return k
			}
		}
	}
	w := &CAMWorkload[cam.TransportKey]{N: n, pool: make([]cam.TransportKey, n+probes),
		Hits: make([]cam.TransportKey, probes), Misses: make([]cam.TransportKey, probes)}
	for i := range w.pool {
		w.pool[i] = fresh()
	}
	for i := range w.Hits {
		w.Hits[i] = w.pool[r.IntN(n)]
		w.Misses[i] = fresh()
	}
	return w
}

// ConvertCAMWorkload maps every key of w through conv, for a map baseline
// with another key type holding the same values.
func ConvertCAMWorkload[K, M comparable](w *CAMWorkload[K], conv func(K) M) *CAMWorkload[M] {
	each := func(ks []K) []M {
		ms := make([]M, len(ks))
		for i, k := range ks {
			ms[i] = conv(k)
		}
		return ms
	}
	return &CAMWorkload[M]{N: w.N, pool: each(w.pool), Hits: each(w.Hits), Misses: each(w.Misses)}
}

// FillTable clears t and inserts the workload's first N keys.
func FillTable[K comparable](t *cam.Table[K], w *CAMWorkload[K]) {
	t.Clear()
	for _, k := range w.pool[:w.N] {
		if _, err := t.Insert(k); err != nil {
			panic("perf: CAM workload fill: " + err.Error())
		}
	}
}

// FillMap returns a map holding the workload's first N keys.
func FillMap[K comparable](w *CAMWorkload[K]) map[K]uint32 {
	m := make(map[K]uint32, w.N)
	for i, k := range w.pool[:w.N] {
		m[k] = uint32(i)
	}
	return m
}

// CAMWindow tracks which pool keys a filled table or map holds: N of them
// from pool[oldest] on, wrapping. The zero value is a table or map just
// filled by FillTable or FillMap; pass a fresh one per filled container.
type CAMWindow struct{ oldest int }

func (w *CAMWorkload[K]) next(win *CAMWindow) (oldest, newest int) {
	oldest = win.oldest
	newest = oldest + w.N
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

// CAMLookup times ops single-key Lookups of probes, in order, wrapping.
func CAMLookup[K comparable](t *cam.Table[K], probes []K, ops int) float64 {
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

// CAMLookupBurst times LookupBurst calls of burst probes each, ops keys in
// all (rounded up to whole bursts).
func CAMLookupBurst[K comparable](t *cam.Table[K], probes []K, burst, ops int) float64 {
	var s sink
	var idxs [cam.MaxBurst]uint32
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

// MapLookup is CAMLookup on a Go map.
func MapLookup[K comparable](m map[K]uint32, probes []K, ops int) float64 {
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

// CAMChurn times ops steps of one Delete and one Insert on t, filled from w
// and at the point of win.
func CAMChurn[K comparable](t *cam.Table[K], w *CAMWorkload[K], win *CAMWindow, ops int) float64 {
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

// CAMChurnBurst is CAMChurn with DeleteBurst and InsertBurst of burst keys.
// It needs burst to divide both N and len(pool), so that bursts never
// straddle the wrap.
func CAMChurnBurst[K comparable](t *cam.Table[K], w *CAMWorkload[K], win *CAMWindow, burst, ops int) float64 {
	if w.N%burst != 0 || len(w.pool)%burst != 0 {
		panic("perf: CAMChurnBurst: burst must divide N and the pool length")
	}
	pool := w.pool
	var s sink
	var idxs [cam.MaxBurst]uint32
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

// MapChurn is CAMChurn on a Go map: one delete and one assignment a step.
func MapChurn[K comparable](m map[K]uint32, w *CAMWorkload[K], win *CAMWindow, ops int) float64 {
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

// CAMVsMap measures lookups (hit) and insert+delete churn for n entries
// on a cam.Table of cam.TransportKey (the retransmission engine's key) and on a Go map with the same keys and the
// same random access order; returns ns/op for each. A churn op is one
// Delete plus one Insert. Run it with ops ≥ 1e6 on a quiet machine; it
// allocates only while building its key sets. For the
// `peregrine bench transport-core` command.
func CAMVsMap(n, ops int) (camLookupNs, mapLookupNs, camChurnNs, mapChurnNs float64) {
	w, t, m := compareSetup(n)
	camLookupNs = CAMLookup(t, w.Hits, ops)
	mapLookupNs = MapLookup(m, w.Hits, ops)
	camChurnNs = CAMChurn(t, w, &CAMWindow{}, ops)
	mapChurnNs = MapChurn(m, w, &CAMWindow{}, ops)
	return camLookupNs, mapLookupNs, camChurnNs, mapChurnNs
}

// CAMBurstVsMap is CAMVsMap for the burst calls: LookupBurst, and
// DeleteBurst plus InsertBurst, burst keys at a time (1 to cam.MaxBurst,
// dividing both n and 65536); the map figures are the same single-key loops.
func CAMBurstVsMap(n, burst, ops int) (camLookupNs, mapLookupNs, camChurnNs, mapChurnNs float64) {
	if burst < 1 || burst > cam.MaxBurst || n%burst != 0 || (1<<16)%burst != 0 {
		panic("perf: CAMBurstVsMap: burst must be 1 to cam.MaxBurst and divide n and 65536")
	}
	w, t, m := compareSetup(n)
	camLookupNs = CAMLookupBurst(t, w.Hits, burst, ops)
	mapLookupNs = MapLookup(m, w.Hits, ops)
	camChurnNs = CAMChurnBurst(t, w, &CAMWindow{}, burst, ops)
	mapChurnNs = MapChurn(m, w, &CAMWindow{}, ops)
	return camLookupNs, mapLookupNs, camChurnNs, mapChurnNs
}

func compareSetup(n int) (*CAMWorkload[cam.TransportKey], *cam.Table[cam.TransportKey], map[cam.TransportKey]uint32) {
	if n < 1 || n > cam.MaxCapacity {
		panic("perf: CAM compare: n out of range")
	}
	w := NewCAMWorkload(n, 1<<16, 1)
	t, err := cam.New[cam.TransportKey](cam.Options{Capacity: n, Name: "compare"})
	if err != nil {
		panic(err)
	}
	FillTable(t, w)
	m := FillMap(w)
	// Warm both once so the timed passes do not pay for first-touch faults.
	CAMLookup(t, w.Hits, len(w.Hits))
	MapLookup(m, w.Hits, len(w.Hits))
	return w, t, m
}
