package peregrine

import (
	"context"
	"runtime"
	"testing"
)

// wakeYields runs round trips between two busy endpoints with GOMAXPROCS
// at procs and returns how many polls yielded their processor because they
// woke a caller.
func wakeYields(t *testing.T, procs, trips int) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	h := testHost(t, HostOptions{})
	ea, eb := pair(t, h, Options{Idle: IdleBusy}, Options{Idle: IdleBusy})
	defer func() { _ = ea.Close(); _ = eb.Close() }()
	ca, cb, _ := connect(t, ea, eb, ConnOptions{})
	ctx := context.Background()
	echoed := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for range trips {
			n, err := cb.Recv(ctx, buf)
			if err == nil {
				err = cb.Send(ctx, buf[:n])
			}
			if err != nil {
				echoed <- err
				return
			}
		}
		echoed <- nil
	}()
	msg, buf := make([]byte, 64), make([]byte, 64)
	for range trips {
		if err := ca.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.Recv(ctx, buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-echoed; err != nil {
		t.Fatal(err)
	}
	return ea.e.wakeYields.Load() + eb.e.wakeYields.Load()
}

// A loop that wakes a caller does not give its processor away when the
// process has processors to spare (the runtime runs the caller on one):
// on a loop's locked thread that yield was a futex hand-off each way, most
// of a round trip's time. With no processor to spare it still yields, or
// the caller would wait for the scheduler's next preemption.
func TestWakeYieldsOnlyWithoutSpareProcessors(t *testing.T) {
	const trips = 200
	if got := wakeYields(t, 8, trips); got != 0 {
		t.Errorf("GOMAXPROCS 8, two loops: %d polls yielded after waking a caller, want 0", got)
	}
	if got := wakeYields(t, 2, trips); got == 0 {
		t.Errorf("GOMAXPROCS 2, two loops: no poll yielded after waking a caller")
	}
}
