package main

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ceilingWorkingSet is each thread's working set in machineScaling: a
// quarter of this machine's per-core L2, as a shard's hot state is.
const ceilingWorkingSet = 256 << 10

// machineScaling measures what the machine itself gives a second core:
// CPU-bound work with a working set in each core's own cache, on one
// thread pinned to cpus[0] for d, then on two threads pinned to cpus[0]
// and cpus[1] at once for d; it returns the two-thread work over the
// one-thread work, the median of three rounds. A shared-nothing program cannot scale past it: on
// real separate cores it is 2.0; a hypervisor that puts both virtual
// CPUs on one physical core's hyperthreads, or time-slices them,
// gives less.
func machineScaling(cpus []int, d time.Duration) (float64, error) {
	run := func(on []int) (uint64, error) {
		var (
			stop  atomic.Bool
			wg    sync.WaitGroup
			total atomic.Uint64
			errs  = make([]error, len(on))
		)
		for i, cpu := range on {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := spinWork(cpu, &stop)
				total.Add(n)
				errs[i] = err
			}()
		}
		time.Sleep(d) // the measured window itself, not a synchronisation
		stop.Store(true)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		return total.Load(), nil
	}
	// Three rounds, alternating, the median ratio: a neighbour's burst
	// on the host moves one window, not the answer.
	var ratios []float64
	for range 3 {
		one, err := run(cpus[:1])
		if err != nil {
			return 0, err
		}
		two, err := run(cpus[:2])
		if err != nil {
			return 0, err
		}
		if one == 0 {
			return 0, fmt.Errorf("the one-core run did no work in %v", d)
		}
		ratios = append(ratios, float64(two)/float64(one))
	}
	slices.Sort(ratios)
	return ratios[1], nil
}

// spinWork runs a dependent walk over its own working set on a thread
// pinned to cpu until stop, and returns the steps it took.
// It runs on a goroutine of its own and never unlocks its thread, so the
// pinned thread ends with it rather than returning to the runtime.
func spinWork(cpu int, stop *atomic.Bool) (uint64, error) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return 0, fmt.Errorf("pinning to CPU %d: %w", cpu, err)
	}
	words := make([]uint64, ceilingWorkingSet/8)
	for i := range words {
		words[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
	}
	mask := uint64(len(words) - 1)
	var steps uint64
	x := uint64(cpu) + 1
	for !stop.Load() {
		for range 1024 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			j := x & mask
			words[j] += x
			x += words[(j+1)&mask]
		}
		steps += 1024
	}
	words[0] = x // keep the walk's result live
	return steps, nil
}
