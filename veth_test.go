package peregrine

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// Messages and a push/pull over a real veth pair between two network
// namespaces, through each kernel-bypass driver. Root only: it skips with
// netnstest's message otherwise.
func TestVeth(t *testing.T) {
	for _, driver := range []string{"afxdp", "afpacket"} {
		t.Run(driver, func(t *testing.T) {
			tp := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
			h := testHost(t, HostOptions{})
			specA := fmt.Sprintf("%s:%s?netns=%s", driver, tp.IfA, tp.A.Name)
			specB := fmt.Sprintf("%s:%s?netns=%s", driver, tp.IfB, tp.B.Name)
			a, err := h.Open(specA, Options{IP: netip.MustParseAddr("198.18.0.1")})
			if err != nil {
				t.Fatal(err)
			}
			b, err := h.Open(specB, Options{IP: netip.MustParseAddr("198.18.0.2")})
			if err != nil {
				_ = a.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := a.Close(); err != nil {
					t.Error(err)
				}
				if err := b.Close(); err != nil {
					t.Error(err)
				}
			})
			if a.Addr().MAC != [6]byte(tp.MACA) {
				t.Fatalf("endpoint A's MAC %x, the veth's %v", a.Addr().MAC, tp.MACA)
			}
			ca, cb, _ := connect(t, a, b, ConnOptions{MaxMessage: 1 << 20, RecvSlots: 4})
			ctx := ctxT(t)
			for i := range 20 {
				msg := testMessage(i * 37)
				if err := ca.Send(ctx, msg); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				buf := make([]byte, 1<<20)
				n, err := cb.Recv(ctx, buf)
				if err != nil || !bytes.Equal(buf[:n], msg) {
					t.Fatalf("recv %d: %d bytes (want %d), %v", i, n, len(msg), err)
				}
				if err := cb.Send(ctx, buf[:n]); err != nil {
					t.Fatalf("echo %d: %v", i, err)
				}
				if n, err = ca.Recv(ctx, buf); err != nil || !bytes.Equal(buf[:n], msg) {
					t.Fatalf("echo back %d: %d bytes, %v", i, n, err)
				}
			}
			remote, err := b.Register(make([]byte, 256<<10), RemoteWrite|RemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			src := bytes.Repeat([]byte("veth "), 50<<10)
			local, err := a.Register(src, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := ca.Push(ctx, local, 0, len(src), remote.Remote(0)); err != nil {
				t.Fatal(err)
			}
			// B's loop placed the bytes; a message through B's loop orders
			// this goroutine's read after its writes (the kernel between
			// the two loops is no synchronisation the race detector sees).
			if err := ca.Send(ctx, []byte("pushed")); err != nil {
				t.Fatal(err)
			}
			if _, err := cb.Recv(ctx, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(remote.Bytes()[:len(src)], src) {
				t.Fatal("pushed bytes differ")
			}
			if err := ca.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A PollCaller endpoint's loop leaves the frames to the callers that poll
// for them: no frame on the port ends its sleeps. It keeps off the engine
// while callers poll, so a frame it woke for stayed in the queue, its
// descriptor readable, and each sleep in poll(2) ended at once — the loop
// spun beside the callers on their CPUs, and a PollCaller echo server
// over AF_XDP answered at p99 in 1.4 ms, not 11 µs. Root only.
func TestPollCallerLoopLeavesFramesToCallers(t *testing.T) {
	tp := netnstest.TwoNS(t, netns.VethOptions{})
	h := testHost(t, HostOptions{})
	open := func(spec, ip string) *Endpoint {
		ep, err := h.Open(spec, Options{IP: netip.MustParseAddr(ip), Poll: PollCaller})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := ep.Close(); err != nil {
				t.Error(err)
			}
		})
		return ep
	}
	a := open(fmt.Sprintf("afxdp:%s?netns=%s", tp.IfA, tp.A.Name), "198.18.0.1")
	b := open(fmt.Sprintf("afxdp:%s?netns=%s", tp.IfB, tp.B.Name), "198.18.0.2")
	ca, cb, _ := connect(t, a, b, ConnOptions{})
	ctx := ctxT(t)
	buf := make([]byte, 64)
	done := make(chan error, 1)
	go func() { // the echo server
		for range 200 {
			n, err := cb.Recv(ctx, buf)
			if err == nil {
				err = cb.Send(ctx, buf[:n])
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	msg := make([]byte, 64)
	for i := range 200 {
		if err := ca.Send(ctx, msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if _, err := ca.Recv(ctx, msg); err != nil {
			t.Fatalf("recv %d: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, ep := range []*Endpoint{a, b} {
		if st := ep.e.loop.Stats(); st.InputWakes != 0 {
			t.Errorf("%s: %d of its loop's %d sleeps ended for frames its callers took", ep.e.name, st.InputWakes, st.Sleeps)
		}
	}
}
