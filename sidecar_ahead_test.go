package peregrine_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine"
)

// An attached connection's Recv posted ahead: the next message lands in it
// before any call asks, and the calls see what they would see without it:
// messages in order, ErrTooLarge for a buffer too short (the message kept
// for a larger one, whether the Recv posted ahead holds it or the
// appliance), a cancelled call taking nothing, and no buffer kept after
// the close.
func TestSidecarRecvAhead(t *testing.T) {
	mine, peer := openSidecar(t, peregrine.Options{})
	ctx := doorCtx(t)
	c, pc := dialPeer(t, mine, peer, peregrine.ConnOptions{RecvSlots: 4})
	send := func(msg []byte) {
		t.Helper()
		if err := pc.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(room int, want []byte) {
		t.Helper()
		buf := make([]byte, room)
		if n, err := c.Recv(ctx, buf); err != nil || !bytes.Equal(buf[:n], want) {
			t.Fatalf("recv into %d bytes: %d bytes, %v; want the %d-byte message", room, n, err, len(want))
		}
	}
	tooLarge := func(room int) {
		t.Helper()
		if _, err := c.Recv(ctx, make([]byte, room)); !errors.Is(err, peregrine.ErrTooLarge) {
			t.Fatalf("recv into %d bytes: %v, want ErrTooLarge", room, err)
		}
	}
	out, taken0, busy := peregrine.SidecarAhead(c)
	if out || busy != 0 {
		t.Fatalf("before any Recv: posted ahead %v, %d ops counted; want none", out, busy)
	}

	send(pattern(100, 1))
	recv(4096, pattern(100, 1))
	out, taken, busy := peregrine.SidecarAhead(c)
	if !out || taken != taken0+1 || busy != 0 {
		t.Fatalf("after a Recv: posted ahead %v, %d buffers taken (%d before), %d ops counted; want one Recv of one buffer, not counted (nobody waits for it)",
			out, taken, taken0, busy)
	}

	// Two messages before the calls: the first lands in the Recv posted
	// ahead, and a buffer too short for it finds it kept.
	m1, m2 := pattern(2000, 2), pattern(50, 3)
	send(m1)
	send(m2)
	tooLarge(1000)
	tooLarge(1000)
	recv(4096, m1)
	recv(4096, m2)

	// Longer than the Recv posted ahead (4 KiB): it stays in the
	// appliance, for the call's own Recv.
	big := pattern(10000, 4)
	send(big)
	tooLarge(4096)
	recv(16384, big)

	// A call whose context is done takes nothing: the next one gets the
	// message.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Recv(cctx, make([]byte, 16384)); !errors.Is(err, peregrine.ErrCancelled) {
		t.Fatalf("recv with a cancelled context: %v, want ErrCancelled", err)
	}
	send(pattern(300, 5))
	recv(16384, pattern(300, 5))

	// The close gives the Recv posted ahead's buffers back.
	if out, _, _ := peregrine.SidecarAhead(c); !out {
		t.Fatal("no Recv posted ahead before the close")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		out, taken, _ := peregrine.SidecarAhead(c)
		if !out && taken == taken0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after the close: posted ahead %v, %d buffers taken, want none and %d", out, taken, taken0)
		case <-time.After(time.Millisecond):
		}
	}
}

// A Recv posted ahead ends on the connection's Timeout like any Recv; a
// call that comes after that waits for its own message rather than
// reporting the timeout of a Recv it did not make.
func TestSidecarRecvAheadOutlivesItsTimeout(t *testing.T) {
	mine, peer := openSidecar(t, peregrine.Options{})
	ctx := doorCtx(t)
	const timeout = 20 * time.Millisecond
	c, pc := dialPeer(t, mine, peer, peregrine.ConnOptions{Timeout: timeout})
	buf := make([]byte, 64)
	if err := pc.Send(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Recv(ctx, buf); err != nil || string(buf[:n]) != "first" {
		t.Fatalf("first recv: %q, %v", buf[:n], err)
	}
	// The Recv posted ahead waits past its Timeout with no message (the
	// time passing is what is tested, not a wait for another goroutine).
	time.Sleep(5 * timeout)
	if err := pc.Send(ctx, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Recv(ctx, buf); err != nil || string(buf[:n]) != "second" {
		t.Fatalf("recv after the Recv posted ahead timed out: %q, %v", buf[:n], err)
	}
}
