package peregrine

import (
	"context"
	"net/netip"
	"testing"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// The cost of the public API over the raw transaction layer: a 1 KiB
// message there and back, in memory. The API's round trip crosses from the
// caller to each endpoint's poll loop and back (two loops, an echo
// goroutine); the raw one polls both endpoints on the benchmark's
// goroutine, the floor. Their ratio is api_vs_raw_cost_1k.

func BenchmarkAPIRoundTrip1K(b *testing.B) {
	h := testHost(b, HostOptions{})
	ea, eb := pair(b, h, Options{Idle: IdleBusy}, Options{Idle: IdleBusy})
	b.Cleanup(func() { _ = ea.Close(); _ = eb.Close() })
	ca, cb, _ := connect(b, ea, eb, ConnOptions{})
	ctx := context.Background()
	stop := make(chan struct{})
	echoed := make(chan error, 1)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := cb.Recv(ctx, buf)
			if err == nil {
				err = cb.Send(ctx, buf[:n])
			}
			if err != nil {
				select {
				case <-stop:
					err = nil
				default:
				}
				echoed <- err
				return
			}
		}
	}()
	msg := make([]byte, 1024)
	buf := make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(2 * 1024)
	b.ResetTimer()
	for range b.N {
		if err := ca.Send(ctx, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := ca.Recv(ctx, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(stop)
	_ = ca.Close()
	if err := <-echoed; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRawTxnRoundTrip1K(b *testing.B) {
	pool, err := mbuf.New(mbuf.Options{Name: "raw", Frames: 4096})
	if err != nil {
		b.Fatal(err)
	}
	pa, pb, err := mem.NewPair(pool, mem.PairOptions{Name: "raw"})
	if err != nil {
		b.Fatal(err)
	}
	clk := clock.NewReal()
	ipA, ipB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	var server *txn.Conn
	mk := func(p *mem.Port, ip netip.Addr) *txn.Endpoint {
		ep, err := txn.New(txn.Options{
			Transport: rt.Options{Port: p, Pool: pool, Clock: clk, LocalIP: ip, LocalMAC: [6]byte(p.Info().MAC)},
			OnConnEvent: func(ev txn.ConnEvent) {
				if ev.Kind == txn.ConnEstablished && ip == ipB {
					server = ev.Conn
				}
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		return ep
	}
	a, z := mk(pa, ipA), mk(pb, ipB)
	ra, _ := a.Register(make([]byte, 2048), 0) // [0,1K): send, [1K,2K): receive
	rz, _ := z.Register(make([]byte, 2048), 0)
	client, err := a.Open(rt.PeerAddr{MAC: [6]byte(pb.Info().MAC), IP: ipB}, txn.ConnOptions{Index: sendIndex})
	if err != nil {
		b.Fatal(err)
	}
	cq := make([]txn.Completion, 16)
	poll := func() { now := clk.Now(); a.Poll(now); z.Poll(now) }
	for server == nil {
		poll()
	}
	post := func(c *txn.Conn, r txn.Region) {
		if _, err := c.PostRecv(txn.RecvWR{Local: r, LocalAddr: 1024, Len: 1024}); err != nil {
			b.Fatal(err)
		}
	}
	post(client, ra)
	post(server, rz)
	// await polls until ep reports a receive completion, draining the rest.
	await := func(ep *txn.Endpoint) {
		for {
			poll()
			n := ep.Completions(cq)
			got := false
			for _, c := range cq[:n] {
				if c.Status != txn.StatusOK {
					b.Fatalf("%v %v", c.Kind, c.Status)
				}
				got = got || c.Kind == txn.OpRecv
			}
			if got {
				return
			}
		}
	}
	drain := func(ep *txn.Endpoint) { ep.Completions(cq) }
	b.ReportAllocs()
	b.SetBytes(2 * 1024)
	b.ResetTimer()
	for range b.N {
		if _, err := client.Send(txn.Op{Local: ra, Len: 1024}); err != nil {
			b.Fatal(err)
		}
		await(z)
		post(server, rz)
		if _, err := server.Send(txn.Op{Local: rz, Len: 1024}); err != nil {
			b.Fatal(err)
		}
		await(a)
		post(client, ra)
	}
	b.StopTimer()
	for a.Outstanding()+z.Outstanding() > 2 { // the posted WQEs stay
		poll()
		drain(a)
		drain(z)
	}
	now := clk.Now()
	a.Stop(now)
	z.Stop(now)
	_ = a.Close()
	_ = z.Close()
	_ = pa.Close()
	_ = pb.Close()
}

// What a caller's poll costs when there is nothing to do (an established
// connection, nothing in flight): a PollCaller waiter runs one between
// each look at its op, and a loop one an idle iteration.
func BenchmarkIdlePoll(b *testing.B) {
	h := testHost(b, HostOptions{})
	ea, eb := pair(b, h, Options{Poll: PollCaller}, Options{Poll: PollCaller})
	b.Cleanup(func() { _ = ea.Close(); _ = eb.Close() })
	connect(b, ea, eb, ConnOptions{})
	e := ea.e
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for {
			if _, ok := e.tryPoll(); ok {
				break
			}
		}
	}
}
