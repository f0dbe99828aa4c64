package peregrine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/host"
)

// openPair opens two endpoints joined by the in-memory pair name, on h.
func openPair(h *peregrine.Host, name string) (a, b *peregrine.Endpoint, err error) {
	a, err = h.Open("mem:"+name+"/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		return nil, nil, err
	}
	b, err = h.Open("mem:"+name+"/1", peregrine.Options{IP: netip.MustParseAddr("198.18.0.2")})
	if err != nil {
		return nil, nil, errors.Join(err, a.Close())
	}
	return a, b, nil
}

// withPair opens a host and the in-memory pair name, connects the two
// endpoints with opts, calls f with them and prints its error, if any, and
// then closes everything.
func withPair(name string, opts peregrine.ConnOptions, f func(ctx context.Context, a, b *peregrine.Endpoint, ca, cb *peregrine.Conn) error) {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	a, b, err := openPair(h, name)
	if err == nil {
		ctx := context.Background()
		var ca, cb *peregrine.Conn
		if ca, cb, err = connected(ctx, a, b, opts); err == nil {
			err = f(ctx, a, b, ca, cb)
		}
		err = errors.Join(err, a.Close(), b.Close())
	}
	if err = errors.Join(err, h.Close()); err != nil {
		fmt.Println(err)
	}
}

// connected dials b from a and accepts the connection on b.
func connected(ctx context.Context, a, b *peregrine.Endpoint, opts peregrine.ConnOptions) (ca, cb *peregrine.Conn, err error) {
	l, err := b.Listen(peregrine.ConnOptions{RecvSlots: opts.RecvSlots, MaxMessage: opts.MaxMessage})
	if err != nil {
		return nil, nil, err
	}
	if ca, err = a.Dial(ctx, b.Addr(), opts); err != nil {
		return nil, nil, err
	}
	cb, err = l.Accept(ctx)
	return ca, cb, err
}

// A client and a server in one process, over an in-memory port pair: the
// whole life of the two doors' in-process side.
func Example() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { fmt.Println("host closed:", h.Close()) }()
	server, err := h.Open("mem:demo/1", peregrine.Options{IP: netip.MustParseAddr("198.18.0.2")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer server.Close()
	client, err := h.Open("mem:demo/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	l, err := server.Listen(peregrine.ConnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { // an echo server
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		buf := make([]byte, 1024)
		n, err := c.Recv(ctx, buf)
		if err == nil {
			_ = c.Send(ctx, buf[:n])
		}
	}()
	c, err := client.Dial(ctx, server.Addr(), peregrine.ConnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Send(ctx, []byte("hello")); err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 1024)
	n, err := c.Recv(ctx, buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("echo: %s\n", buf[:n])
	// Output:
	// echo: hello
	// host closed: <nil>
}

// A Host holds the packet pool its endpoints share; it closes only once
// they are closed.
func ExampleHost() {
	h, err := peregrine.NewHost(peregrine.HostOptions{Frames: 4096})
	if err != nil {
		fmt.Println(err)
		return
	}
	ep, err := h.Open("mem:host/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("busy while open:", errors.Is(h.Close(), peregrine.ErrBusy))
	if err := ep.Close(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("closed:", h.Close())
	// Output:
	// busy while open: true
	// closed: <nil>
}

// HostOptions size the pool.
func ExampleHostOptions() {
	_, err := peregrine.NewHost(peregrine.HostOptions{Frames: -1})
	fmt.Println(errors.Is(err, peregrine.ErrInvalid))
	// Output: true
}

// Options configure an endpoint; the mechanisms that change the wire are
// off unless asked for, and one not wired yet is refused.
func ExampleOptions() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	_, err = h.Open("mem:opts/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1"), MCSQ: true})
	fmt.Println("MCSQ:", errors.Is(err, peregrine.ErrNotSupported))
	ep, err := h.Open("mem:opts/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1"), IOI: true, GlobalQPNs: true, Idle: peregrine.IdleSleep})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("IOI and global QPNs:", ep.Close())
	// Output:
	// MCSQ: true
	// IOI and global QPNs: <nil>
}

// Options.Shards runs an endpoint as several shards, each on its own poll
// loop and queue of the port: dials are dealt over the shards round robin,
// the peer's shard of the same index accepts each, and nothing crosses
// between shards on the way.
func ExampleOptions_shards() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	var eps [2]*peregrine.Endpoint
	for i := range eps {
		// Open gives the mem pair a queue per shard (queues=2).
		ip := netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + i)})
		if eps[i], err = h.Open(fmt.Sprintf("mem:shards/%d", i), peregrine.Options{IP: ip, Shards: 2}); err != nil {
			fmt.Println(err)
			return
		}
		defer eps[i].Close()
	}
	a, b := eps[0], eps[1]
	ctx := context.Background()
	l, err := b.Listen(peregrine.ConnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 4 {
		ca, err := a.Dial(ctx, b.Addr(), peregrine.ConnOptions{})
		if err != nil {
			fmt.Println(err)
			return
		}
		cb, err := l.Accept(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := ca.Send(ctx, []byte{byte(i)}); err != nil {
			fmt.Println(err)
			return
		}
		buf := make([]byte, 1)
		if _, err := cb.Recv(ctx, buf); err != nil || buf[0] != byte(i) {
			fmt.Println("recv:", buf, err)
			return
		}
	}
	for i, s := range b.ShardStats() {
		fmt.Printf("shard %d: accepted %d, handed over in software %d\n", i, s.Accepted, s.SteeredOut)
	}
	// Output:
	// shard 0: accepted 2, handed over in software 0
	// shard 1: accepted 2, handed over in software 0
}

// Idle chooses how the endpoint's poll loop waits for work.
func ExampleIdle() {
	for _, idle := range []peregrine.Idle{peregrine.IdleAdaptive, peregrine.IdleBusy, peregrine.IdleSleep} {
		fmt.Println(idle)
	}
	// Output:
	// adaptive
	// busy
	// sleep
}

// An endpoint's Addr is what its peers dial.
func ExampleAddr() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	ep, err := h.Open("mem:addr/0", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	fmt.Println(ep.Addr().IP)
	// Output: 198.18.0.1
}

// An Endpoint refuses a Dial while its peer has no listener.
func ExampleEndpoint() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	a, b, err := openPair(h, "endpoint")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	defer a.Close()
	_, err = a.Dial(context.Background(), b.Addr(), peregrine.ConnOptions{})
	fmt.Println("refused:", errors.Is(err, peregrine.ErrRefused))
	// Output: refused: true
}

// A Listener hands over the connections peers dial.
func ExampleListener() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	a, b, err := openPair(h, "listener")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	defer a.Close()
	l, err := b.Listen(peregrine.ConnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if _, err := a.Dial(ctx, b.Addr(), peregrine.ConnOptions{Ordered: true}); err != nil {
		fmt.Println(err)
		return
	}
	c, err := l.Accept(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("from", c.RemoteAddr().IP)
	if err := l.Close(); err != nil {
		fmt.Println(err)
		return
	}
	_, err = l.Accept(ctx)
	fmt.Println("after close:", errors.Is(err, peregrine.ErrClosed))
	// Output:
	// from 198.18.0.1
	// after close: true
}

// ConnOptions size the receive slots: a message longer than the peer's
// fails with ErrTooLarge.
func ExampleConnOptions() {
	withPair("connopts", peregrine.ConnOptions{MaxMessage: 1024, RecvSlots: 4}, func(ctx context.Context, a, b *peregrine.Endpoint, ca, _ *peregrine.Conn) error {
		err := ca.Send(ctx, make([]byte, 2048))
		fmt.Println("too large:", errors.Is(err, peregrine.ErrTooLarge))
		return nil
	})
	// Output: too large: true
}

// Conn.Send and Conn.Recv move whole messages; a cancelled Recv returns
// the context's error.
func ExampleConn() {
	withPair("conn", peregrine.ConnOptions{}, func(ctx context.Context, a, b *peregrine.Endpoint, ca, cb *peregrine.Conn) error {
		for _, m := range []string{"one", "two"} {
			if err := ca.Send(ctx, []byte(m)); err != nil {
				return err
			}
		}
		buf := make([]byte, 64)
		for range 2 {
			n, err := cb.Recv(ctx, buf)
			if err != nil {
				return err
			}
			fmt.Println(string(buf[:n]))
		}
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		_, err := cb.Recv(short, buf)
		fmt.Println("nothing more:", errors.Is(err, context.DeadlineExceeded), errors.Is(err, peregrine.ErrCancelled))
		return nil
	})
	// Output:
	// one
	// two
	// nothing more: true true
}

// Access says what peers may do with a region: pushing into one
// registered read-only is refused.
func ExampleAccess() {
	withPair("access", peregrine.ConnOptions{}, func(ctx context.Context, a, b *peregrine.Endpoint, ca, _ *peregrine.Conn) error {
		readOnly, err := b.Register(make([]byte, 64), peregrine.RemoteRead)
		if err != nil {
			return err
		}
		src, err := a.Register([]byte("data"), 0)
		if err != nil {
			return err
		}
		err = ca.Push(ctx, src, 0, 4, readOnly.Remote(0))
		fmt.Println("refused:", errors.Is(err, peregrine.ErrRemoteAccess))
		return nil
	})
	// Output: refused: true
}

// A Region is registered memory: this side pushes from one of its own into
// the peer's and pulls it back.
func ExampleRegion() {
	withPair("region", peregrine.ConnOptions{}, func(ctx context.Context, a, b *peregrine.Endpoint, ca, _ *peregrine.Conn) error {
		remote, err := b.Register(make([]byte, 64), peregrine.RemoteWrite|peregrine.RemoteRead)
		if err != nil {
			return err
		}
		local, err := a.Register([]byte("written remotely, read back"), 0)
		if err != nil {
			return err
		}
		if err := ca.Push(ctx, local, 0, local.Len(), remote.Remote(8)); err != nil {
			return err
		}
		back, err := a.Register(make([]byte, local.Len()), 0)
		if err != nil {
			return err
		}
		if err := ca.Pull(ctx, back, 0, back.Len(), remote.Remote(8)); err != nil {
			return err
		}
		fmt.Println(string(back.Bytes()))
		fmt.Println("deregistered:", b.Deregister(remote))
		return nil
	})
	// Output:
	// written remotely, read back
	// deregistered: <nil>
}

// A RemoteAddr names a peer's memory; a key the peer never registered is
// refused.
func ExampleRemoteAddr() {
	withPair("remoteaddr", peregrine.ConnOptions{}, func(ctx context.Context, a, b *peregrine.Endpoint, ca, _ *peregrine.Conn) error {
		dst, err := a.Register(make([]byte, 16), 0)
		if err != nil {
			return err
		}
		err = ca.Pull(ctx, dst, 0, 16, peregrine.RemoteAddr{Key: 0x1234, Addr: 0})
		fmt.Println("unknown key:", errors.Is(err, peregrine.ErrRemoteAccess))
		return nil
	})
	// Output: unknown key: true
}

// An Op is one asynchronous operation, waited on when its result is
// needed.
func ExampleOp() {
	withPair("op", peregrine.ConnOptions{}, func(ctx context.Context, a, b *peregrine.Endpoint, ca, cb *peregrine.Conn) error {
		var recv, send peregrine.Op
		buf := make([]byte, 64)
		if err := cb.RecvAsync(&recv, buf); err != nil { // buf is the endpoint's now
			return err
		}
		if err := ca.SendAsync(&send, []byte("async")); err != nil {
			return err
		}
		if _, err := send.Wait(ctx); err != nil {
			return err
		}
		n, err := recv.Wait(ctx) // buf is ours again
		if err != nil {
			return err
		}
		fmt.Println(string(buf[:n]), recv.Status())
		return nil
	})
	// Output: async ok
}

// A CompletionQueue collects many ops for one goroutine to reap in
// batches.
func ExampleCompletionQueue() {
	withPair("cq", peregrine.ConnOptions{RecvSlots: 8}, func(ctx context.Context, a, b *peregrine.Endpoint, ca, _ *peregrine.Conn) error {
		cq, err := peregrine.NewCompletionQueue(16)
		if err != nil {
			return err
		}
		ops := make([]peregrine.Op, 8)
		for i := range ops {
			ops[i].Tag, ops[i].CQ = uint64(i), cq
			if err := ca.SendAsync(&ops[i], []byte("batch")); err != nil {
				return err
			}
		}
		done := make([]*peregrine.Op, 4)
		sum := 0
		for reaped := 0; reaped < len(ops); {
			n, err := cq.Wait(ctx, done)
			if err != nil {
				return err
			}
			for _, op := range done[:n] {
				if _, err := op.Result(); err != nil {
					return err
				}
				sum += int(op.Tag)
			}
			reaped += n
		}
		fmt.Println("tags sum to", sum)
		return nil
	})
	// Output: tags sum to 28
}

// Status is how an operation ended, and Status.Err the error it matches.
func ExampleStatus() {
	for _, s := range []peregrine.Status{peregrine.StatusOK, peregrine.StatusTimeout, peregrine.StatusRNRRetryExceeded, peregrine.StatusPeerGone} {
		fmt.Printf("%v: %v\n", s, s.Err())
	}
	// Output:
	// ok: <nil>
	// timeout: peregrine: timed out
	// rnr-retry-exceeded: peregrine: busy
	// peer-gone: peregrine: peer gone
}

// Every failed call returns an *Error: the operation, its status and the
// cause, matching the status's sentinel with errors.Is.
func ExampleError() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	_, err = h.Open("nosuchdriver:x", peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	var pe *peregrine.Error
	if errors.As(err, &pe) {
		fmt.Println(pe.Op, pe.Status, errors.Is(err, peregrine.ErrInvalid))
	}
	// Output: open nosuchdriver:x invalid true
}

// The other door: an application attaches to a running appliance (here a
// host.Server over an in-memory port, as `peregrine serve --port mem:…`
// runs one) and uses the same Endpoint and Conn calls as in-process.
func ExampleAttach() {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { fmt.Println("host closed:", h.Close()) }()
	appliance, peer, err := openPair(h, "attach")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer peer.Close()
	defer appliance.Close()
	dir, err := os.MkdirTemp("", "peregrine")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "p.sock")
	srv, err := host.New(host.Options{Socket: sock, Endpoint: appliance, UID: -1, GID: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serving, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); srv.Run(serving) }()
	defer func() { stop(); <-ran }()
	l, err := peer.Listen(peregrine.ConnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { // the peer echoes one message
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		buf := make([]byte, 1024)
		if n, err := c.Recv(ctx, buf); err == nil {
			_ = c.Send(ctx, buf[:n])
		}
	}()

	ep, err := peregrine.Attach(sock, peregrine.AttachOptions{}) // the one line that differs
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	c, err := ep.Dial(ctx, peer.Addr(), peregrine.ConnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Send(ctx, []byte("hello through the appliance")); err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 1024)
	n, err := c.Recv(ctx, buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("echo: %s\n", buf[:n])
	// Output:
	// echo: hello through the appliance
	// host closed: <nil>
}

// The geometry of the channel an application asks for: the pool bounds the
// longest message through the sidecar (a message takes consecutive
// buffers), the ring the operations in flight.
func ExampleAttachOptions() {
	o := peregrine.AttachOptions{Buffers: 256, BufSize: 64 << 10, RingSize: 256}
	fmt.Printf("longest message %d MiB, %d operations in flight\n", o.Buffers*o.BufSize>>20, o.RingSize)
	// Output:
	// longest message 16 MiB, 256 operations in flight
}
