package benchtopo

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// PingPong measures what one cache line costs to cross between CPUs a and
// b: two goroutines, each locked to a thread pinned to its CPU, take turns
// incrementing one atomic counter, each spinning until the other's turn
// is over. It returns the round trip (two line transfers) of the median
// batch of PingPongBatch round trips, so that a batch in which either
// thread was descheduled does not count: the floor under any exchange
// between two endpoints' loops on those CPUs, whose packets and ACKs
// each cross the mem port's rings. It moves with the machine: the same
// two virtual CPUs read 90 ns in one minute and 390 in another.
func PingPong(a, b, rounds int) (time.Duration, error) {
	batches := max(rounds/PingPongBatch, 1)
	stamps := make([]time.Time, batches+1)
	// One line for the counter alone, so that nothing else shares it.
	var line struct {
		_ [64]byte
		n atomic.Uint64
		_ [56]byte
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	var ready atomic.Int32
	player := func(i, cpu int, parity uint64) {
		defer wg.Done()
		// Never unlocked: the goroutine exits locked, which ends its
		// pinned thread instead of handing it back to the runtime.
		runtime.LockOSThread()
		if err := PinThread(cpu); err != nil {
			errs[i] = err
			ready.Add(1)
			return
		}
		ready.Add(1)
		for ready.Load() < 2 {
		}
		end := uint64(2 * batches * PingPongBatch)
		for {
			v := line.n.Load()
			if i == 0 && v%(2*PingPongBatch) == 0 && stamps[v/(2*PingPongBatch)].IsZero() {
				stamps[v/(2*PingPongBatch)] = time.Now()
			}
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
	if errs[0] != nil || errs[1] != nil {
		return 0, fmt.Errorf("ping-pong: %v %v", errs[0], errs[1])
	}
	took := make([]time.Duration, batches)
	for k := range took {
		took[k] = stamps[k+1].Sub(stamps[k])
	}
	slices.Sort(took)
	return took[len(took)/2] / PingPongBatch, nil
}

// PingPongRounds is the round trips the benchmarks time: a few
// hundredths of a second.
const PingPongRounds = 100_000

// PingPongBatch is the round trips timed together.
const PingPongBatch = 1000

// CoreSiblings returns the CPUs sharing CPU c's core ("" if unknown).
func CoreSiblings(c int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}
