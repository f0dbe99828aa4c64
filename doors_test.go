package peregrine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
)

// The behaviour tests that matter run against both doors: the endpoint
// under test ("mine") is opened in-process or attached to an appliance
// serving the same kind of endpoint; its peer is always in-process, on the
// other end of a mem pair.

var doorSeq atomic.Int64

type door struct {
	name string
	// open returns mine and the peer, closed at the test's end.
	open func(t *testing.T, opts peregrine.Options) (mine, peer *peregrine.Endpoint)
}

var doors = []door{
	{"in-process", openInProcess},
	{"in-process-caller", openInProcessCaller},
	{"sidecar", openSidecar},
}

func doorHost(t *testing.T) *peregrine.Host {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func doorPair(t *testing.T, h *peregrine.Host, opts peregrine.Options) (a, b *peregrine.Endpoint) {
	name := fmt.Sprintf("door%d", doorSeq.Add(1))
	opts.IP = netip.MustParseAddr("198.18.0.1")
	a, err := h.Open("mem:"+name+"/0", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err = h.Open("mem:"+name+"/1", peregrine.Options{IP: netip.MustParseAddr("198.18.0.2"), Poll: opts.Poll})
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func openInProcess(t *testing.T, opts peregrine.Options) (*peregrine.Endpoint, *peregrine.Endpoint) {
	h := doorHost(t)
	a, b := doorPair(t, h, opts)
	t.Cleanup(func() {
		a.Close()
		b.Close()
		if err := h.Close(); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	return a, b
}

// openInProcessCaller is openInProcess with both endpoints polled by
// their callers (PollCaller).
func openInProcessCaller(t *testing.T, opts peregrine.Options) (*peregrine.Endpoint, *peregrine.Endpoint) {
	opts.Poll = peregrine.PollCaller
	return openInProcess(t, opts)
}

// openSidecar runs an appliance (a host.Server polling over an endpoint
// opened with opts) and attaches to it.
func openSidecar(t *testing.T, opts peregrine.Options) (*peregrine.Endpoint, *peregrine.Endpoint) {
	mine, peer, _ := openSidecarServer(t, opts)
	return mine, peer
}

// openSidecarServer is openSidecar that also returns the appliance, for
// tests that take it away.
func openSidecarServer(t *testing.T, opts peregrine.Options) (mine, peer *peregrine.Endpoint, srv *host.Server) {
	mine, _, peer, srv = openSidecarAppliance(t, opts)
	return mine, peer, srv
}

// openSidecarAppliance is openSidecarServer that also returns the
// appliance's own endpoint (opened with opts).
func openSidecarAppliance(t *testing.T, opts peregrine.Options) (mine, a, peer *peregrine.Endpoint, srv *host.Server) {
	h := doorHost(t)
	a, b := doorPair(t, h, opts)
	mine, srv, stop := serveSidecar(t, a)
	t.Cleanup(func() {
		stop()
		a.Close()
		b.Close()
		if err := h.Close(); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	return mine, a, b, srv
}

// serveSidecar runs an appliance (host.Server) on a and attaches an
// application to it; stop detaches it and ends the appliance, leaving a
// open.
func serveSidecar(t testing.TB, a *peregrine.Endpoint) (mine *peregrine.Endpoint, srv *host.Server, stop func()) {
	sock := filepath.Join(t.TempDir(), "p.sock")
	srv, err := host.New(host.Options{Socket: sock, Endpoint: a, UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); srv.Run(ctx) }()
	if mine, err = peregrine.Attach(sock, peregrine.AttachOptions{}); err != nil {
		cancel()
		<-ran
		srv.Close()
		t.Fatal(err)
	}
	return mine, srv, func() { mine.Close(); cancel(); <-ran; srv.Close() }
}

func doorCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	t.Cleanup(cancel)
	return ctx
}

// dialPeer dials the peer from mine; accepted is the peer's side.
func dialPeer(t testing.TB, mine, peer *peregrine.Endpoint, opts peregrine.ConnOptions) (c, accepted *peregrine.Conn) {
	t.Helper()
	lo := opts
	lo.Ordered = false
	l, err := peer.Listen(lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := doorCtx(t)
	got := make(chan *peregrine.Conn, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	c, err = mine.Dial(ctx, peer.Addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	accepted = <-got
	if accepted == nil {
		t.FailNow()
	}
	return c, accepted
}

// peerSends has the peer dial mine and send msg; the connection is then
// queued for mine's Accept.
func peerSends(t *testing.T, ctx context.Context, mine, peer *peregrine.Endpoint, msg string) *peregrine.Conn {
	t.Helper()
	pc, err := peer.Dial(ctx, mine.Addr(), peregrine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Send(ctx, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	return pc
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}

// Messages both ways, of 0 bytes to 8 MiB, on a connection mine dialled and
// on one it accepted.
func TestDoorsSendRecv(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			opts := peregrine.ConnOptions{MaxMessage: 8 << 20, RecvSlots: 2}
			c, pc := dialPeer(t, mine, peer, opts)
			buf := make([]byte, 8<<20)
			for i, n := range []int{0, 1, 1000, 64 << 10, 64<<10 + 1, 1 << 20, 8 << 20} {
				msg := pattern(n, i)
				if err := c.Send(ctx, msg); err != nil {
					t.Fatalf("send %d bytes: %v", n, err)
				}
				got, err := pc.Recv(ctx, buf)
				if err != nil || !bytes.Equal(buf[:got], msg) {
					t.Fatalf("peer recv of %d bytes: %d, %v", n, got, err)
				}
				if err := pc.Send(ctx, msg); err != nil {
					t.Fatalf("peer send %d bytes: %v", n, err)
				}
				got, err = c.Recv(ctx, buf)
				if err != nil || !bytes.Equal(buf[:got], msg) {
					t.Fatalf("recv of %d bytes: %d, %v", n, got, err)
				}
			}
			// A Recv into a buffer too short fails with ErrTooLarge and the
			// message stays for a larger one.
			if err := pc.Send(ctx, pattern(100, 9)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Recv(ctx, buf[:10]); !errors.Is(err, peregrine.ErrTooLarge) {
				t.Fatalf("recv into 10 bytes: %v, want ErrTooLarge", err)
			}
			if n, err := c.Recv(ctx, buf); err != nil || !bytes.Equal(buf[:n], pattern(100, 9)) {
				t.Fatalf("recv after the short one: %d, %v", n, err)
			}
			// The other way round: the peer dials mine.
			l, err := mine.Listen(peregrine.ConnOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *peregrine.Conn, 1)
			go func() { a, _ := l.Accept(ctx); got <- a }()
			pd, err := peer.Dial(ctx, mine.Addr(), peregrine.ConnOptions{})
			if err != nil {
				t.Fatal(err)
			}
			acc := <-got
			if acc == nil {
				t.Fatal("accept failed")
			}
			if err := pd.Send(ctx, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if n, err := acc.Recv(ctx, buf); err != nil || string(buf[:n]) != "hello" {
				t.Fatalf("recv on the accepted connection: %q, %v", buf[:n], err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Push and Pull between a region of mine and one of the peer's, and the
// peer's push into mine, read through Bytes.
func TestDoorsPushPull(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			c, pc := dialPeer(t, mine, peer, peregrine.ConnOptions{})
			const size = 1 << 20
			local, err := mine.Register(pattern(size, 1), peregrine.RemoteWrite|peregrine.RemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			remote, err := peer.Register(pattern(size, 2), peregrine.RemoteWrite|peregrine.RemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(local.Bytes(), pattern(size, 1)) {
				t.Fatal("a region does not start as the memory registered")
			}
			// Push the first half of mine over the peer's second half.
			if err := c.Push(ctx, local, 0, size/2, remote.Remote(size/2)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(remote.Bytes()[size/2:], pattern(size, 1)[:size/2]) {
				t.Fatal("the push did not land")
			}
			// Pull the peer's first half into mine's second half.
			if err := c.Pull(ctx, local, size/2, size/2, remote.Remote(0)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(local.Bytes()[size/2:], pattern(size, 2)[:size/2]) {
				t.Fatal("the pull did not land")
			}
			// The peer pushes into mine and says so with a message.
			src, err := peer.Register(pattern(4096, 3), 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := pc.Push(ctx, src, 0, 4096, local.Remote(100)); err != nil {
				t.Fatal(err)
			}
			if err := pc.Send(ctx, []byte("pushed")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Recv(ctx, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(local.Bytes()[100:4196], pattern(4096, 3)) {
				t.Fatal("the peer's push into mine is not in Bytes")
			}
			// Refusals: a span past the region, a key the peer does not have.
			if err := c.Push(ctx, local, size-10, 11, remote.Remote(0)); !errors.Is(err, peregrine.ErrInvalid) {
				t.Fatalf("push past the local region: %v, want ErrInvalid", err)
			}
			if err := c.Pull(ctx, local, 0, 16, peregrine.RemoteAddr{Key: remote.Remote(0).Key + 1000}); !errors.Is(err, peregrine.ErrRemoteAccess) {
				t.Fatalf("pull from an unknown key: %v, want ErrRemoteAccess", err)
			}
			if err := mine.Deregister(local); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The asynchronous forms: ops reaped from a completion queue and waited.
func TestDoorsAsync(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			c, pc := dialPeer(t, mine, peer, peregrine.ConnOptions{})
			q, err := peregrine.NewCompletionQueue(32)
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			ops := make([]peregrine.Op, 2*n)
			bufs := make([][]byte, n)
			for i := range n {
				bufs[i] = make([]byte, 2000)
				ops[i].CQ, ops[i].Tag = q, uint64(i)
				if err := c.RecvAsync(&ops[i], bufs[i]); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				s := &ops[n+i]
				s.CQ, s.Tag = q, uint64(n+i)
				if err := c.SendAsync(s, pattern(1000+i, i)); err != nil {
					t.Fatal(err)
				}
			}
			go func() { // the peer echoes
				buf := make([]byte, 4096)
				for range n {
					k, err := pc.Recv(ctx, buf)
					if err != nil || pc.Send(ctx, buf[:k]) != nil {
						return
					}
				}
			}()
			out := make([]*peregrine.Op, 2*n)
			seen := 0
			for seen < 2*n {
				k, err := q.Wait(ctx, out)
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range out[:k] {
					m, err := op.Result()
					if err != nil {
						t.Fatalf("op %d: %v", op.Tag, err)
					}
					if op.Tag < n && m != 1000+int(op.Tag) && m < 1000 {
						t.Fatalf("recv %d: %d bytes", op.Tag, m)
					}
				}
				seen += k
			}
			// Unordered: each Recv holds one whole echoed message.
			for i := range n {
				m, _ := ops[i].Result()
				if !bytes.Equal(bufs[i][:m], pattern(m, m-1000)) {
					t.Fatalf("recv %d holds the wrong bytes", i)
				}
			}
			// Push and Pull, waited on.
			local, err := mine.Register(make([]byte, 8192), 0)
			if err != nil {
				t.Fatal(err)
			}
			copy(local.Bytes(), pattern(4096, 5))
			remote, err := peer.Register(make([]byte, 8192), peregrine.RemoteWrite|peregrine.RemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			var push, pull peregrine.Op
			if err := c.PushAsync(&push, local, 0, 4096, remote.Remote(4096)); err != nil {
				t.Fatal(err)
			}
			if _, err := push.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.PullAsync(&pull, local, 4096, 4096, remote.Remote(4096)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-pull.Done():
			case <-ctx.Done():
				t.Fatal("pull never completed")
			}
			if _, err := pull.Result(); err != nil || !bytes.Equal(local.Bytes()[4096:], pattern(4096, 5)) {
				t.Fatalf("pull: %v", err)
			}
		})
	}
}

// Closing a connection: a Recv waiting on it and every later call end with
// ErrClosed, and the peer's Recv too once it took what was sent before.
func TestDoorsClosedConn(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			c, pc := dialPeer(t, mine, peer, peregrine.ConnOptions{})
			var r peregrine.Op
			if err := c.RecvAsync(&r, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			if err := c.Send(ctx, []byte("last words")); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Wait(ctx); !errors.Is(err, peregrine.ErrClosed) {
				t.Fatalf("recv waiting at close: %v, want ErrClosed", err)
			}
			if err := c.Send(ctx, []byte("x")); !errors.Is(err, peregrine.ErrClosed) {
				t.Fatalf("send after close: %v, want ErrClosed", err)
			}
			buf := make([]byte, 64)
			if n, err := pc.Recv(ctx, buf); err != nil || string(buf[:n]) != "last words" {
				t.Fatalf("peer's recv: %q, %v", buf[:n], err)
			}
			if _, err := pc.Recv(ctx, buf); !errors.Is(err, peregrine.ErrClosed) {
				t.Fatalf("peer's recv after the close: %v, want ErrClosed", err)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("second close: %v", err)
			}
		})
	}
}

// A context cancelled mid-operation ends the call with ErrCancelled and the
// context's error; the connection goes on.
func TestDoorsCancelledContext(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			c, pc := dialPeer(t, mine, peer, peregrine.ConnOptions{})
			// An op in flight, its Wait's context cancelled: the op is
			// stopped and Wait returns once it has.
			var r peregrine.Op
			buf := make([]byte, 64)
			if err := c.RecvAsync(&r, buf); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := r.Wait(wctx); !errors.Is(err, peregrine.ErrCancelled) || !errors.Is(err, context.Canceled) {
				t.Fatalf("wait cancelled: %v, want ErrCancelled and context.Canceled", err)
			}
			// A blocking Recv whose deadline passes with nothing to take.
			dctx, dcancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer dcancel()
			if _, err := c.Recv(dctx, buf); !errors.Is(err, peregrine.ErrCancelled) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("recv past its deadline: %v, want ErrCancelled and context.DeadlineExceeded", err)
			}
			// The connection still carries messages, and the cancelled
			// Recvs took none.
			if err := pc.Send(ctx, []byte("after")); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Recv(ctx, buf); err != nil || string(buf[:n]) != "after" {
				t.Fatalf("recv after the cancels: %q, %v", buf[:n], err)
			}
		})
	}
}

// A peer that goes away: a Recv waiting on the connection ends (the
// transport's keepalives find the silence), and so do the calls after.
func TestDoorsPeerGone(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{IdleTimeout: 500 * time.Millisecond, RetryLimit: 3})
			ctx := doorCtx(t)
			c, _ := dialPeer(t, mine, peer, peregrine.ConnOptions{})
			var r peregrine.Op
			if err := c.RecvAsync(&r, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			if err := peer.Close(); err != nil {
				t.Fatal(err)
			}
			_, err := r.Wait(ctx)
			if !errors.Is(err, peregrine.ErrPeerGone) && !errors.Is(err, peregrine.ErrClosed) {
				t.Fatalf("recv from a peer gone: %v, want ErrPeerGone or ErrClosed", err)
			}
			if err := c.Send(ctx, []byte("x")); !errors.Is(err, peregrine.ErrPeerGone) && !errors.Is(err, peregrine.ErrClosed) {
				t.Fatalf("send to a peer gone: %v", err)
			}
		})
	}
}

// The blocking calls with the caller's buffers allocate nothing per call,
// through either door (the appliance's poll, the client, the peer
// included: AllocsPerRun counts the whole process).
func TestDoorsBlockingCallsDoNotAllocate(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			c, pc := dialPeer(t, mine, peer, peregrine.ConnOptions{})
			ctx := context.Background()
			msg := make([]byte, 1024)
			buf := make([]byte, 1024)
			pbuf := make([]byte, 1024)
			remote, _ := peer.Register(make([]byte, 1024), peregrine.RemoteWrite|peregrine.RemoteRead)
			local, _ := mine.Register(make([]byte, 1024), 0)
			dst := remote.Remote(0)
			var failed error
			note := func(err error) {
				if err != nil && failed == nil {
					failed = err
				}
			}
			roundTrip := func() {
				note(c.Send(ctx, msg))
				_, err := pc.Recv(ctx, pbuf)
				note(err)
				note(pc.Send(ctx, pbuf))
				_, err = c.Recv(ctx, buf)
				note(err)
				note(c.Push(ctx, local, 0, len(msg), dst))
				note(c.Pull(ctx, local, 0, len(msg), dst))
			}
			for range 50 {
				roundTrip()
			}
			if allocs := testing.AllocsPerRun(100, roundTrip); allocs != 0 {
				t.Fatalf("%.2f allocations per round trip (Send, Recv, Push, Pull), want 0", allocs)
			}
			if failed != nil {
				t.Fatal(failed)
			}
		})
	}
}

// A connection that fails after the peer dialled it and before Accept took
// it does not leave Accept waiting: Accept returns it (its calls then fail)
// or the next one, never blocks on it.
func TestDoorsAcceptAfterConnectionFailed(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			l, err := mine.Listen(peregrine.ConnOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := peerSends(t, ctx, mine, peer, "before the close").Close(); err != nil {
				t.Fatal(err)
			}
			// A second connection, alive, behind the failed one.
			peerSends(t, ctx, mine, peer, "alive")
			buf := make([]byte, 64)
			sawAlive := false
			for range 2 {
				c, err := l.Accept(ctx)
				if err != nil {
					t.Fatalf("accept: %v", err)
				}
				n, err := c.Recv(ctx, buf)
				if err == nil && string(buf[:n]) == "alive" {
					sawAlive = true
				}
			}
			if !sawAlive {
				t.Fatal("the live connection's message never came")
			}
		})
	}
}

// An Accept whose context ended does not swallow the next connection: the
// next Accept gets it.
func TestDoorsCancelledAcceptKeepsNextConnection(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			l, err := mine.Listen(peregrine.ConnOptions{})
			if err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := l.Accept(short); !errors.Is(err, peregrine.ErrCancelled) {
				t.Fatalf("cancelled accept: %v, want ErrCancelled", err)
			}
			peerSends(t, ctx, mine, peer, "hello")
			c, err := l.Accept(ctx)
			if err != nil {
				t.Fatalf("accept after a cancelled one: %v", err)
			}
			buf := make([]byte, 16)
			if n, err := c.Recv(ctx, buf); err != nil || string(buf[:n]) != "hello" {
				t.Fatalf("recv: %q, %v", buf[:n], err)
			}
		})
	}
}

// Closing a listener closes the connections peers dialled that no Accept
// took: the peer learns it, rather than waiting on a connection nobody
// will ever serve.
func TestDoorsListenerCloseEndsUnacceptedConnections(t *testing.T) {
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			mine, peer := d.open(t, peregrine.Options{})
			ctx := doorCtx(t)
			l, err := mine.Listen(peregrine.ConnOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The message is taken by the connection's receive slots, so
			// the connection is queued for Accept once Send returns.
			pc := peerSends(t, ctx, mine, peer, "anyone?")
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := pc.Recv(ctx, make([]byte, 16)); !errors.Is(err, peregrine.ErrClosed) {
				t.Fatalf("peer's recv on a connection the listener never accepted: %v, want ErrClosed", err)
			}
		})
	}
}
