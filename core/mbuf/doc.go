// Package mbuf is peregrine's packet buffer pool. Every packet is a Handle: a
// uint32 index of one fixed-size frame in a Pool. Frame memory lives off the
// Go heap in one contiguous mmap'd arena (frame i at byte offset
// i*FrameSize), so the same memory can be registered as AF_XDP UMEM and the
// garbage collector never scans or moves it. Per-frame metadata (Meta) sits
// in a pointer-free slice on the Go heap, indexed by handle, which the GC
// does not scan either.
//
// # Ownership
//
// A frame has exactly one owner at a time:
//
//   - free: the pool owns it, either in the shared store (an MPMC ring) or
//     on the stack of one Cache;
//   - allocated: whoever got it from AllocBulk/AllocBurst/GetBulk owns it
//     until they pass it on. Handing a handle to a ring or to Port.TxBurst
//     passes ownership with it; the new owner frees it in the end;
//   - Free, PutBulk and Cache.Free take ownership back: after they return the
//     caller must not touch the handle, its Meta or its bytes again.
//
// Slices returned by Data, Frame, Append and Prepend, and the *Meta returned
// by Meta, alias pool memory: they are valid only while the caller owns the
// handle and only until Close.
//
// # Caches
//
// Like DPDK's rte_mempool_cache, each lcore (poll-loop goroutine) takes its
// own Cache from NewCache: a LIFO stack of free handles that refills from and
// flushes to the shared ring in bulk, so the common alloc/free touches no
// shared cache line. A Cache is owned by one goroutine; it must be flushed
// (Flush or Close) before that goroutine exits or its frames stay hidden from
// everyone else. Up to CacheSize frames may sit in each Cache, so a pool
// should have at least lcores*CacheSize frames more than the packets in
// flight.
//
// # Debug mode
//
// With Options.Debug every frame carries a free/allocated state word; freeing
// a handle >= Frames (foreign handle) or a frame that is already free (double
// free) panics with a *DebugError naming the handle and the pool, and the
// whole batch is refused. Without Debug there are no such checks: a double
// free goes unnoticed (two owners of one frame, wrong InUse; if the shared
// ring ever overflows the pool panics), and a foreign handle is caught only
// by Go's bounds checks when its metadata or bytes are touched (an index out
// of range panic), so it can never reach memory outside the pool.
package mbuf
