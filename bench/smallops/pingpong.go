package smallops

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peregrine-net/peregrine/bench/internal/benchtopo"
)

// pingPong measures what one cache line costs to cross between CPUs a and
// b: two goroutines, each locked to a thread pinned to its CPU, take turns
// incrementing one atomic counter, each spinning until the other's turn
// is over. It returns the round trip (two line transfers) of the median
// batch of pingPongBatch round trips, so that a batch in which either
// thread was descheduled does not count: the floor under any exchange
// between the two endpoints' loops, whose packets and ACKs each cross the
// mem port's rings.
func pingPong(a, b, rounds int) (time.Duration, error) {
	batches := max(rounds/pingPongBatch, 1)
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
		if err := benchtopo.PinThread(cpu); err != nil {
			errs[i] = err
			ready.Add(1)
			return
		}
		ready.Add(1)
		for ready.Load() < 2 {
		}
		end := uint64(2 * batches * pingPongBatch)
		for {
			v := line.n.Load()
			if i == 0 && v%(2*pingPongBatch) == 0 && stamps[v/(2*pingPongBatch)].IsZero() {
				stamps[v/(2*pingPongBatch)] = time.Now()
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
	return took[len(took)/2] / pingPongBatch, nil
}

// pingPongBatch is the round trips timed together.
const pingPongBatch = 1000

// coreSiblings returns the CPUs sharing CPU c's core ("" if unknown).
func coreSiblings(c int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}
