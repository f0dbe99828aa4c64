package smallops

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// pingPong measures what one cache line costs to cross between CPUs a and
// b: two goroutines, each locked to a thread pinned to its CPU, take turns
// incrementing one atomic counter, each spinning until the other's turn
// is over. It returns the mean round trip (two line transfers) over
// rounds round trips, the floor under any exchange between the two
// endpoints' loops: a packet and its ACK each cross the mem port's rings
// at least once.
func pingPong(a, b, rounds int) (time.Duration, error) {
	// One line for the counter alone, so that nothing else shares it.
	var line struct {
		_ [64]byte
		n atomic.Uint64
		_ [56]byte
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	var start time.Time
	var ready atomic.Int32
	player := func(i, cpu int, parity uint64) {
		defer wg.Done()
		// Never unlocked: the goroutine exits locked, which ends its
		// pinned thread instead of handing it back to the runtime.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errs[i] = fmt.Errorf("pin to cpu %d: %w", cpu, err)
			ready.Add(1)
			return
		}
		ready.Add(1)
		for ready.Load() < 2 {
		}
		if i == 0 {
			start = time.Now()
		}
		end := uint64(2 * rounds)
		for {
			v := line.n.Load()
			if v >= end {
				return
			}
			if v&1 == parity {
				line.n.Store(v + 1)
			}
		}
	}
	wg.Add(2)
	go player(0, a, 0)
	go player(1, b, 1)
	wg.Wait()
	took := time.Since(start)
	if errs[0] != nil || errs[1] != nil {
		return 0, fmt.Errorf("ping-pong: %v %v", errs[0], errs[1])
	}
	return took / time.Duration(rounds), nil
}

// coreSiblings returns the CPUs sharing CPU c's core ("" if unknown).
func coreSiblings(c int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}
