package peregrine

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/peregrine-net/peregrine/internal/inloop"
)

// A poller attached to an endpoint runs on its loop, as often as the loop
// polls, and never again once detach has returned.
func TestPollerRunsOnTheLoopUntilDetached(t *testing.T) {
	eachPoll(t, func(t *testing.T) {
		h := testHost(t, HostOptions{})
		a, b := pair(t, h, Options{}, Options{})
		defer b.Close()
		defer a.Close()
		var runs atomic.Int64
		ran := make(chan struct{})
		detach, err := inloop.Attach(a, func() int {
			if runs.Add(1) == 100 {
				close(ran)
			}
			return 0
		})
		if err != nil {
			t.Fatal(err)
		}
		<-ran // the loop runs it without anyone asking
		detach()
		after := runs.Load()
		// The loop goes on: wait for it to poll many more times.
		e := a.e
		for r := e.loopRuns.Load(); e.loopRuns.Load() < r+100; {
			runtime.Gosched()
		}
		if got := runs.Load(); got != after {
			t.Fatalf("the poller ran %d times after detach returned", got-after)
		}
	})
}

func TestPollerRefusedWithoutALoop(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	defer b.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := inloop.Attach(a, func() int { return 0 }); !errors.Is(err, ErrClosed) {
		t.Fatalf("attach on a closed endpoint: %v, want ErrClosed", err)
	}
	if _, err := inloop.Attach("not an endpoint", func() int { return 0 }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("attach on something else: %v, want ErrInvalid", err)
	}
}
