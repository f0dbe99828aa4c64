package mbuf

import (
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/rings"
)

// hugePageSize is the unit a MAP_HUGETLB arena is rounded up to.
const hugePageSize = 2 << 20

// Pool is a fixed set of equal-size frames with per-frame metadata. All its
// methods may be called from any goroutine; the shared-path calls
// (AllocBulk, AllocBurst, Free) contend on one ring, so lcores should use a
// Cache each instead.
type Pool struct {
	name       string
	frames     int
	frameSize  int
	frameShift uint
	headroom   uint16
	cacheSize  int
	debug      bool
	hugePages  bool
	logger     *slog.Logger

	mapping []byte // the whole mmap'd region, kept for munmap
	mem     []byte // mapping[:frames*frameSize]: what Arena returns
	meta    []Meta
	state   []atomic.Uint32 // per-frame stateFree/stateAllocated; nil unless Debug
	ring    *rings.MPMC[Handle]

	cachesMu sync.Mutex               // serialises writers of caches
	caches   atomic.Pointer[[]*Cache] // copy-on-write, so readers take no lock

	closeMu sync.Mutex
	closed  bool

	// Counters of the shared path. Caches keep their own so that lcores do
	// not contend on these lines.
	_          [128]byte
	allocs     atomic.Uint64
	frees      atomic.Uint64
	allocFails atomic.Uint64
	_          [128]byte
}

// Stats is a snapshot of a pool's accounting. Counters only grow.
type Stats struct {
	Frames     int
	InUse      int    // frames allocated: neither in the shared store nor in a cache
	Allocs     uint64 // handles granted by every alloc/get call
	Frees      uint64 // handles returned by every free/put call
	AllocFails uint64 // handles requested but not granted
	HugePages  bool   // the arena is backed by hugepages
}

// New maps the arena, fills the shared store with every frame and returns
// the pool. Options are validated first; errors wrap ErrInvalidOptions.
func New(opts Options) (*Pool, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pool{
		name:       opts.Name,
		frames:     opts.Frames,
		frameSize:  opts.FrameSize,
		frameShift: uint(bits.TrailingZeros(uint(opts.FrameSize))),
		headroom:   uint16(opts.Headroom),
		cacheSize:  opts.CacheSize,
		debug:      opts.Debug,
		logger:     opts.Logger,
	}
	memLen := opts.Frames * opts.FrameSize
	if opts.HugePages {
		mapLen := (memLen + hugePageSize - 1) &^ (hugePageSize - 1)
		p.mapping, err = mapArena(mapLen, true)
		if err != nil {
			p.logger.Warn("mbuf: hugepages unavailable, using normal pages",
				"pool", p.name, "bytes", mapLen, "err", err,
				"hint", "reserve pages with: echo N > /proc/sys/vm/nr_hugepages")
		} else {
			p.hugePages = true
		}
	}
	if p.mapping == nil {
		if p.mapping, err = mapArena(memLen, false); err != nil {
			return nil, fmt.Errorf("mbuf: pool %q: mapping %d frames of %d bytes: %w", p.name, opts.Frames, opts.FrameSize, err)
		}
	}
	p.mem = p.mapping[:memLen:memLen]

	ringCap := 1 << bits.Len(uint(max(opts.Frames, 2)-1))
	if p.ring, err = rings.NewMPMC[Handle](ringCap); err != nil {
		_ = unmapArena(p.mapping)
		return nil, fmt.Errorf("mbuf: pool %q: shared store: %w", p.name, err)
	}
	p.meta = make([]Meta, opts.Frames)
	if opts.Debug {
		p.state = make([]atomic.Uint32, opts.Frames)
	}
	var batch [256]Handle
	for next := 0; next < opts.Frames; {
		n := min(len(batch), opts.Frames-next)
		for i := range n {
			batch[i] = Handle(next + i)
		}
		if p.ring.EnqueueBulk(batch[:n]) != n {
			panic("mbuf: shared store smaller than the pool")
		}
		next += n
	}
	p.caches.Store(new([]*Cache))
	return p, nil
}

// Close unmaps the arena. It refuses, returning an error that wraps ErrInUse,
// while frames are allocated (frames in caches count as free). Nothing may
// use the pool's memory after Close; later calls of Data and friends panic.
// Close is idempotent.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	if n := p.InUse(); n > 0 {
		return fmt.Errorf("mbuf: pool %q: cannot close with %d of %d frames in use: %w", p.name, n, p.frames, ErrInUse)
	}
	if err := unmapArena(p.mapping); err != nil {
		return fmt.Errorf("mbuf: pool %q: unmapping arena: %w", p.name, err)
	}
	p.closed = true
	p.mapping, p.mem = nil, nil
	return nil
}

// Name returns Options.Name.
func (p *Pool) Name() string { return p.name }

// Frames returns the number of frames.
func (p *Pool) Frames() int { return p.frames }

// FrameSize returns the size of each frame in bytes.
func (p *Pool) FrameSize() int { return p.frameSize }

// Headroom returns where a packet starts in its frame after an alloc.
func (p *Pool) Headroom() int { return int(p.headroom) }

// AllocBulk takes len(hs) frames from the shared store into hs and resets
// their metadata, or takes none and returns 0 when fewer are free.
func (p *Pool) AllocBulk(hs []Handle) int {
	if len(hs) == 0 {
		return 0
	}
	if p.ring.DequeueBulk(hs) == 0 {
		p.allocFails.Add(uint64(len(hs)))
		return 0
	}
	p.granted(hs)
	p.allocs.Add(uint64(len(hs)))
	return len(hs)
}

// AllocBurst takes as many frames as are free, up to len(hs), from the
// shared store into hs, resets their metadata and returns how many.
func (p *Pool) AllocBurst(hs []Handle) int {
	if len(hs) == 0 {
		return 0
	}
	n := p.ring.DequeueBurst(hs)
	if n < len(hs) {
		p.allocFails.Add(uint64(len(hs) - n))
	}
	if n > 0 {
		p.granted(hs[:n])
		p.allocs.Add(uint64(n))
	}
	return n
}

// Free returns every frame of hs to the shared store; the caller gives up
// the handles.
func (p *Pool) Free(hs []Handle) {
	if len(hs) == 0 {
		return
	}
	if p.debug {
		p.markFree(hs)
	}
	p.putShared(hs)
	p.frees.Add(uint64(len(hs)))
}

// granted prepares frames just taken from the store for their new owner.
func (p *Pool) granted(hs []Handle) {
	if p.debug {
		p.markAllocated(hs)
	}
	p.resetMeta(hs)
}

func (p *Pool) resetMeta(hs []Handle) { resetMeta(p.meta, hs, p.headroom) }

// resetMeta gives each frame of hs the metadata of a fresh packet. Zeroing
// in place and then setting one field compiles to stores from the zero
// register; copying a prepared Meta value instead went through the stack and
// cost twice as much.
func resetMeta(meta []Meta, hs []Handle, headroom uint16) {
	for _, h := range hs {
		m := &meta[h]
		*m = Meta{}
		m.DataOff = headroom
	}
}

// putShared moves hs into the shared ring. Its capacity is at least Frames,
// so it can only be full if more frames were freed than allocated.
func (p *Pool) putShared(hs []Handle) {
	if p.ring.EnqueueBulk(hs) != len(hs) {
		panic(fmt.Errorf("mbuf: pool %q: shared store overflow freeing %d handles: a frame was freed twice or a foreign handle was freed (set Options.Debug to find it)", p.name, len(hs)))
	}
}

// NewCache returns a new Cache of CacheSize for one goroutine.
func (p *Pool) NewCache() *Cache {
	c := &Cache{
		pool:     p,
		ring:     p.ring,
		meta:     p.meta,
		objs:     make([]Handle, 2*p.cacheSize),
		size:     p.cacheSize,
		half:     p.cacheSize / 2,
		headroom: p.headroom,
		debug:    p.debug,
	}
	p.cachesMu.Lock()
	defer p.cachesMu.Unlock()
	list := append(slices.Clone(*p.caches.Load()), c)
	p.caches.Store(&list)
	return c
}

func (p *Pool) dropCache(c *Cache) {
	p.cachesMu.Lock()
	defer p.cachesMu.Unlock()
	list := slices.DeleteFunc(slices.Clone(*p.caches.Load()), func(x *Cache) bool { return x == c })
	// Keep Stats monotonic: the shared counters inherit the cache's totals.
	p.allocs.Add(c.allocCount())
	p.frees.Add(c.freeCount())
	p.allocFails.Add(c.allocFails.Load())
	p.caches.Store(&list)
}

// InUse returns how many frames are allocated: neither in the shared store
// nor on a cache's stack. While other goroutines allocate and free it is a
// snapshot; it is exact when they are quiet.
func (p *Pool) InUse() int {
	free := p.ring.Len()
	for _, c := range *p.caches.Load() {
		free += c.publishedLen()
	}
	return min(max(p.frames-free, 0), p.frames)
}

// Available returns Frames() - InUse().
func (p *Pool) Available() int { return p.frames - p.InUse() }

// Stats returns a snapshot of the pool's counters, summed over the shared
// path and every cache.
func (p *Pool) Stats() Stats {
	// Every free follows its alloc, so reading all frees before all allocs
	// keeps Frees <= Allocs in a snapshot taken while caches run.
	caches := *p.caches.Load()
	s := Stats{Frames: p.frames, HugePages: p.hugePages}
	s.Frees = p.frees.Load()
	for _, c := range caches {
		s.Frees += c.freeCount()
	}
	s.Allocs = p.allocs.Load()
	s.AllocFails = p.allocFails.Load()
	for _, c := range caches {
		s.Allocs += c.allocCount()
		s.AllocFails += c.allocFails.Load()
	}
	s.InUse = p.InUse()
	return s
}

// maxLeaksNamed bounds how many leaked handles CheckLeaks lists.
const maxLeaksNamed = 16

// CheckLeaks returns nil when no frame is in use, else an error wrapping
// ErrLeak that names the count and, in Debug mode, up to 16 leaked handles.
// Call it when the pool should be quiet (caches flushed or not running).
func (p *Pool) CheckLeaks() error {
	n := p.InUse()
	if n == 0 {
		return nil
	}
	if p.state == nil {
		return fmt.Errorf("mbuf: pool %q: %d of %d frames leaked (set Options.Debug to name them): %w", p.name, n, p.frames, ErrLeak)
	}
	var named []string
	for h := range p.state {
		if p.state[h].Load() == stateAllocated {
			named = append(named, fmt.Sprint(h))
			if len(named) == maxLeaksNamed {
				break
			}
		}
	}
	list := strings.Join(named, ", ")
	if n > len(named) {
		list += ", ..."
	}
	return fmt.Errorf("mbuf: pool %q: %d of %d frames leaked (handles %s): %w", p.name, n, p.frames, list, ErrLeak)
}

// Arena returns all frame memory: Frames()*FrameSize() bytes, frame h at
// Offset(h). It is what AF_XDP registers as UMEM.
func (p *Pool) Arena() []byte { return p.mem }

// Offset returns the byte offset of frame h in Arena.
func (p *Pool) Offset(h Handle) uint64 { return uint64(h) << p.frameShift }

// HandleAt returns the frame containing arena offset off, and false when off
// is outside the arena.
func (p *Pool) HandleAt(off uint64) (Handle, bool) {
	if off >= uint64(p.frames)<<p.frameShift {
		return NoHandle, false
	}
	return Handle(off >> p.frameShift), true
}

// Valid reports whether h names a frame of this pool.
func (p *Pool) Valid(h Handle) bool { return uint64(h) < uint64(p.frames) }
