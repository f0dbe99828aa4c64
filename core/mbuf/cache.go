package mbuf

import (
	"github.com/peregrine-net/peregrine/internal/release"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/rings"
)

// Cache is a per-lcore stack of free handles in front of a pool's shared
// ring, like DPDK's rte_mempool_cache. It is owned by one goroutine and is
// not safe for concurrent use; other goroutines may only read the pool's
// InUse, Available and Stats, which the cache keeps current.
//
// Gets pop from the top of the stack (last freed, so likely still in the CPU
// cache); when the stack is short, one bulk dequeue refills it to about
// CacheSize/2 beyond the request. Puts push on top; when the stack would
// exceed CacheSize, its coldest (bottom) handles go back to the ring in one
// bulk enqueue, leaving about CacheSize/2. Requests larger than CacheSize go
// straight to the ring (a get takes from the stack too only when the ring
// alone is short).
//
// Publishing for other goroutines costs one atomic store per call, not per
// handle. Without Options.Debug, handles put into a cache are not checked:
// see the package documentation for what a double or foreign free does then.
type Cache struct {
	// Owner-only state.
	objs     []Handle // the stack: objs[:n], top at n-1; capacity 2*size
	n        int
	size     int
	half     int
	ring     *rings.MPMC[Handle]
	meta     []Meta
	pool     *Pool
	headroom uint16
	debug    bool
	closed   bool

	// Running totals published for other goroutines. The owner is the only
	// writer, so Load+Store replaces a locked add, and the fast path stores
	// just one of them per call; the stack length is derived from them
	// (refilled + stackIn - stackOut - flushed) instead of being stored too.
	stackOut   atomic.Uint64 // handles handed out from the stack
	stackIn    atomic.Uint64 // handles pushed onto the stack
	refilled   atomic.Uint64 // ring → stack
	flushed    atomic.Uint64 // stack → ring
	directOut  atomic.Uint64 // ring → caller, bypassing the stack
	directIn   atomic.Uint64 // caller → ring, bypassing the stack
	allocFails atomic.Uint64 // handles requested but not granted

	// Keeps the next heap object, maybe another lcore's cache, off the
	// cache lines this owner writes (128: adjacent-line prefetch).
	_ [128]byte
}

// bump adds n to a counter only this cache's owner writes. Readers on
// other cores only sum these counters into snapshots (InUse, Stats), so the
// store needs no ordering at all: an inlined plain store, ~12 % off a
// bulk-32 get+put next to the release store it replaced (package release).
func bump(counter *atomic.Uint64, n int) {
	release.StoreCounter64(counter, counter.Load()+uint64(n))
}

// GetBulk pops len(hs) free handles into hs, or none when fewer than
// len(hs) are free in the cache and the shared ring together, and returns
// how many. Metadata is left as the previous owner left it (use AllocBulk
// for packets).
func (c *Cache) GetBulk(hs []Handle) int {
	n := len(hs)
	if n == 0 {
		return 0
	}
	if n > c.n || c.debug {
		return c.getSlow(hs, true)
	}
	top := c.n - n
	if n == 1 { // single-packet calls are common; skip the memmove call
		hs[0] = c.objs[top]
	} else {
		copy(hs, c.objs[top:c.n])
	}
	c.n = top
	bump(&c.stackOut, n)
	return n
}

// getSlow serves what the inlined fast path of GetBulk does not: requests
// larger than the cache go to the ring directly, others short of handles
// refill first, and Debug mode's state checks. Bulk requests take all or
// nothing; burst requests take what there is.
func (c *Cache) getSlow(hs []Handle, bulk bool) int {
	n := len(hs)
	var got int
	switch {
	case n <= c.n:
		top := c.n - n
		copy(hs, c.objs[top:c.n])
		c.n = top
		got = n
		bump(&c.stackOut, n)
	case n > c.size:
		got = c.getBypass(hs, bulk)
	default:
		// Hand out the warm handles first; the refill goes to the bottom of
		// the stack and the surplus of it stays there.
		have := c.n
		copy(hs, c.objs[:have])
		need := n - have
		refill := c.ring.DequeueBurst(c.objs[:need+c.half])
		bump(&c.refilled, refill)
		switch {
		case refill >= need:
			copy(hs[have:], c.objs[refill-need:refill])
			c.n = refill - need
			got = n
		case bulk:
			copy(c.objs[refill:], hs[:have])
			c.n = refill + have
		default:
			copy(hs[have:], c.objs[:refill])
			c.n = 0
			got = have + refill
		}
		bump(&c.stackOut, got)
	}
	if got < n {
		bump(&c.allocFails, n-got)
	}
	if c.debug {
		c.pool.markAllocated(hs[:got])
	}
	return got
}

// getBypass serves a request larger than the cache from the ring, leaving
// the stack alone unless the ring alone is short.
func (c *Cache) getBypass(hs []Handle, bulk bool) int {
	n := len(hs)
	if bulk {
		if c.ring.DequeueBulk(hs) == n {
			bump(&c.directOut, n)
			return n
		}
		have := c.n
		if c.ring.DequeueBulk(hs[have:]) == 0 {
			return 0
		}
		copy(hs, c.objs[:have])
		c.n = 0
		bump(&c.directOut, n-have)
		bump(&c.stackOut, have)
		return n
	}
	got := c.ring.DequeueBurst(hs)
	bump(&c.directOut, got)
	if got < n && c.n > 0 {
		take := min(c.n, n-got)
		c.n -= take
		copy(hs[got:], c.objs[c.n:c.n+take])
		bump(&c.stackOut, take)
		got += take
	}
	return got
}

// PutBulk pushes the handles of hs onto the stack; the caller gives them
// up. Metadata is not touched.
func (c *Cache) PutBulk(hs []Handle) {
	n := len(hs)
	if n == 0 {
		return // poll loops free empty bursts; publishing nothing costs a store
	}
	if c.n+n > c.size || c.debug {
		c.putSlow(hs)
		return
	}
	if n == 1 {
		c.objs[c.n] = hs[0]
	} else {
		copy(c.objs[c.n:], hs)
	}
	c.n += n
	bump(&c.stackIn, n)
}

// putSlow serves what the inlined fast path of PutBulk does not: Debug
// mode's checks, requests larger than the cache (straight to the ring) and
// pushes that overflow the stack, which flush its bottom half.
func (c *Cache) putSlow(hs []Handle) {
	if c.debug {
		c.pool.markFree(hs)
	}
	n := len(hs)
	switch {
	case c.n+n <= c.size:
		copy(c.objs[c.n:], hs)
		c.n += n
		bump(&c.stackIn, n)
	case n > c.size:
		c.pool.putShared(hs)
		bump(&c.directIn, n)
	default:
		total := c.n + n
		copy(c.objs[c.n:total], hs)
		excess := total - c.half
		c.pool.putShared(c.objs[:excess])
		copy(c.objs, c.objs[excess:total])
		c.n = c.half
		bump(&c.flushed, excess)
		bump(&c.stackIn, n)
	}
}

// AllocBulk is GetBulk followed by a metadata reset (DataOff = Headroom,
// everything else zero), like rte_pktmbuf_alloc_bulk.
func (c *Cache) AllocBulk(hs []Handle) int {
	n := c.GetBulk(hs)
	c.resetMeta(hs[:n])
	return n
}

// AllocBurst allocates as many packets as are free, up to len(hs), resets
// their metadata and returns how many.
func (c *Cache) AllocBurst(hs []Handle) int {
	var n int
	if len(hs) <= c.n && !c.debug {
		n = c.GetBulk(hs)
	} else {
		n = c.getSlow(hs, false)
	}
	c.resetMeta(hs[:n])
	return n
}

func (c *Cache) resetMeta(hs []Handle) { resetMeta(c.meta, hs, c.headroom) }

// Free returns packets to the pool through the cache, like
// rte_pktmbuf_free_bulk; the caller gives up the handles.
func (c *Cache) Free(hs []Handle) { c.PutBulk(hs) }

// Flush gives every cached handle back to the shared ring. Call it before the
// owning goroutine exits, or whenever its frames should be usable by others.
func (c *Cache) Flush() {
	if c.n == 0 {
		return
	}
	c.pool.putShared(c.objs[:c.n])
	bump(&c.flushed, c.n)
	c.n = 0
}

// Close flushes the cache and detaches it from the pool (its counters stay
// in the pool's Stats). The cache must not be used afterwards. Close is
// idempotent.
func (c *Cache) Close() {
	if c.closed {
		return
	}
	c.Flush()
	c.closed = true
	c.pool.dropCache(c)
}

// Len returns how many handles the stack holds.
func (c *Cache) Len() int { return c.n }

// publishedLen is the stack length as seen from another goroutine. The four
// loads are not one snapshot, so clamp what a concurrent update can skew.
func (c *Cache) publishedLen() int {
	out, flushed := c.stackOut.Load(), c.flushed.Load()
	in, refilled := c.stackIn.Load(), c.refilled.Load()
	n := int64(refilled + in - out - flushed)
	return int(min(max(n, 0), int64(2*c.size)))
}

func (c *Cache) allocCount() uint64 { return c.stackOut.Load() + c.directOut.Load() }
func (c *Cache) freeCount() uint64  { return c.stackIn.Load() + c.directIn.Load() }
