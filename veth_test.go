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
