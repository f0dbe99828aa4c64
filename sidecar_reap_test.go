package peregrine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/peregrine-net/peregrine"
)

// echoEvery accepts n connections on peer and echoes each one's messages
// until the test ends.
func echoEvery(t *testing.T, ctx context.Context, peer *peregrine.Endpoint, n int) {
	t.Helper()
	l, err := peer.Listen(peregrine.ConnOptions{RecvSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for range n {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go echoConn(ctx, c, 8192)
		}
	}()
}

// echoConn sends back each message c receives (up to size bytes) until a
// call fails.
func echoConn(ctx context.Context, c *peregrine.Conn, size int) {
	buf := make([]byte, size)
	for {
		k, err := c.Recv(ctx, buf)
		if err != nil || c.Send(ctx, buf[:k]) != nil {
			return
		}
	}
}

// Many goroutines in blocking calls on one attached endpoint, with ops
// nobody reaps (waited through Done) and ops reaped from a completion
// queue beside them: every call and op completes once, with its own data.
func TestSidecarManyWaitersReapOnce(t *testing.T) {
	mine, peer := openSidecar(t, peregrine.Options{})
	ctx := doorCtx(t)
	const blockers, rounds, async = 8, 40, 8
	echoEvery(t, ctx, peer, blockers+2)
	dial := func() *peregrine.Conn {
		c, err := mine.Dial(ctx, peer.Addr(), peregrine.ConnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// msg is goroutine g's message i: its length and bytes are its own.
	msg := func(g, i int) []byte {
		b := pattern(16+(g*rounds+i)%2000, g*1000+i)
		binary.LittleEndian.PutUint32(b, uint32(g<<16|i))
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, blockers+2)
	for g := range blockers {
		c := dial()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for i := range rounds {
				m := msg(g, i)
				if err := c.Send(ctx, m); err != nil {
					errs <- fmt.Errorf("blocker %d send %d: %w", g, i, err)
					return
				}
				n, err := c.Recv(ctx, buf)
				if err != nil || !bytes.Equal(buf[:n], m) {
					errs <- fmt.Errorf("blocker %d recv %d: %d bytes, %v", g, i, n, err)
					return
				}
			}
		}()
	}
	// Ops waited through Done: only another reaper or the completion
	// goroutine completes them.
	cd := dial()
	wg.Add(1)
	go func() {
		defer wg.Done()
		var s, r peregrine.Op
		buf := make([]byte, 4096)
		for i := range rounds {
			m := msg(blockers, i)
			if err := cd.RecvAsync(&r, buf); err != nil {
				errs <- err
				return
			}
			if err := cd.SendAsync(&s, m); err != nil {
				errs <- err
				return
			}
			for _, op := range []*peregrine.Op{&s, &r} {
				select {
				case <-op.Done():
				case <-ctx.Done():
					errs <- fmt.Errorf("done-waited op %d never completed", i)
					return
				}
			}
			if _, err := s.Result(); err != nil {
				errs <- fmt.Errorf("done-waited send %d: %w", i, err)
				return
			}
			if n, err := r.Result(); err != nil || !bytes.Equal(buf[:n], m) {
				errs <- fmt.Errorf("done-waited recv %d: %d bytes, %v", i, n, err)
				return
			}
		}
	}()
	// Ops reaped in batches from a completion queue: each comes out once.
	cq := dial()
	wg.Add(1)
	go func() {
		defer wg.Done()
		q, err := peregrine.NewCompletionQueue(2 * async)
		if err != nil {
			errs <- err
			return
		}
		ops := make([]peregrine.Op, 2*async)
		bufs := make([][]byte, async)
		for i := range async {
			bufs[i] = make([]byte, 4096)
			ops[i].CQ, ops[i].Tag = q, uint64(i)
			if err := cq.RecvAsync(&ops[i], bufs[i]); err != nil {
				errs <- err
				return
			}
		}
		for i := range async {
			ops[async+i].CQ, ops[async+i].Tag = q, uint64(async+i)
			if err := cq.SendAsync(&ops[async+i], msg(blockers+1, i)); err != nil {
				errs <- err
				return
			}
		}
		seen := make([]int, 2*async)
		out := make([]*peregrine.Op, 2*async)
		for total := 0; total < 2*async; {
			k, err := q.Wait(ctx, out)
			if err != nil {
				errs <- fmt.Errorf("completion queue after %d: %w", total, err)
				return
			}
			for _, op := range out[:k] {
				seen[op.Tag]++
				if _, err := op.Result(); err != nil {
					errs <- fmt.Errorf("queued op %d: %w", op.Tag, err)
					return
				}
			}
			total += k
		}
		// Unordered: each Recv holds one of the messages, whole, and
		// every message came back once.
		got := map[uint32]int{}
		for i := range async {
			if seen[i] != 1 || seen[async+i] != 1 {
				errs <- fmt.Errorf("queued op %d came out %d times, op %d %d times", i, seen[i], async+i, seen[async+i])
				return
			}
			n, _ := ops[i].Result()
			j := int(binary.LittleEndian.Uint32(bufs[i]) & 0xffff)
			if j >= async || !bytes.Equal(bufs[i][:n], msg(blockers+1, j)) {
				errs <- fmt.Errorf("queued recv %d holds %d bytes, not a message sent", i, n)
				return
			}
			got[uint32(j)]++
		}
		if len(got) != async {
			errs <- fmt.Errorf("queued recvs got %d distinct messages of %d", len(got), async)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A blocking Recv with nothing to take polls the completion ring a bounded
// number of times, then parks: other waiters' polls and completions on the
// same endpoint do not wake it, and its message does, with no poll after.
func TestSidecarIdleRecvParks(t *testing.T) {
	mine, peer := openSidecar(t, peregrine.Options{})
	ctx := doorCtx(t)
	var mu sync.Mutex
	polls := map[*peregrine.Op]int{}
	parked := make(chan *peregrine.Op, 16)
	peregrine.SetSidecarWaitHooks(mine,
		func(op *peregrine.Op) { mu.Lock(); polls[op]++; mu.Unlock() },
		func(op *peregrine.Op) {
			select {
			case parked <- op:
			default:
			}
		})
	pollsOf := func(op *peregrine.Op) int { mu.Lock(); defer mu.Unlock(); return polls[op] }
	echoEvery(t, ctx, peer, 2)
	dial := func() *peregrine.Conn {
		c, err := mine.Dial(ctx, peer.Addr(), peregrine.ConnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c, c2 := dial(), dial()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := c.Recv(ctx, buf)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	var idle *peregrine.Op
	select {
	case idle = <-parked:
	case <-ctx.Done():
		t.Fatal("the idle Recv never parked")
	}
	before := pollsOf(idle)
	if before == 0 || before > peregrine.SidecarIdlePolls {
		t.Fatalf("the idle Recv polled %d times before it parked, want 1..%d", before, peregrine.SidecarIdlePolls)
	}
	// Traffic on another connection of the same endpoint: its waiters
	// reap, take and give back the token, and complete ops.
	buf := make([]byte, 64)
	for i := range 20 {
		if err := c2.Send(ctx, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if n, err := c2.Recv(ctx, buf); err != nil || string(buf[:n]) != fmt.Sprint(i) {
			t.Fatalf("round trip %d beside the parked Recv: %q, %v", i, buf[:n], err)
		}
	}
	if p := pollsOf(idle); p != before {
		t.Fatalf("the parked Recv polled %d more times while others' ops completed", p-before)
	}
	if err := c.Send(ctx, []byte("wake")); err != nil { // the echo wakes it
		t.Fatal(err)
	}
	if s := <-got; s != "wake" {
		t.Fatalf("the parked Recv got %q, want wake", s)
	}
	if p := pollsOf(idle); p != before {
		t.Fatalf("the Recv polled %d more times after it parked", p-before)
	}
}

// The endpoint closed, or the appliance gone, while goroutines wait in
// every way (blocking calls reaping or parked, Op.Wait, a completion
// queue's Wait, Done): every one returns ErrClosed.
func TestSidecarGoneMidWait(t *testing.T) {
	for _, how := range []string{"closed", "appliance-gone"} {
		t.Run(how, func(t *testing.T) {
			mine, peer, srv := openSidecarServer(t, peregrine.Options{})
			ctx := doorCtx(t)
			parkedOne := make(chan struct{}, 64)
			peregrine.SetSidecarWaitHooks(mine, nil, func(*peregrine.Op) {
				parkedOne <- struct{}{}
			})
			c, _ := dialPeer(t, mine, peer, peregrine.ConnOptions{RecvSlots: 64})
			const parkers, spinners = 4, 4
			errs := make(chan error, parkers+spinners+3)
			recv := func() {
				_, err := c.Recv(ctx, make([]byte, 64))
				errs <- err
			}
			for range parkers {
				go recv()
			}
			for range parkers {
				<-parkedOne // each has polled its bound and parked
			}
			var waited, queued, doneOp peregrine.Op
			q, err := peregrine.NewCompletionQueue(2)
			if err != nil {
				t.Fatal(err)
			}
			queued.CQ = q
			for _, op := range []*peregrine.Op{&waited, &queued, &doneOp} {
				if err := c.RecvAsync(op, make([]byte, 64)); err != nil {
					t.Fatal(err)
				}
			}
			go func() { _, err := waited.Wait(ctx); errs <- err }()
			go func() {
				out := make([]*peregrine.Op, 1)
				if _, err := q.Wait(ctx, out); err != nil {
					errs <- err
					return
				}
				_, err := out[0].Result()
				errs <- err
			}()
			go func() {
				select {
				case <-doneOp.Done():
					_, err := doneOp.Result()
					errs <- err
				case <-ctx.Done():
					errs <- ctx.Err()
				}
			}()
			for range spinners {
				go recv() // most still reaping when the end comes
			}
			switch how {
			case "closed":
				if err := mine.Close(); err != nil {
					t.Fatal(err)
				}
			default:
				srv.Close()
			}
			for i := range parkers + spinners + 3 {
				if err := <-errs; !errors.Is(err, peregrine.ErrClosed) {
					t.Fatalf("waiter %d: %v, want ErrClosed", i, err)
				}
			}
			if err := c.Send(ctx, []byte("x")); !errors.Is(err, peregrine.ErrClosed) {
				t.Fatalf("send after: %v, want ErrClosed", err)
			}
		})
	}
}
