package peregrine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Two goroutines in blocking calls on one PollCaller endpoint: one holds
// the poll token, the other waits for it or for its op, and both finish —
// a wake-up lost between the holder's release and the waiter's park would
// leave one hanging until the test's guard.
func TestCallerTwoGoroutinesOneEndpoint(t *testing.T) {
	h := testHost(t, HostOptions{})
	// The senders may outrun the receivers on a loaded machine: the
	// peer's "no slot" answers are retried, not counted against the test.
	patient := Options{Poll: PollCaller, RetryLimit: 255}
	a, b := pair(t, h, patient, patient)
	defer a.Close()
	defer b.Close()
	ca, cb, _ := connect(t, a, b, ConnOptions{Ordered: true, RecvSlots: 16})
	const rounds = 200
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	// Two senders on a, two receivers on b: each endpoint has two callers
	// competing for its token the whole time.
	for w := range 2 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if err := ca.Send(ctx, fmt.Appendf(nil, "w%d-%d", w, i)); err != nil {
					errs <- fmt.Errorf("send %d/%d: %w", w, i, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for i := range rounds {
				n, err := cb.Recv(ctx, buf)
				if err != nil {
					errs <- fmt.Errorf("recv %d/%d: %w", w, i, err)
					return
				}
				if !bytes.HasPrefix(buf[:n], []byte("w")) {
					errs <- fmt.Errorf("recv %d/%d: %q", w, i, buf[:n])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A caller blocked in Recv on a PollCaller endpoint, while another
// goroutine sends on the same endpoint (and so polls it), is ended by its
// context's cancel with ErrCancelled; the other's calls go on.
func TestCallerBlockedWhileAnotherCancels(t *testing.T) {
	h := testHost(t, HostOptions{})
	patient := Options{Poll: PollCaller, RetryLimit: 255}
	a, b := pair(t, h, patient, patient)
	defer a.Close()
	defer b.Close()
	ca, cb, _ := connect(t, a, b, ConnOptions{Ordered: true})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	blocked := make(chan error, 1)
	go func() {
		// Nothing is ever sent to b: only the cancel ends this.
		_, err := cb.Recv(ctx, make([]byte, 64))
		blocked <- err
	}()
	const msgs = 20
	sent := make(chan error, 1)
	go func() {
		for i := range msgs {
			if err := cb.Send(ctxT(t), []byte{byte(i)}); err != nil {
				sent <- err
				return
			}
			if i == msgs/2 {
				cancel()
			}
		}
		sent <- nil
	}()
	buf := make([]byte, 64)
	for i := range msgs {
		n, err := ca.Recv(ctxT(t), buf)
		if err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("recv %d: %d bytes %v, %v", i, n, buf[:n], err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("the other caller's send: %v", err)
	}
	if err := <-blocked; !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Recv ended with %v, want ErrCancelled", err)
	}
}

// A panic inside the engine's poll — on a caller's goroutine holding the
// poll token, or on the loop — must not leave the token held: Close would
// wait for it forever. The call that panicked (or, when the loop took the
// panic, the call waiting on it) returns, and Close ends the endpoint.
func TestCallerPanicInPollLeavesNoTokenHeld(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{Poll: PollCaller}, Options{Poll: PollCaller})
	defer b.Close()
	ca, _, _ := connect(t, a, b, ConnOptions{RecvSlots: 4})
	ctx := ctxT(t)
	a.e.panicOnPoll.Store(true)
	sent := make(chan any, 1)
	go func() {
		defer func() { sent <- recover() }()
		_ = ca.Send(ctx, []byte("into a poll that panics"))
	}()
	select {
	case <-sent:
	case <-ctx.Done():
		t.Fatal("the Send into a panicking poll never returned")
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close never returned: the poll token stayed with the poll that panicked")
	}
	if _, err := ca.Recv(ctx, make([]byte, 8)); !errors.Is(err, ErrClosed) {
		t.Fatalf("a call after Close: %v, want ErrClosed", err)
	}
}

// A caller alone on its processor yields ever less often after idle polls
// (up to maxYieldGap), and after every one again once a yield lets another
// goroutine run: the goroutine its op waits for may be that one.
func TestIdleYieldBacksOffAloneAndNotWhenShared(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var gap atomic.Int32
	since := 0
	for i := 0; i < 100_000 && gap.Load() < maxYieldGap; i++ {
		idleYield(&gap, &since)
	}
	require.EqualValues(t, maxYieldGap, gap.Load(), "yields with nothing else runnable should widen the gap to its bound")

	// Another goroutine on the one processor, runnable whenever this one
	// yields, holding it for longer than a yield alone takes.
	var stop atomic.Bool
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		for !stop.Load() {
			for start := time.Now(); time.Since(start) < 4*yieldedAlone; {
			}
			runtime.Gosched()
		}
	}()
	// Several yields: the scheduler takes the global run queue first once
	// in 61 schedules, and then a yield may come straight back to the
	// yielder, the other goroutine not run.
	for i := 0; i < 8*maxYieldGap && gap.Load() != 1; i++ {
		idleYield(&gap, &since)
	}
	stop.Store(true)
	<-ran
	require.EqualValues(t, 1, gap.Load(), "a yield that ran another goroutine should bring the gap back to 1")
}

// Under PollCaller a blocking Recv takes an already-queued message on its
// own goroutine (recvQueued): it must keep the call order — a Recv started
// before it gets the older message, even one still in the submission ring
// — and a message longer than its buffer still fails with ErrTooLarge and
// stays queued.
func TestCallerRecvOfQueuedMessagesKeepsOrder(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{Poll: PollCaller}, Options{Poll: PollCaller})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ca, cb, _ := connect(t, a, b, ConnOptions{RecvSlots: 8})
	ctx := ctxT(t)
	msgs := []string{"first", "the second message", "third", "fourth"}
	for _, m := range msgs {
		require.NoError(t, ca.Send(ctx, []byte(m)))
	}
	// The first two reach b's queue: a Recv polls b until the first is in.
	buf := make([]byte, 64)
	n, err := cb.Recv(ctx, buf)
	require.NoError(t, err)
	require.Equal(t, msgs[0], string(buf[:n]))

	// An asynchronous Recv started (submitted, not yet taken by a poll)
	// before a blocking one: it is owed the older message.
	var early Op
	earlyBuf := make([]byte, 64)
	require.NoError(t, cb.RecvAsync(&early, earlyBuf))
	n, err = cb.Recv(ctx, buf)
	require.NoError(t, err)
	require.Equal(t, msgs[2], string(buf[:n]), "the blocking Recv took a message owed to the Recv started before it")
	n, err = early.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, msgs[1], string(earlyBuf[:n]))

	// A buffer too short: ErrTooLarge, and the message stays for the next.
	_, err = cb.Recv(ctx, buf[:3])
	require.ErrorIs(t, err, ErrTooLarge)
	n, err = cb.Recv(ctx, buf)
	require.NoError(t, err)
	require.Equal(t, msgs[3], string(buf[:n]))
}

// A connection whose receive slots waited for room in the completion
// queue (listed in engine.reposts) and were posted later is off the list:
// it must be listed again the next time its slots wait, or they would stay
// unposted until one of its messages came in, and none can come into
// slots that are not posted.
func TestRepostListedAgainAfterItLeftTheList(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{Poll: PollCaller}, Options{Poll: PollCaller})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	_, cb, _ := connect(t, a, b, ConnOptions{RecvSlots: 4})
	e, cn := b.e, &cb.c
	for !e.token.CompareAndSwap(false, true) { // the engine is the test's from here
		runtime.Gosched()
	}
	defer e.release()
	listed := func() bool { return slices.Contains(e.reposts, cn) }
	for round := range 2 {
		cn.listRepost() // as repost does when the completion queue has no room
		require.True(t, listed(), "round %d: the waiting slots' connection is listed", round)
		e.postSlots() // room now: its slots are posted and it leaves the list
		require.False(t, listed(), "round %d: its slots posted, it leaves the list", round)
	}
}
