package clock

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTimeArithmetic(t *testing.T) {
	a := Time(1000)
	b := a.Add(1500 * time.Nanosecond)
	require.Equal(t, Time(2500), b)
	require.Equal(t, 1500*time.Nanosecond, b.Sub(a))
	require.True(t, a.Before(b))
	require.False(t, b.Before(a))
	require.True(t, b.After(a))
	require.False(t, a.After(a))
	require.Equal(t, "t+1.5ms", Time(1500*time.Microsecond).String())
	require.Equal(t, "t-2s", Time(-2*time.Second).String())
	require.Equal(t, "t+0s", Time(0).String())
}

func TestRealIsMonotonic(t *testing.T) {
	c := NewReal()
	prev := c.Now()
	require.GreaterOrEqual(t, prev, Time(0))
	for range 10000 {
		now := c.Now()
		require.GreaterOrEqual(t, now, prev)
		prev = now
	}
}

func TestVirtualSetAndAdvance(t *testing.T) {
	v := NewVirtual(100)
	require.Equal(t, Time(100), v.Now())
	require.NoError(t, v.Set(100), "setting the current time again is allowed")
	require.NoError(t, v.Set(250))
	require.Equal(t, Time(250), v.Now())

	err := v.Set(249)
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrTimeBackwards))
	require.Contains(t, err.Error(), "t+249ns")
	require.Equal(t, Time(250), v.Now(), "a refused Set leaves the clock unchanged")

	require.Equal(t, Time(260), v.Advance(10))
	require.Equal(t, Time(260), v.Advance(0))
	require.Panics(t, func() { v.Advance(-1) })
	require.Equal(t, Time(260), v.Now())
}

func TestVirtualConcurrentAdvanceAddsUp(t *testing.T) {
	v := NewVirtual(0)
	const goroutines, steps = 4, 1000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			prev := v.Now()
			for range steps {
				now := v.Advance(time.Nanosecond)
				if now <= prev {
					t.Errorf("virtual time did not grow: %v then %v", prev, now)
					return
				}
				prev = now
			}
		})
	}
	wg.Wait()
	require.Equal(t, Time(goroutines*steps), v.Now())
}

func TestVirtualConcurrentSetNeverGoesBack(t *testing.T) {
	v := NewVirtual(0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				_ = v.Set(Time(i*4 + g)) // some fail: another goroutine got further
			}
		})
	}
	wg.Wait()
	require.Equal(t, Time(999*4+3), v.Now(), "the largest time set wins")
}

func TestRealSharesTheMachineMonotonicOrigin(t *testing.T) {
	// Two clocks made at different times read the same instant and agree
	// with CLOCK_MONOTONIC. A process-local origin would be off by the
	// machine's uptime, so a second's tolerance (for a descheduled test
	// goroutine) still tells them apart.
	a := NewReal()
	b := NewReal()
	ta, tb := a.Now(), b.Now()
	require.InDelta(t, float64(ta), float64(tb), float64(time.Second))
	require.InDelta(t, float64(monotonicNow()), float64(a.Now()), float64(time.Second))
	require.Greater(t, ta, Time(0))
}
