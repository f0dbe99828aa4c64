package peregrine

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
)

var pairSeq atomic.Int64

// testPoll is the Poll mode pair and lossyPair give endpoints whose
// options leave it zero; eachPoll runs a test under both modes.
var testPoll Poll

func eachPoll(t *testing.T, f func(t *testing.T)) {
	for _, p := range []Poll{PollLoop, PollCaller} {
		t.Run(p.String(), func(t *testing.T) {
			testPoll = p
			defer func() { testPoll = PollLoop }()
			f(t)
		})
	}
}

// pair opens two endpoints joined by a fresh mem pair on h.
func pair(t testing.TB, h *Host, a, b Options) (*Endpoint, *Endpoint) {
	t.Helper()
	name := fmt.Sprintf("t%d", pairSeq.Add(1))
	if a.Poll == PollLoop && b.Poll == PollLoop {
		a.Poll, b.Poll = testPoll, testPoll
	}
	if !a.IP.IsValid() {
		a.IP = netip.MustParseAddr("198.18.0.1")
	}
	if !b.IP.IsValid() {
		b.IP = netip.MustParseAddr("198.18.0.2")
	}
	ea, err := h.Open("mem:"+name+"/0", a)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := h.Open("mem:"+name+"/1", b)
	if err != nil {
		t.Fatal(err)
	}
	return ea, eb
}

func testHost(t testing.TB, opts HostOptions) *Host {
	t.Helper()
	h, err := NewHost(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	return h
}

// connect dials b from a and accepts it.
func connect(t testing.TB, a, b *Endpoint, opts ConnOptions) (*Conn, *Conn, *Listener) {
	t.Helper()
	lo := opts
	lo.Ordered = false // the dialler decides
	l, err := b.Listen(lo)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := dialAccept(t, a, b, l, opts)
	return ca, cb, l
}

func TestSendRecvPushPull(t *testing.T) { eachPoll(t, testSendRecvPushPull) }

func testSendRecvPushPull(t *testing.T) {
	h := testHost(t, HostOptions{})
	a, b := pair(t, h, Options{}, Options{})
	ca, cb, _ := connect(t, a, b, ConnOptions{})
	ctx := context.Background()
	msg := []byte("hello, peregrine")
	if err := ca.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, err := cb.Recv(ctx, buf)
	if err != nil || !bytes.Equal(buf[:n], msg) {
		t.Fatalf("recv %q, %v", buf[:n], err)
	}
	// Back the other way (the accepted side's Sends).
	if err := cb.Send(ctx, []byte("pong")); err != nil {
		t.Fatal(err)
	}
	if n, err = ca.Recv(ctx, buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("recv %q, %v", buf[:n], err)
	}
	remote, err := b.Register(make([]byte, 1<<20), RemoteWrite|RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	local, err := a.Register(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Push(ctx, local, 0, len(src), remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	back, _ := a.Register(make([]byte, len(src)), 0)
	if err := ca.Pull(ctx, back, 0, len(src), remote.Remote(0)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), src) || !bytes.Equal(remote.Bytes(), src) {
		t.Fatal("push/pull data differ")
	}
	if err := ca.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := h.h.pool.InUse(); n != 0 {
		t.Fatalf("pool: %d frames in use after both endpoints closed", n)
	}
}
