//go:build !linux

package clock

// monotonicNow has no machine-wide monotonic clock to read here: Real then
// counts from process start.
func monotonicNow() Time { return 0 }
