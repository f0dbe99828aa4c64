package perf

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/bench/internal/benchtopo"
	"github.com/peregrine-net/peregrine/internal/release"
	"github.com/peregrine-net/peregrine/rings"
)

// perfRingSize matches DPDK's ring_perf_autotest, so the ring is never the
// bottleneck by being too small for the burst and figures compare directly.
const perfRingSize = 4096

// RingTwoCoreBulk runs a producer goroutine enqueueing bulks of burst elements
// and a consumer goroutine dequeuing bulks of burst, concurrently, until
// elems elements (rounded up to whole bulks) have passed. kind is "spsc"
// (SPSC ring) or "mpmc" (MPMC ring, driven through its multi-producer and
// multi-consumer paths by one goroutine each, as ring_perf's MP/MC test
// does). Each side is locked to an OS thread and, if cpus has two entries,
// pinned to cpus[0] (producer) and cpus[1] (consumer); a pinned thread is
// never unlocked, so the runtime discards it when the goroutine exits. Both
// sides leave a spin barrier together and each times its own loop; the
// results are wall nanoseconds per element as seen by the producer and by
// the consumer, like DPDK's per-core cycles/elem (add them for the total).
//
// A full (empty) ring is retried at once, as ring_perf does, so the waiting
// is part of the figure. For the `peregrine bench foundation` command and
// the rings benchmarks.
func RingTwoCoreBulk(kind string, burst int, elems int, cpus []int) (enqNsPerElem, deqNsPerElem float64, err error) {
	if burst < 1 || burst > rings.MaxCapacity/2 {
		return 0, 0, fmt.Errorf("perf: RingTwoCoreBulk: burst %d is out of range (use 1 to %d)", burst, rings.MaxCapacity/2)
	}
	if elems < 1 {
		return 0, 0, fmt.Errorf("perf: RingTwoCoreBulk: elems %d is too small (use 1 or more)", elems)
	}
	if len(cpus) != 0 && len(cpus) != 2 {
		return 0, 0, fmt.Errorf("perf: RingTwoCoreBulk: cpus %v must list exactly two cpus, or none to leave threads unpinned", cpus)
	}
	size := perfRingSize
	if 2*burst > size {
		size = 1 << bits.Len(uint(2*burst-1))
	}
	bulks := (elems + burst - 1) / burst

	var produce, consume func(buf []uint32)
	switch kind {
	case "spsc":
		r, err := rings.NewSPSC[uint32](size)
		if err != nil {
			return 0, 0, err
		}
		produce = func(buf []uint32) {
			for range bulks {
				for r.EnqueueBulk(buf) == 0 {
					release.CPURelax()
				}
			}
		}
		consume = func(buf []uint32) {
			for range bulks {
				for r.DequeueBulk(buf) == 0 {
					release.CPURelax()
				}
			}
		}
	case "mpmc":
		r, err := rings.NewMPMC[uint32](size)
		if err != nil {
			return 0, 0, err
		}
		produce = func(buf []uint32) {
			for range bulks {
				for r.EnqueueBulk(buf) == 0 {
					release.CPURelax()
				}
			}
		}
		consume = func(buf []uint32) {
			for range bulks {
				for r.DequeueBulk(buf) == 0 {
					release.CPURelax()
				}
			}
		}
	default:
		return 0, 0, fmt.Errorf("perf: RingTwoCoreBulk: kind %q is unknown (use \"spsc\" or \"mpmc\")", kind)
	}

	var (
		arrived atomic.Int32
		failed  atomic.Bool
		wg      sync.WaitGroup
		errs    [2]error
		elapsed [2]time.Duration
	)
	side := func(i int, loop func([]uint32)) {
		defer wg.Done()
		runtime.LockOSThread()
		if len(cpus) == 2 {
			if err := benchtopo.PinThread(cpus[i]); err != nil {
				errs[i] = err
				failed.Store(true)
			}
		}
		buf := make([]uint32, burst)
		for j := range buf {
			buf[j] = uint32(j)
		}
		arrived.Add(1)
		for spins := 0; arrived.Load() < 2; spins++ {
			// Yield now and then in case both goroutines share one P.
			if spins&1023 == 1023 {
				runtime.Gosched()
			}
		}
		if failed.Load() {
			return
		}
		start := time.Now()
		loop(buf)
		elapsed[i] = time.Since(start)
	}
	wg.Add(2)
	go side(0, produce)
	go side(1, consume)
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return 0, 0, err
	}
	n := float64(bulks) * float64(burst)
	return float64(elapsed[0].Nanoseconds()) / n, float64(elapsed[1].Nanoseconds()) / n, nil
}
