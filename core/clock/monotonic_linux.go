package clock

import "golang.org/x/sys/unix"

// monotonicNow reads CLOCK_MONOTONIC, the clock Go's own monotonic readings
// come from on Linux, so base + time.Since(origin) stays on it.
func monotonicNow() Time {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0 // cannot happen on Linux; fall back to a process-local origin
	}
	return Time(ts.Nano())
}
