package peregrine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/pmd"
)

// wire is the fabric emulator between two endpoints, on its own loop, with
// a switch that takes the link down both ways (a black hole: the peer is
// gone as far as the transport can tell).
type wire struct {
	fs      []*fabric.Fabric // one per queue pair
	down    atomic.Bool
	applied bool
	loop    *lcore.Loop
	ports   []port.Port
}

func (w *wire) Name() string { return "test-wire" }

func (w *wire) Poll(now clock.Time) int {
	if d := w.down.Load(); d != w.applied {
		for _, f := range w.fs {
			f.SetLinkDown(fabric.Both, d)
		}
		w.applied = d
	}
	n := 0
	for _, f := range w.fs {
		n += f.Poll(now)
	}
	return n
}

func (w *wire) Stop(now clock.Time) {
	for _, f := range w.fs {
		f.Stop(now)
	}
}

// lossyPair opens endpoints a and b with the fabric between them: a on
// mem:NAMEa/0, b on mem:NAMEb/1, the fabric on the two inner ends. With
// Shards the pairs have a queue per shard (both ends need the same count),
// and a fabric joins each queue of one inner end to the same queue of the
// other, each with its own seed.
func lossyPair(t *testing.T, h *Host, profile string, seed uint64, a, b Options) (*Endpoint, *Endpoint, *wire) {
	t.Helper()
	name := fmt.Sprintf("f%d", pairSeq.Add(1))
	p, err := fabric.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	a.IP, b.IP = netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	if a.Poll == PollLoop && b.Poll == PollLoop {
		a.Poll, b.Poll = testPoll, testPoll
	}
	ea, err := h.Open("mem:"+name+"a/0", a)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := h.Open("mem:"+name+"b/1", b)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{}
	q := ""
	if a.Shards > 1 {
		q = fmt.Sprintf("?queues=%d", a.Shards)
	}
	for _, s := range []string{"mem:" + name + "a/1" + q, "mem:" + name + "b/0" + q} {
		pt, err := pmd.Open(h.h.env, s)
		if err != nil {
			t.Fatal(err)
		}
		w.ports = append(w.ports, pt)
	}
	for i := range w.ports[0].Info().Queues {
		f, err := fabric.New(fabric.Options{A: w.ports[0], B: w.ports[1], QueueA: i, QueueB: i, Pool: h.h.pool, AtoB: p, BtoA: p, Seed: seed + uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		w.fs = append(w.fs, f)
	}
	w.loop, err = lcore.New(lcore.Options{Name: "wire", CPU: -1, Clock: h.h.clock, Idle: lcore.IdlePolicy{Mode: lcore.IdleAdaptive}, Stages: []lcore.Stage{w}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Endpoints first (their frames come home), then the wire.
		_ = ea.Close()
		_ = eb.Close()
		w.loop.Stop()
		if err := w.loop.Wait(); err != nil {
			t.Error(err)
		}
		for _, f := range w.fs {
			_ = f.Close()
		}
		for _, pt := range w.ports {
			_ = pt.Close()
		}
		if n := h.h.pool.InUse(); n != 0 {
			t.Errorf("pool: %d frames in use after everything closed", n)
		}
	})
	return ea, eb, w
}

// ctxT is a test's guard against a hang, not a measure of speed: long
// enough for the slowest machine CI runs on, loaded.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Every message crosses a lossy, reordering fabric whole, exactly once and
// in order (on an ordered connection), both ways.
func TestLossyFabricMessages(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			eachPoll(t, func(t *testing.T) { testLossyFabricMessages(t, shards) })
		})
	}
}

func testLossyFabricMessages(t *testing.T, shards int) {
	h := testHost(t, HostOptions{})
	// Nothing here asserts on the retry limit: a generous one keeps a
	// loaded machine's late loops from turning loss into ErrPeerGone.
	a, b, _ := lossyPair(t, h, "loss=3%,reorder=3%/50us", 7, Options{RetryLimit: 50, Shards: shards}, Options{RetryLimit: 50, Shards: shards})
	ca, cb, l := connect(t, a, b, ConnOptions{Ordered: true, RecvSlots: 16})
	// With shards the messages go on the last shard's connection, not
	// the first's: the dials are dealt round robin.
	for range shards - 1 {
		ca, cb = dialAccept(t, a, b, l, ConnOptions{Ordered: true, RecvSlots: 16})
	}
	ctx := ctxT(t)
	// Enough messages, of up to 12 KiB (a few packets each), that loss and
	// reordering hit most of them, few enough for a loaded machine.
	const count = 32
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for i := range count {
			n, err := cb.Recv(ctx, buf)
			if err != nil {
				done <- err
				return
			}
			if want := testMessage(i); !bytes.Equal(buf[:n], want) {
				done <- fmt.Errorf("message %d: %d bytes, want %d (content differs: %v)", i, n, len(want), n == len(want))
				return
			}
		}
		done <- cb.Send(ctx, []byte("all received"))
	}()
	for i := range count {
		if err := ca.Send(ctx, testMessage(i)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := ca.Recv(ctx, buf)
	if err != nil || string(buf[:n]) != "all received" {
		t.Fatalf("reply %q, %v", buf[:n], err)
	}
}

// testMessage is the i-th test message: its length and bytes vary with i.
func testMessage(i int) []byte {
	n := 1 + (i*7919)%(12<<10)
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i + j*31)
	}
	return b
}

// A peer that vanishes (the link goes dark both ways): a Send ends with
// ErrPeerGone once the transport's retries are spent, a Recv waiting on
// the connection with it, and every later call on the connection with
// ErrPeerGone too. The idle timeout is far above what the retries can
// take (each at most the transport's largest RTO, 100 ms), so the retry
// limit is certainly the cause, however slowly the loops run; the limit is
// high enough that setting the connection up survives a loaded machine.
func TestDeadPeer(t *testing.T) { eachPoll(t, testDeadPeer) }

func testDeadPeer(t *testing.T) {
	h := testHost(t, HostOptions{})
	opts := Options{RetryLimit: 20, IdleTimeout: time.Hour}
	a, b, w := lossyPair(t, h, "", 1, opts, opts)
	ca, _, _ := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)
	if err := ca.Send(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	var recv Op
	if err := ca.RecvAsync(&recv, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	w.down.Store(true)
	err := ca.Send(ctx, []byte("into the void"))
	if !errors.Is(err, ErrPeerGone) {
		t.Fatalf("send to a dead peer: %v, want ErrPeerGone", err)
	}
	if _, err := recv.Wait(ctx); !errors.Is(err, ErrPeerGone) {
		t.Fatalf("recv from a dead peer: %v, want ErrPeerGone", err)
	}
	if err := ca.Send(ctx, []byte("again")); !errors.Is(err, ErrPeerGone) || !errors.Is(err, rt.ErrRetryExhausted) {
		t.Fatalf("send on the failed connection: %v, want ErrPeerGone (rt.ErrRetryExhausted)", err)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Op != "send" || pe.Status != StatusPeerGone {
		t.Fatalf("error %#v: want an *Error for send with StatusPeerGone", err)
	}
}

// A Recv waiting with nothing outstanding finds a silent peer through the
// transport's keepalives (Options.IdleTimeout).
func TestDeadPeerIdleRecv(t *testing.T) { eachPoll(t, testDeadPeerIdleRecv) }

func testDeadPeerIdleRecv(t *testing.T) {
	h := testHost(t, HostOptions{})
	// Long enough that no connection idles out while it is being set up
	// on a loaded machine.
	opts := Options{RetryLimit: 20, IdleTimeout: time.Second}
	a, b, w := lossyPair(t, h, "", 1, opts, opts)
	ca, _, _ := connect(t, a, b, ConnOptions{})
	w.down.Store(true)
	_, err := ca.Recv(ctxT(t), make([]byte, 16))
	if !errors.Is(err, ErrPeerGone) {
		t.Fatalf("recv: %v, want ErrPeerGone", err)
	}
}

// Dialling a peer that never answers ends with ErrTimeout; one with no
// listener with ErrRefused; a context that ends first with ErrCancelled.
// Each outcome is made certain by the configuration, not by timing: the
// refusal and the cancellation race a retry budget of minutes, the timeout
// no answer at all.
func TestDialFailures(t *testing.T) { eachPoll(t, testDialFailures) }

func testDialFailures(t *testing.T) {
	h := testHost(t, HostOptions{})
	patient := Options{RetryLimit: 255}
	a, b, w := lossyPair(t, h, "", 1, patient, patient)
	_, err := a.Dial(ctxT(t), b.Addr(), ConnOptions{})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("dial without a listener: %v, want ErrRefused", err)
	}
	if _, err := b.Listen(ConnOptions{}); err != nil {
		t.Fatal(err)
	}
	w.down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if _, err = a.Dial(ctx, b.Addr(), ConnOptions{}); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("dial cancelled: %v, want ErrCancelled and context.Canceled", err)
	}

	// A host of its own: each pair's cleanup counts its host's pool in
	// use once its own endpoints are closed, and a's, still open then,
	// may hold the cancelled dial's request until it is polled or closed
	// (PollCaller: nobody polls it after Dial returns).
	c, d, dark := lossyPair(t, testHost(t, HostOptions{}), "", 2, Options{RetryLimit: 2}, Options{})
	if _, err := d.Listen(ConnOptions{}); err != nil {
		t.Fatal(err)
	}
	dark.down.Store(true)
	if _, err = c.Dial(ctxT(t), d.Addr(), ConnOptions{}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("dial into a dark link: %v, want ErrTimeout", err)
	}
}

// Closing a connection: the calls after it fail with ErrClosed, a Recv
// waiting on it ends with ErrClosed, and so does the peer's (a clean
// close), once the messages sent before the close are taken.
func TestClosedConn(t *testing.T) { eachPoll(t, testClosedConn) }

func testClosedConn(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ca, cb, _ := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)
	var mine Op
	if err := ca.RecvAsync(&mine, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if err := ca.Send(ctx, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := ca.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("recv waiting at close: %v, want ErrClosed", err)
	}
	if err := ca.Send(ctx, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v, want ErrClosed", err)
	}
	buf := make([]byte, 64)
	n, err := cb.Recv(ctx, buf)
	if err != nil || string(buf[:n]) != "last words" {
		t.Fatalf("peer's recv: %q, %v (the message sent before the close)", buf[:n], err)
	}
	if _, err := cb.Recv(ctx, buf); !errors.Is(err, ErrClosed) {
		t.Fatalf("peer's recv after the close: %v, want ErrClosed", err)
	}
	if err := ca.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// A message that arrived whole before the peer's close is still delivered
// when the Recv is posted after the close has landed: closing ends the
// connection for new operations, not for bytes already placed.
func TestMessageArrivedBeforeCloseIsDelivered(t *testing.T) {
	eachPoll(t, testMessageArrivedBeforeCloseIsDelivered)
}

func testMessageArrivedBeforeCloseIsDelivered(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ca, cb, _ := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)
	if err := ca.Send(ctx, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := ca.Close(); err != nil {
		t.Fatal(err)
	}
	for cb.c.ended.Load() == nil { // the peer's loop has taken the close
		if ctx.Err() != nil {
			t.Fatal("the peer never saw the close")
		}
		runtime.Gosched()
	}
	buf := make([]byte, 64)
	n, err := cb.Recv(ctx, buf)
	if err != nil || string(buf[:n]) != "last words" {
		t.Fatalf("recv after the close landed: %q, %v (the message arrived before it)", buf[:n], err)
	}
	if _, err := cb.Recv(ctx, buf); !errors.Is(err, ErrClosed) {
		t.Fatalf("the next recv: %v, want ErrClosed", err)
	}
}

// Closing the endpoint ends everything waiting on it with ErrClosed, and
// every call after.
func TestEndpointClose(t *testing.T) { eachPoll(t, testEndpointClose) }

func testEndpointClose(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	ca, _, l := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)
	var r Op
	if err := ca.RecvAsync(&r, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	acc := make(chan error, 1)
	go func() { _, err := l.Accept(ctx); acc <- err }()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("recv at endpoint close: %v", err)
	}
	if err := <-acc; !errors.Is(err, ErrClosed) {
		t.Fatalf("accept at endpoint close: %v", err)
	}
	if err := ca.Send(ctx, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after endpoint close: %v", err)
	}
	if _, err := a.Dial(ctx, b.Addr(), ConnOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("dial after endpoint close: %v", err)
	}
	if _, err := a.Register(make([]byte, 8), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("register after endpoint close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if n := h.h.pool.InUse(); n != 0 {
		t.Fatalf("pool: %d frames in use", n)
	}
}

// A context cancelled mid-operation: the call returns the context's error
// wrapped (ErrCancelled and context.Canceled), and the buffer is the
// caller's again: a pull's response that arrives later is not written.
func TestCancelMidOperation(t *testing.T) { eachPoll(t, testCancelMidOperation) }

func testCancelMidOperation(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b, w := lossyPair(t, h, "", 1, Options{RetryLimit: 50}, Options{RetryLimit: 50})
	ca, cb, _ := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)

	// A Recv that nothing will satisfy.
	rctx, cancel := context.WithCancel(ctx)
	go cancel()
	if _, err := ca.Recv(rctx, make([]byte, 8)); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("recv cancelled: %v", err)
	}

	// A Pull whose response cannot come while the link is down.
	remote, err := b.Register(bytes.Repeat([]byte{0x55}, 64<<10), RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	dst := bytes.Repeat([]byte{0xaa}, 64<<10)
	local, err := a.Register(dst, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.down.Store(true)
	var pull Op
	if err := ca.PullAsync(&pull, local, 0, len(dst), remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	pcancel()
	if _, err := pull.Wait(pctx); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("pull cancelled: %v", err)
	}
	if pull.Status() != StatusCancelled {
		t.Fatalf("pull status %v, want cancelled", pull.Status())
	}
	// The link comes back; the connection still works, and nothing of the
	// cancelled pull lands in its buffer.
	w.down.Store(false)
	if err := ca.Send(ctx, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	if n, err := cb.Recv(ctx, buf); err != nil || string(buf[:n]) != "still here" {
		t.Fatalf("recv after the cancel: %q, %v", buf[:n], err)
	}
	if err := cb.Send(ctx, []byte("ack")); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Recv(ctx, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{0xaa}, len(dst))) {
		t.Fatal("the cancelled pull's buffer was written after the cancel returned")
	}
}

// A message longer than the peer's receive slots fails at the sender with
// ErrTooLarge; one longer than the Recv's buffer stays queued for a Recv
// with a larger one.
func TestTooLarge(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ca, cb, _ := connect(t, a, b, ConnOptions{MaxMessage: 4 << 10})
	ctx := ctxT(t)
	if err := ca.Send(ctx, make([]byte, 5<<10)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("send past the peer's slots: %v, want ErrTooLarge", err)
	}
	if err := ca.Send(ctx, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Recv(ctx, make([]byte, 10)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("recv into a short buffer: %v, want ErrTooLarge", err)
	}
	if n, err := cb.Recv(ctx, make([]byte, 100)); n != 100 || err != nil {
		t.Fatalf("recv again: %d, %v", n, err)
	}
}

// Options that are wrong, or change nothing yet, are refused, not ignored.
func TestRefusedOptions(t *testing.T) {
	h := testHost(t, HostOptions{})
	if _, err := h.Open("mem:refused/0", Options{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no IP: %v, want ErrInvalid", err)
	}
	a, b := pair(t, h, Options{}, Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	if _, err := b.Listen(ConnOptions{Ordered: true}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("ordered listener: %v, want ErrNotSupported", err)
	}
	if _, err := a.Dial(ctxT(t), b.Addr(), ConnOptions{RecvSlots: 1000}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("1000 slots: %v, want ErrInvalid", err)
	}
}

// The accepted side's Sends carry a delivery index too: reordered on the
// way, each is placed into its slot on arrival (bound out of order through
// an element), never refused for want of a hold buffer as index-less
// Sends that come early are.
func TestAcceptedSideSendsCarryIndex(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b, _ := lossyPair(t, h, "reorder=30%/100us", 3, Options{}, Options{})
	ca, cb, _ := connect(t, a, b, ConnOptions{RecvSlots: 32})
	ctx := ctxT(t)
	cq, err := NewCompletionQueue(64)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]Op, 32)
	for i := range ops {
		ops[i].CQ = cq
		if err := cb.SendAsync(&ops[i], bytes.Repeat([]byte{byte(i)}, 200)); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]*Op, 32)
	for n := 0; n < len(ops); {
		k, err := cq.Wait(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range out[:k] {
			if _, err := op.Result(); err != nil {
				t.Fatal(err)
			}
		}
		n += k
	}
	buf := make([]byte, 256)
	for range ops {
		if _, err := ca.Recv(ctx, buf); err != nil {
			t.Fatal(err)
		}
	}
	st := a.e.tx.SendStats()
	if st.HoldFull != 0 || st.BindsElement == 0 {
		t.Fatalf("dialler's receive side: %d packets refused for want of a hold buffer, %d Sends bound out of order; want 0 and some (the accepted side's Sends carry no index)", st.HoldFull, st.BindsElement)
	}
}

// ConnOptions.Timeout ends an operation the network cannot finish, and a
// Recv no message comes for, with ErrTimeout, at its deadline, whatever the
// peer does; the connection lives on. The timeout is long beside a 4 KiB op over memory, so the ops
// after the link comes back finish before it however loaded the machine.
func TestOpTimeout(t *testing.T) { eachPoll(t, testOpTimeout) }

func testOpTimeout(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b, w := lossyPair(t, h, "", 1, Options{RetryLimit: 200}, Options{RetryLimit: 200})
	ca, cb, _ := connect(t, a, b, ConnOptions{Timeout: time.Second})
	ctx := ctxT(t)
	w.down.Store(true)
	if err := ca.Send(ctx, []byte("lost")); !errors.Is(err, ErrTimeout) {
		t.Fatalf("send into a dark link: %v, want ErrTimeout", err)
	}
	if _, err := ca.Recv(ctx, make([]byte, 16)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("recv from a dark link: %v, want ErrTimeout", err)
	}
	var recv Op
	if err := ca.RecvAsync(&recv, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if _, err := recv.Wait(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("asynchronous recv from a dark link: %v, want ErrTimeout", err)
	}
	remote, err := b.Register(make([]byte, 4096), RemoteWrite|RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	local, err := a.Register(make([]byte, 4096), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Push(ctx, local, 0, 4096, remote.Remote(0)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("push into a dark link: %v, want ErrTimeout", err)
	}
	w.down.Store(false)
	if err := ca.Pull(ctx, local, 0, 4096, remote.Remote(0)); err != nil {
		t.Fatalf("pull once the link is back: %v", err)
	}
	if err := ca.Send(ctx, []byte("found")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := cb.Recv(ctx, buf); err != nil || string(buf[:n]) != "found" {
		t.Fatalf("recv: %q, %v (the timed-out Send must not arrive)", buf[:n], err)
	}
	if err := cb.Send(ctx, []byte("back")); err != nil {
		t.Fatal(err)
	}
	if n, err := ca.Recv(ctx, buf); err != nil || string(buf[:n]) != "back" {
		t.Fatalf("recv after the timed-out Recvs: %q, %v", buf[:n], err)
	}
}

// Pushes and pulls through loss: every byte lands where it belongs.
func TestLossyFabricPushPull(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testLossyFabricPushPull(t, shards) })
	}
}

func testLossyFabricPushPull(t *testing.T, shards int) {
	h := testHost(t, HostOptions{})
	// A generous retry limit, as for the messages through loss.
	a, b, _ := lossyPair(t, h, "loss=2%,reorder=2%/50us", 11, Options{RetryLimit: 50, Shards: shards}, Options{RetryLimit: 50, Shards: shards})
	ca, _, l := connect(t, a, b, ConnOptions{})
	for range shards - 1 {
		ca, _ = dialAccept(t, a, b, l, ConnOptions{}) // the last shard's
	}
	ctx := ctxT(t)
	// 128 KiB: a hundred-odd packets each way, so loss hits every
	// span, and little enough for a loaded machine.
	const size = 128 << 10
	remote, err := b.Register(make([]byte, size), RemoteWrite|RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + i>>9)
	}
	local, err := a.Register(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	back, err := a.Register(make([]byte, size), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, span := range [][2]int{{0, 1000}, {1000, 64 << 10}, {(64 << 10) + 1000, size - (64 << 10) - 1000}} {
		if err := ca.Push(ctx, local, span[0], span[1], remote.Remote(uint64(span[0]))); err != nil {
			t.Fatalf("push %v: %v", span, err)
		}
	}
	if err := ca.Pull(ctx, back, 0, size, remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), src) {
		t.Fatal("pulled bytes differ from those pushed")
	}
}

// A pinned endpoint runs its loop on the CPU asked for.
func TestPinnedEndpoint(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{Pin: true, CPU: 0}, Options{Pin: true, CPU: 0})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	if a.e.loop.CPU() != 0 {
		t.Fatalf("loop CPU %d, want 0", a.e.loop.CPU())
	}
	ca, cb, _ := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)
	if err := ca.Send(ctx, []byte("pinned")); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Recv(ctx, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open("mem:pinbad/0", Options{IP: netip.MustParseAddr("198.18.0.9"), Pin: true, CPU: 4096}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CPU 4096: %v, want ErrInvalid", err)
	}
}
