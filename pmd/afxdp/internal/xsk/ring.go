package xsk

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Desc is one RX or TX descriptor: where a packet starts in the UMEM and its
// length (struct xdp_desc).
type Desc = unix.XDPDesc

// ring is the index state shared by the four ring kinds. The pointers point
// into the ring's mmap'd page, shared with the kernel.
type ring struct {
	producer *uint32
	consumer *uint32
	flags    *uint32
	mask     uint32
	size     uint32
	// Private copies; see the package doc. For a producer ring cachedCons
	// holds consumer+size, so cachedCons-cachedProd is the free room.
	cachedProd uint32
	cachedCons uint32
	mapping    []byte
}

func (r *ring) initProducer() {
	r.cachedProd = atomic.LoadUint32(r.producer)
	r.cachedCons = atomic.LoadUint32(r.consumer) + r.size
}

func (r *ring) initConsumer() {
	r.cachedProd = atomic.LoadUint32(r.producer)
	r.cachedCons = atomic.LoadUint32(r.consumer)
}

// Free returns how many entries a producer may write now. The kernel's
// consumer index is read only when fewer than want are known to be free.
func (r *ring) Free(want uint32) uint32 {
	free := r.cachedCons - r.cachedProd
	if free >= want {
		return free
	}
	r.cachedCons = atomic.LoadUint32(r.consumer) + r.size
	return r.cachedCons - r.cachedProd
}

// Submit publishes the next n entries written after Index to the kernel.
// The atomic store orders the entry writes before the index update.
func (r *ring) Submit(n uint32) {
	r.cachedProd += n
	atomic.StoreUint32(r.producer, r.cachedProd)
}

// Avail returns how many entries, up to want, a consumer may read now. The
// kernel's producer index is read only when fewer than want are known.
func (r *ring) Avail(want uint32) uint32 {
	n := r.cachedProd - r.cachedCons
	if n < want {
		r.cachedProd = atomic.LoadUint32(r.producer)
		n = r.cachedProd - r.cachedCons
	}
	return min(n, want)
}

// Release hands the next n entries after Index back to the kernel.
func (r *ring) Release(n uint32) {
	r.cachedCons += n
	atomic.StoreUint32(r.consumer, r.cachedCons)
}

// Pending returns how many produced entries the kernel has not consumed yet
// (producer rings only).
func (r *ring) Pending() uint32 {
	return r.cachedProd - atomic.LoadUint32(r.consumer)
}

// NeedWakeup reports whether the kernel asked for a syscall to make
// progress on this ring (XDP_RING_NEED_WAKEUP).
func (r *ring) NeedWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// Size returns the number of entries of the ring.
func (r *ring) Size() uint32 { return r.size }

// AddrRing is a fill or completion ring: entries are UMEM addresses.
type AddrRing struct {
	ring
	addrs []uint64
}

// ProdIndex is where the producer writes its next entry (Set(ProdIndex()+i)).
func (r *AddrRing) ProdIndex() uint32 { return r.cachedProd }

// ConsIndex is the consumer's next entry to read (Get(ConsIndex()+i)).
func (r *AddrRing) ConsIndex() uint32 { return r.cachedCons }

// Set writes entry i (an absolute index, masked here).
func (r *AddrRing) Set(i uint32, addr uint64) { r.addrs[i&r.mask] = addr }

// Get reads entry i (an absolute index, masked here).
func (r *AddrRing) Get(i uint32) uint64 { return r.addrs[i&r.mask] }

// DescRing is an RX or TX ring: entries are descriptors.
type DescRing struct {
	ring
	descs []Desc
}

// ProdIndex is where the producer writes its next entry.
func (r *DescRing) ProdIndex() uint32 { return r.cachedProd }

// ConsIndex is the consumer's next entry to read.
func (r *DescRing) ConsIndex() uint32 { return r.cachedCons }

// At returns entry i (an absolute index, masked here).
func (r *DescRing) At(i uint32) *Desc { return &r.descs[i&r.mask] }

// mapRing maps one ring of fd at page offset pgoff, with size entries of
// entrySize bytes, and points r's indexes into it.
func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, size uint32, entrySize uintptr) (ring, unsafe.Pointer, error) {
	length := int(off.Desc) + int(size)*int(entrySize)
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, nil, err
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	r := ring{
		producer: (*uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*uint32)(unsafe.Add(base, off.Consumer)),
		flags:    (*uint32)(unsafe.Add(base, off.Flags)),
		mask:     size - 1,
		size:     size,
		mapping:  mem,
	}
	return r, unsafe.Add(base, off.Desc), nil
}

func mapAddrRing(fd int, pgoff int64, off unix.XDPRingOffset, size uint32, producer bool) (*AddrRing, error) {
	r, entries, err := mapRing(fd, pgoff, off, size, unsafe.Sizeof(uint64(0)))
	if err != nil {
		return nil, err
	}
	ar := &AddrRing{ring: r, addrs: unsafe.Slice((*uint64)(entries), size)}
	if producer {
		ar.initProducer()
	} else {
		ar.initConsumer()
	}
	return ar, nil
}

func mapDescRing(fd int, pgoff int64, off unix.XDPRingOffset, size uint32, producer bool) (*DescRing, error) {
	r, entries, err := mapRing(fd, pgoff, off, size, unsafe.Sizeof(Desc{}))
	if err != nil {
		return nil, err
	}
	dr := &DescRing{ring: r, descs: unsafe.Slice((*Desc)(entries), size)}
	if producer {
		dr.initProducer()
	} else {
		dr.initConsumer()
	}
	return dr, nil
}

func (r *ring) unmap() error {
	if r == nil || r.mapping == nil {
		return nil
	}
	err := unix.Munmap(r.mapping)
	r.mapping = nil
	return err
}
