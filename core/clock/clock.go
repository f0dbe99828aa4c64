package clock

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Time is an instant, in nanoseconds since the origin of the Clock that produced
// it. It only grows: clocks are monotonic.
type Time int64

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns the duration t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Before reports whether t is earlier than u.
func (t Time) Before(u Time) bool { return t < u }

// After reports whether t is later than u.
func (t Time) After(u Time) bool { return t > u }

// String formats t as an offset from the clock's origin, e.g. "t+1.5ms".
func (t Time) String() string {
	if t < 0 {
		return "t-" + (-time.Duration(t)).String()
	}
	return "t+" + time.Duration(t).String()
}

// Clock tells the time. Implementations are safe for concurrent use.
type Clock interface {
	Now() Time
}

// Real is the machine's monotonic clock (CLOCK_MONOTONIC: nanoseconds since
// boot). It is unaffected by wall-clock changes (NTP steps, settimeofday),
// and every process on the machine reads the same origin, so a timestamp
// stamped by one process can be compared with Now in another (one-way
// latency between generator and sink processes).
type Real struct {
	origin time.Time // carries Go's monotonic reading; Since uses it
	base   Time      // CLOCK_MONOTONIC at origin
}

// NewReal returns a real clock. It reads CLOCK_MONOTONIC once; Now then costs
// what time.Since costs (a vDSO read, no syscall).
func NewReal() *Real {
	r := &Real{origin: time.Now()}
	r.base = monotonicNow()
	return r
}

// Now returns CLOCK_MONOTONIC nanoseconds.
func (r *Real) Now() Time { return r.base + Time(time.Since(r.origin)) }

// ErrTimeBackwards is returned by Virtual.Set when asked to move time back.
var ErrTimeBackwards = errors.New("clock: virtual time cannot go backwards")

// Virtual is a clock that moves only when told to. Simulations and tests drive
// it with Set and Advance; everything reading it sees the same instant. It is
// safe for concurrent use.
type Virtual struct {
	now atomic.Int64
}

// NewVirtual returns a virtual clock reading start.
func NewVirtual(start Time) *Virtual {
	v := &Virtual{}
	v.now.Store(int64(start))
	return v
}

// Now returns the time last set.
func (v *Virtual) Now() Time { return Time(v.now.Load()) }

// Set moves the clock to t. Setting the current time again is allowed (no-op);
// an earlier time is refused with an error wrapping ErrTimeBackwards and the
// clock is left unchanged, because code reading the clock relies on it never
// going back.
func (v *Virtual) Set(t Time) error {
	for {
		cur := v.now.Load()
		if int64(t) < cur {
			return fmt.Errorf("%w: set to %v but it already reads %v (set a time at or after Now)", ErrTimeBackwards, t, Time(cur))
		}
		if v.now.CompareAndSwap(cur, int64(t)) {
			return nil
		}
	}
}

// Advance moves the clock forward by d and returns the new time. Concurrent
// Advance calls add up. A negative d is a programming error and panics (use
// Set to reach an absolute time).
func (v *Virtual) Advance(d time.Duration) Time {
	if d < 0 {
		panic(fmt.Sprintf("clock: Virtual.Advance(%v): negative duration, time cannot go backwards", d))
	}
	return Time(v.now.Add(int64(d)))
}

var (
	_ Clock = (*Real)(nil)
	_ Clock = (*Virtual)(nil)
)
