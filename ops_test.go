package peregrine

import (
	"bytes"
	"errors"
	"testing"
)

// A message of 8 MiB crosses whole, placed by its delivery index into the
// peer's slot as its packets arrive, and back.
func TestEightMiBMessage(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	const size = 8 << 20
	ca, cb, _ := connect(t, a, b, ConnOptions{MaxMessage: size, RecvSlots: 2})
	ctx := ctxT(t)
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i * 131 >> 7)
	}
	errc := make(chan error, 1)
	go func() { errc <- ca.Send(ctx, msg) }()
	buf := make([]byte, size)
	n, err := cb.Recv(ctx, buf)
	if err != nil || n != size || !bytes.Equal(buf, msg) {
		t.Fatalf("recv: %d bytes, %v, intact %v", n, err, bytes.Equal(buf[:n], msg))
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := cb.Send(ctx, buf); err != nil {
		t.Fatal(err)
	}
	clear(buf)
	if n, err := ca.Recv(ctx, buf); n != size || err != nil || !bytes.Equal(buf, msg) {
		t.Fatalf("back: %d, %v", n, err)
	}
}

// An empty message is a message: Recv returns it with length 0.
func TestEmptyMessage(t *testing.T) { eachPoll(t, testEmptyMessage) }

func testEmptyMessage(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ca, cb, _ := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)
	for _, m := range []string{"", "x", ""} {
		if err := ca.Send(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if n, err := cb.Recv(ctx, buf); err != nil || string(buf[:n]) != m {
			t.Fatalf("recv %q: %q, %v", m, buf[:n], err)
		}
	}
}

// Asynchronous ops reaped in batches from one completion queue, across
// Sends, Recvs, Pushes and Pulls; Done and Wait on single ops.
func TestAsyncCompletionQueue(t *testing.T) { eachPoll(t, testAsyncCompletionQueue) }

func testAsyncCompletionQueue(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ca, cb, _ := connect(t, a, b, ConnOptions{RecvSlots: 16})
	ctx := ctxT(t)
	cq, err := NewCompletionQueue(64)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	recvs := make([]Op, n)
	bufs := make([][]byte, n)
	for i := range recvs {
		bufs[i] = make([]byte, 128)
		recvs[i].Tag, recvs[i].CQ = uint64(100+i), cq
		if err := cb.RecvAsync(&recvs[i], bufs[i]); err != nil {
			t.Fatal(err)
		}
	}
	sends := make([]Op, n)
	for i := range sends {
		sends[i].Tag, sends[i].CQ = uint64(i), cq
		if err := ca.SendAsync(&sends[i], []byte{byte(i), 'x'}); err != nil {
			t.Fatal(err)
		}
	}
	var idle Op // a Recv nothing will satisfy: in flight until cancelled
	if err := ca.RecvAsync(&idle, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if err := ca.RecvAsync(&idle, make([]byte, 8)); !errors.Is(err, ErrBusy) {
		t.Fatalf("restart of an op in flight: %v, want ErrBusy", err)
	}
	idle.Cancel()
	if _, err := idle.Wait(ctx); !errors.Is(err, ErrCancelled) {
		t.Fatalf("Op.Cancel: %v, want ErrCancelled", err)
	}
	got := map[uint64]bool{}
	out := make([]*Op, 8)
	for len(got) < 2*n {
		k, err := cq.Wait(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range out[:k] {
			if _, err := op.Result(); err != nil {
				t.Fatalf("op %d: %v", op.Tag, err)
			}
			if got[op.Tag] {
				t.Fatalf("op %d completed twice", op.Tag)
			}
			got[op.Tag] = true
		}
	}
	seen := map[byte]bool{}
	for i := range recvs {
		m, _ := recvs[i].Result()
		if m != 2 || bufs[i][1] != 'x' || seen[bufs[i][0]] {
			t.Fatalf("recv %d: %d bytes %q", i, m, bufs[i][:m])
		}
		seen[bufs[i][0]] = true
	}
	// One op, waited on through Done.
	remote, _ := b.Register(make([]byte, 4096), RemoteWrite|RemoteRead)
	local, _ := a.Register(bytes.Repeat([]byte{7}, 4096), 0)
	var push Op
	if err := ca.PushAsync(&push, local, 0, 4096, remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	<-push.Done()
	if _, err := push.Wait(ctx); err != nil || !bytes.Equal(remote.Bytes(), local.Bytes()) {
		t.Fatalf("push: %v", err)
	}
	// Reused at once, for a pull.
	back, _ := a.Register(make([]byte, 4096), 0)
	if err := ca.PullAsync(&push, back, 0, 4096, remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	if n, err := push.Wait(ctx); err != nil || n != 4096 || !bytes.Equal(back.Bytes(), local.Bytes()) {
		t.Fatalf("pull: %d, %v", n, err)
	}
	// Done of an op that completed before anyone watched it delivers too
	// (its completion handed the channel no token: nobody waited on it).
	var late Op
	if err := ca.PushAsync(&late, local, 0, 16, remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-late.Done():
	case <-ctx.Done():
		t.Fatal("Done of an op completed before it was watched delivered nothing")
	}
	// Remote access refused: an unknown key, a read-only region pushed.
	if err := ca.Push(ctx, local, 0, 16, RemoteAddr{Key: 0xdead}); !errors.Is(err, ErrRemoteAccess) {
		t.Fatalf("push to an unknown key: %v, want ErrRemoteAccess", err)
	}
}

// The options that change the wire work when both ends turn them on, and
// a peer without global QP numbers cannot connect to one with them.
func TestWireOptions(t *testing.T) {
	h := testHost(t, HostOptions{})
	on := Options{IOI: true, GlobalQPNs: true}
	a, b := pair(t, h, on, on)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ca, cb, _ := connect(t, a, b, ConnOptions{MaxMessage: 1 << 20})
	ctx := ctxT(t)
	remote, err := b.Register(make([]byte, 2<<20), RemoteWrite|RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Repeat([]byte("ioi "), 512<<10)
	local, err := a.Register(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Push(ctx, local, 0, len(src), remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	if err := ca.Send(ctx, src[:1<<20]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if n, err := cb.Recv(ctx, buf); err != nil || !bytes.Equal(buf[:n], src[:1<<20]) {
		t.Fatalf("recv: %d, %v", n, err)
	}
	if !bytes.Equal(remote.Bytes()[:len(src)], src) {
		t.Fatal("pushed bytes differ")
	}
	if st := a.e.tx.IOIStats(); st.MsgIOI == 0 {
		t.Fatalf("IOI on, but no message went with IOI: %+v", st)
	}
	if q := a.e.tx.Transport().QPNStats(); q.CAM.Opened == 0 || q.CAM.Translated == 0 {
		t.Fatalf("global QPNs on, but the QP table opened nothing: %+v", q)
	}

	plain, other := pair(t, h, Options{}, on)
	t.Cleanup(func() { _ = plain.Close(); _ = other.Close() })
	if _, err := other.Listen(ConnOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Dial(ctx, other.Addr(), ConnOptions{}); !errors.Is(err, ErrRefused) {
		t.Fatalf("a peer without global QPNs: %v, want ErrRefused", err)
	}
}
