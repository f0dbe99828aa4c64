package txn_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// Two endpoints joined by an in-memory port pair: the initiator pushes
// 100 KiB into the target's registered region (solicited: it is larger than
// the 8 KiB threshold) and pulls it back into another buffer.
func Example() {
	pool, _ := mbuf.New(mbuf.Options{Name: "example", Frames: 4096})
	defer pool.Close()
	pa, pb, _ := mem.NewPair(pool, mem.PairOptions{Name: "example"})
	clk := clock.NewVirtual(0)
	ipA, ipB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")

	initiator, _ := txn.New(txn.Options{Transport: rt.Options{Port: pa, Pool: pool, Clock: clk, LocalIP: ipA}})
	target, _ := txn.New(txn.Options{
		Transport: rt.Options{Port: pb, Pool: pool, Clock: clk, LocalIP: ipB},
		OnRequest: func(r *txn.Request) { fmt.Printf("target: %v rsn %d, %d bytes\n", r.Kind, r.RSN, len(r.Data)) },
	})

	// The target's memory, and the initiator's source and destination.
	remote, _ := target.Register(make([]byte, 100<<10), txn.RemoteWrite|txn.RemoteRead)
	src := bytes.Repeat([]byte("peregrine "), 10<<10)
	dst := make([]byte, len(src))
	local, _ := initiator.Register(src, 0)
	back, _ := initiator.Register(dst, 0)

	conn, _ := initiator.Open(rt.PeerAddr{MAC: [6]byte(pb.Info().MAC), IP: ipB}, txn.ConnOptions{Ordered: true})
	at := wire.RegionRef{Key: remote.Key, Addr: 0}
	_, _ = conn.Push(txn.Op{Local: local, Len: len(src), Remote: at, Tag: 1})
	_, _ = conn.Pull(txn.Op{Local: back, Len: len(src), Remote: at, Tag: 2})

	cq := make([]txn.Completion, 4)
	for done := 0; done < 2; {
		now := clk.Now()
		if initiator.Poll(now)+target.Poll(now) == 0 {
			clk.Advance(time.Microsecond)
		}
		n := initiator.Completions(cq)
		for _, c := range cq[:n] {
			fmt.Printf("initiator: %v tag %d %v\n", c.Kind, c.Tag, c.Status)
		}
		done += n
	}
	fmt.Println("round trip intact:", bytes.Equal(src, dst))

	now := clk.Now()
	initiator.Stop(now)
	target.Stop(now)
	_ = initiator.Close()
	_ = target.Close()
	_ = pa.Close()
	_ = pb.Close()
	// Output:
	// target: push rsn 0, 102400 bytes
	// target: pull rsn 1, 102400 bytes
	// initiator: push tag 1 ok
	// initiator: pull tag 2 ok
	// round trip intact: true
}
