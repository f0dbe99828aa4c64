package dix

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	coredix "github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// RxCostResult is the receiver's cost per data packet, real clock.
type RxCostResult struct {
	SendNs, PushNs         float64
	SendAllocs, PushAllocs float64 // heap allocations per packet, whole pair
}

// RxCost times the receiving endpoint's Poll per data packet for 4 KiB
// Sends of four packets (16-bit free-running index, into posted WQEs)
// against unsolicited pushes of the same size and segments, two txn
// endpoints joined by an unimpaired in-process link on a virtual clock
// (only the receiver's Poll is timed, on the real clock).
func RxCost(packets int) (RxCostResult, error) {
	var r RxCostResult
	var err error
	if r.SendNs, r.SendAllocs, err = rxCost(true, packets); err != nil {
		return r, err
	}
	if r.PushNs, r.PushAllocs, err = rxCost(false, packets); err != nil {
		return r, err
	}
	return r, nil
}

func rxCost(send bool, packets int) (nsPerPkt, allocsPerPkt float64, err error) {
	const seg, size, depth, inflight = 1024, 4096, 256, 32
	pool, err := mbuf.New(mbuf.Options{Name: "dix-rxcost", Frames: 8192, CacheSize: 128})
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: "rxcost", LinkRing: 4096})
	if err != nil {
		return 0, 0, err
	}
	defer fab.Close()
	clk := clock.NewVirtual(1_000_000)
	ipA, ipB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	var connB *txn.Conn
	a, err := txn.New(txn.Options{Transport: rt.Options{Name: "a", Port: pa, Pool: pool, Clock: clk, LocalIP: ipA, Seed: 1}, Segment: seg})
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	b, err := txn.New(txn.Options{Transport: rt.Options{Name: "b", Port: pb, Pool: pool, Clock: clk, LocalIP: ipB, Seed: 2}, Segment: seg, RecvDepth: depth,
		OnConnEvent: func(ev txn.ConnEvent) {
			if ev.Kind == txn.ConnEstablished {
				connB = ev.Conn
			}
		}})
	if err != nil {
		return 0, 0, err
	}
	defer b.Close()
	conn, err := a.Open(rt.PeerAddr{MAC: [6]byte(pb.Info().MAC), IP: ipB}, txn.ConnOptions{Index: coredix.Config{Kind: coredix.FreeRunning, Width: 16}})
	if err != nil {
		return 0, 0, err
	}
	src := make([]byte, size)
	dst := make([]byte, depth*size)
	ra, _ := a.Register(src, 0)
	rb, _ := b.Register(dst, txn.RemoteWrite)
	cq := make([]txn.Completion, 64)
	var timed time.Duration
	var posted, doneA, doneB, wqes int
	step := func(measure bool) {
		now := clk.Now()
		work := a.Poll(now) + fab.Poll(now)
		t0 := time.Now()
		work += b.Poll(now)
		if measure {
			timed += time.Since(t0)
		}
		for n := a.Completions(cq); n > 0; n = a.Completions(cq) {
			doneA += n
		}
		for n := b.Completions(cq); n > 0; n = b.Completions(cq) {
			for _, c := range cq[:n] {
				if c.Kind == txn.OpRecv {
					doneB++
				}
			}
		}
		if connB != nil && send {
			for wqes-doneB < depth {
				if _, err := connB.PostRecv(txn.RecvWR{Local: rb, LocalAddr: uint64(wqes % depth * size), Len: size}); err != nil {
					break
				}
				wqes++
			}
		}
		for posted-doneA < inflight && connB != nil {
			var err error
			if send {
				_, err = conn.Send(txn.Op{Local: ra, Len: size})
			} else {
				_, err = conn.Push(txn.Op{Local: ra, Len: size, Remote: wire.RegionRef{Key: rb.Key, Addr: uint64(posted % depth * size)}})
			}
			if err != nil {
				break
			}
			posted++
		}
		if work == 0 {
			_ = clk.Set(clk.Now().Add(time.Microsecond))
		}
	}
	received := func() uint64 {
		if send {
			return b.SendStats().PlacedDirect + b.SendStats().PlacedElement
		}
		return b.Stats().BytesPlaced / seg
	}
	for received() < uint64(packets/10) {
		step(false)
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	base := received()
	for received()-base < uint64(packets) {
		step(true)
	}
	runtime.ReadMemStats(&ms1)
	got := float64(received() - base)
	now := clk.Now()
	a.Stop(now)
	b.Stop(now)
	fab.Stop(now)
	drain := make([]mbuf.Handle, 64)
	for _, pt := range []interface{ RxBurst(int, []mbuf.Handle) int }{pa, pb} {
		for n := pt.RxBurst(0, drain); n > 0; n = pt.RxBurst(0, drain) {
			pool.Free(drain[:n])
		}
	}
	if got == 0 {
		return 0, 0, fmt.Errorf("no packet received")
	}
	return float64(timed.Nanoseconds()) / got, float64(ms1.Mallocs-ms0.Mallocs) / got, nil
}
