package tsc

import (
	"errors"
	"fmt"
	"time"
)

// calibrationTime is how long Hz watches both clocks. 100 ms keeps the
// error from the clock reads (tens of ns) below one part in a million.
const calibrationTime = 100 * time.Millisecond

// ErrNotCounting is returned by Hz when Read did not advance while the
// monotonic clock did.
var ErrNotCounting = errors.New("tsc: counter did not advance")

// Hz returns TSC ticks per second, measured against the monotonic clock over
// about 100 ms. On architectures where Supported is false it returns about
// 1e9 (Read counts nanoseconds there).
func Hz() (float64, error) {
	return hzOver(calibrationTime)
}

func hzOver(window time.Duration) (float64, error) {
	wallStart, ticksStart := pairedRead()
	// A sleep, not a spin: the counter is invariant (constant_tsc), so it
	// keeps counting while this thread is descheduled, and spinning would
	// steal a core from the benchmark being calibrated for.
	time.Sleep(window)
	wallEnd, ticksEnd := pairedRead()

	elapsed := wallEnd.Sub(wallStart)
	if elapsed <= 0 {
		return 0, fmt.Errorf("tsc: monotonic clock did not advance over %v", window)
	}
	if ticksEnd <= ticksStart {
		return 0, fmt.Errorf("%w over %v (start %d, end %d)", ErrNotCounting, elapsed, ticksStart, ticksEnd)
	}
	return float64(ticksEnd-ticksStart) / elapsed.Seconds(), nil
}

// pairedRead returns a monotonic instant and the counter read as close
// together as possible: of a few attempts, the one with the shortest gap
// between the two counter reads that bracket time.Now, so a preemption in
// the middle does not skew the calibration.
func pairedRead() (time.Time, uint64) {
	const attempts = 5
	var (
		bestWall  time.Time
		bestTicks uint64
		bestGap   uint64
	)
	for i := range attempts {
		before := Read()
		wall := time.Now()
		after := Read()
		gap := after - before
		if i == 0 || gap < bestGap {
			bestWall, bestTicks, bestGap = wall, before+gap/2, gap
		}
	}
	return bestWall, bestTicks
}
