// Package rings provides bounded lock-free rings (FIFO queues) over small
// value types, in the style of DPDK's rte_ring. They are meant to carry
// uint32-like handles (mbuf.Handle) between lcores: values, never pointers,
// so the garbage collector has nothing to scan and no write barriers run.
//
// Three kinds differ only in who may call them concurrently, and the name
// says it: SPSC (one producer goroutine, one consumer goroutine), MPSC (any
// number of producers, one consumer) and MPMC (any number of both). Using a
// single-side ring from two goroutines on that side corrupts it silently.
// Len, Free and Cap may be called from anywhere; under concurrent use Len
// and Free are snapshots.
//
// Every kind has the same four fast-path calls. Bulk calls are all or
// nothing: EnqueueBulk moves all of src or nothing, DequeueBulk fills all of
// dst or nothing. Burst calls move as many as fit (are held) and return the
// count. None of them blocks, allocates, locks or makes a system call; the
// multi-producer (multi-consumer) side may spin briefly, yielding the
// processor, while an earlier caller on the same side finishes publishing.
//
// That wait is the price of rte_ring's default multi-producer/consumer
// mode, and it is not preemption-safe: a goroutine descheduled between
// reserving its slots and publishing them holds back every later caller on
// its side until it runs again. With a few goroutines per processor (an
// lcore each, as intended) that is a rare pause; with many more goroutines
// than processors all calling in (sched/mcsq's 64 posting goroutines on
// two CPUs under -race) the waiters can convoy for seconds, each one's
// publication waiting for the previous one to be scheduled. Keep the
// number of concurrent callers on a side near GOMAXPROCS, and keep the
// goroutines that wait for the ring's other side from spinning without
// yielding (they steal the processor the holder needs).
//
// Ownership: a ring copies values. After Enqueue* returns n, the first n
// elements of src belong to the ring (for handles: the caller must no longer
// use those buffers) and the rest still belong to the caller. After Dequeue*
// returns n, the first n elements of dst belong to the caller. The slices
// themselves are never retained.
//
// Capacity is a power of two between 2 and MaxCapacity, and all of it is
// usable (unlike a default rte_ring, which keeps one slot empty): head and
// tail indexes run freely as uint64 and are masked only to address a slot.
//
// Layout follows rte_ring: the producer's and the consumer's indexes live on
// separate cache-line pairs, and each side keeps a copy of the other side's
// tail so it touches the other core's line only when the copy says the ring
// is full (empty). On amd64 a tail is published with a plain store (x86
// stores are release stores) rather than sync/atomic's fencing XCHG; see
// internal/release (release.Store64, in release_amd64_unsafe.go).
// bench/perf's RingTwoCoreBulk measures a producer/consumer pair the way
// DPDK's ring_perf_autotest does.
package rings
