package mbuf

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheRefillFlushModel drives one cache with gets and puts of many bulk
// sizes (below, at and above the cache size, around its half) and checks
// after every call that handles are unique, the stack stays within bounds
// and the pool's accounting matches the model exactly.
func TestCacheRefillFlushModel(t *testing.T) {
	const frames, cacheSize = 1024, 128
	sizes := []int{0, 1, 2, 3, 7, 8, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 300}
	p := newTestPool(t, Options{Frames: frames, CacheSize: cacheSize})
	c := p.NewCache()
	rng := rand.New(rand.NewPCG(1, 2))
	held := map[Handle]bool{}
	var order []Handle
	var wantAllocs, wantFrees, wantFails uint64
	buf := make([]Handle, 300)

	for step := range 8000 {
		n := sizes[rng.IntN(len(sizes))]
		if rng.IntN(2) == 0 {
			hs := buf[:n]
			var got int
			switch rng.IntN(3) {
			case 0:
				got = c.GetBulk(hs)
				if got != n {
					require.Equal(t, 0, got, "bulk is all or nothing")
					require.Less(t, frames-len(held), n, "step %d: bulk of %d failed with %d free", step, n, frames-len(held))
				}
			case 1:
				got = c.AllocBulk(hs)
				if got != n {
					require.Equal(t, 0, got)
					require.Less(t, frames-len(held), n)
				}
			default:
				got = c.AllocBurst(hs)
				require.Equal(t, min(n, frames-len(held)), got, "burst takes everything free")
			}
			wantAllocs += uint64(got)
			wantFails += uint64(n - got)
			for _, h := range hs[:got] {
				require.True(t, p.Valid(h))
				require.False(t, held[h], "step %d: handle %d granted while held", step, h)
				held[h] = true
				order = append(order, h)
			}
		} else {
			n = min(n, len(order))
			// Free a random contiguous run of what is held.
			at := rng.IntN(len(order) - n + 1)
			hs := append(buf[:0], order[at:at+n]...)
			order = append(order[:at], order[at+n:]...)
			for _, h := range hs {
				delete(held, h)
			}
			if rng.IntN(2) == 0 {
				c.PutBulk(hs)
			} else {
				c.Free(hs)
			}
			wantFrees += uint64(n)
		}
		require.LessOrEqual(t, c.Len(), cacheSize, "step %d", step)
		require.Equal(t, c.Len(), c.publishedLen(), "step %d", step)
		require.Equal(t, len(held), p.InUse(), "step %d", step)
		require.Equal(t, frames, p.ring.Len()+c.Len()+len(held), "step %d", step)
		if step%1000 == 0 {
			st := p.Stats()
			require.Equal(t, wantAllocs, st.Allocs)
			require.Equal(t, wantFrees, st.Frees)
			require.Equal(t, wantFails, st.AllocFails)
		}
	}
	c.Free(order)
	c.Flush()
	require.Equal(t, frames, p.ring.Len())
}

// TestCacheRefillAndFlushSizes checks the refill and flush amounts: a short
// cache refills to about half its size beyond the request, an overflowing
// one flushes down to half, and requests larger than the cache bypass it.
func TestCacheRefillAndFlushSizes(t *testing.T) {
	const frames, cacheSize = 4096, 256
	p := newTestPool(t, Options{Frames: frames, CacheSize: cacheSize})
	for _, bulk := range []int{1, 8, 32, 64, 100, 128, 255, 256} {
		t.Run(fmt.Sprint(bulk), func(t *testing.T) {
			c := p.NewCache()
			defer c.Close()
			hs := make([]Handle, bulk)
			require.Equal(t, bulk, c.GetBulk(hs))
			require.Equal(t, cacheSize/2, c.Len(), "refill leaves half the cache")
			c.PutBulk(hs)
			if cacheSize/2+bulk <= cacheSize {
				require.Equal(t, cacheSize/2+bulk, c.Len())
			} else {
				require.Equal(t, cacheSize/2, c.Len(), "overflow flushes down to half")
			}
			for c.Len()+bulk <= cacheSize {
				require.Equal(t, bulk, p.AllocBulk(hs))
				c.PutBulk(hs)
			}
			require.Equal(t, bulk, p.AllocBulk(hs))
			c.PutBulk(hs)
			require.Equal(t, cacheSize/2, c.Len(), "overflow flushes down to half")
			require.Equal(t, 0, p.InUse())
		})
	}
	t.Run("bypass", func(t *testing.T) {
		c := p.NewCache()
		defer c.Close()
		hs := make([]Handle, cacheSize+1)
		require.Equal(t, cacheSize+1, c.GetBulk(hs))
		require.Equal(t, 0, c.Len(), "a request larger than the cache goes to the ring")
		c.PutBulk(hs)
		require.Equal(t, 0, c.Len())
		require.Equal(t, 0, p.InUse())
		require.Equal(t, frames, p.ring.Len())
	})
	t.Run("cached handles first", func(t *testing.T) {
		c := p.NewCache()
		defer c.Close()
		warm := make([]Handle, 2)
		require.Equal(t, 2, p.AllocBulk(warm))
		c.PutBulk(warm)
		big := make([]Handle, 8)
		require.Equal(t, 8, c.GetBulk(big))
		require.Subset(t, big, warm, "the cached handles are handed out before the refill")
		c.PutBulk(big)
	})
}

// TestCacheCloseKeepsCounters checks that a closed cache's totals move to
// the pool, so Stats never goes backwards.
func TestCacheCloseKeepsCounters(t *testing.T) {
	p := newTestPool(t, Options{Frames: 256, CacheSize: 64})
	c := p.NewCache()
	hs := make([]Handle, 10)
	require.Equal(t, 10, c.AllocBulk(hs))
	c.Free(hs)
	require.Equal(t, 0, c.GetBulk(make([]Handle, 300)))
	before := p.Stats()
	c.Close()
	c.Close()
	require.Empty(t, *p.caches.Load())
	require.Equal(t, before, p.Stats())
	require.Equal(t, uint64(10), before.Allocs)
	require.Equal(t, uint64(300), before.AllocFails)
}

// TestConcurrentCaches runs several goroutines, each with its own cache,
// allocating and freeing at random while one more uses the shared path and
// another reads the accounting. A shared atomic bitmap proves that no handle
// is held by two owners at once; a per-frame tag written into the packet
// proves that no frame's bytes change under its owner.
func TestConcurrentCaches(t *testing.T) {
	const (
		frames    = 2048
		cacheSize = 64
		workers   = 4
		rounds    = 2500
	)
	for _, debug := range []bool{false, true} {
		t.Run(fmt.Sprint("debug=", debug), func(t *testing.T) {
			p := newTestPool(t, Options{Frames: frames, CacheSize: cacheSize, Debug: debug})
			var bitmap [frames / 64]atomic.Uint64
			var errs atomic.Int64
			var firstErr atomic.Value
			fail := func(format string, args ...any) {
				if errs.Add(1) == 1 {
					firstErr.Store(fmt.Sprintf(format, args...))
				}
			}
			take := func(owner int, hs []Handle) {
				for _, h := range hs {
					bit := uint64(1) << (h % 64)
					if old := bitmap[h/64].Or(bit); old&bit != 0 {
						fail("worker %d got handle %d already held", owner, h)
					}
					tag := p.Append(h, 8)
					if tag == nil {
						fail("worker %d: Append on fresh handle %d failed", owner, h)
						continue
					}
					tag[0], tag[1], tag[2], tag[3] = byte(owner), byte(h), byte(h>>8), byte(h>>16)
					p.Meta(h).User[0] = uint64(owner)<<32 | uint64(h)
				}
			}
			give := func(owner int, hs []Handle) {
				for _, h := range hs {
					d := p.Data(h)
					if len(d) != 8 || d[0] != byte(owner) || d[1] != byte(h) || d[2] != byte(h>>8) || d[3] != byte(h>>16) ||
						p.Meta(h).User[0] != uint64(owner)<<32|uint64(h) {
						fail("worker %d: frame %d changed under its owner", owner, h)
					}
					bit := uint64(1) << (h % 64)
					if old := bitmap[h/64].And(^bit); old&bit == 0 {
						fail("worker %d freed handle %d it did not hold", owner, h)
					}
				}
			}
			sizes := []int{1, 4, 8, 32, 64, 65, 100}
			var wg sync.WaitGroup
			var done atomic.Bool
			work := func(owner int, alloc func([]Handle) int, free func([]Handle)) {
				rng := rand.New(rand.NewPCG(uint64(owner), 7))
				var held []Handle
				buf := make([]Handle, 100)
				for range rounds {
					n := sizes[rng.IntN(len(sizes))]
					if rng.IntN(2) == 0 && len(held) < 300 {
						got := alloc(buf[:n])
						take(owner, buf[:got])
						held = append(held, buf[:got]...)
					} else {
						n = min(n, len(held))
						give(owner, held[len(held)-n:])
						free(held[len(held)-n:])
						held = held[:len(held)-n]
					}
				}
				give(owner, held)
				free(held)
			}
			wg.Add(workers + 1)
			caches := make([]*Cache, workers)
			for w := range workers {
				c := p.NewCache()
				caches[w] = c
				alloc := c.AllocBulk
				if w%2 == 1 {
					alloc = c.AllocBurst
				}
				go func() {
					defer wg.Done()
					work(w, alloc, c.Free)
					c.Flush()
				}()
			}
			go func() {
				defer wg.Done()
				work(workers, p.AllocBurst, p.Free)
			}()
			reader := make(chan struct{})
			go func() {
				defer close(reader)
				for !done.Load() {
					if n := p.InUse(); n < 0 || n > frames {
						fail("InUse %d out of range", n)
					}
					st := p.Stats()
					if st.Frees > st.Allocs {
						fail("stats: frees %d above allocs %d", st.Frees, st.Allocs)
					}
				}
			}()
			wg.Wait()
			done.Store(true)
			<-reader
			if errs.Load() > 0 {
				t.Fatalf("%d errors, first: %s", errs.Load(), firstErr.Load())
			}
			for _, c := range caches {
				require.Equal(t, 0, c.Len())
			}
			require.Equal(t, 0, p.InUse())
			require.NoError(t, p.CheckLeaks())
			st := p.Stats()
			require.Equal(t, st.Allocs, st.Frees)
			require.Positive(t, st.Allocs)
			require.Equal(t, frames, p.ring.Len())
		})
	}
}
