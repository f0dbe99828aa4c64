package peregrine_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// sparseGap is the quiet spell before each round trip of
// BenchmarkSparseRoundTrip: longer than an adaptive loop's 500 µs of
// spinning and yielding, so every request finds the loops asleep.
const sparseGap = 2 * time.Millisecond

// BenchmarkSparseRoundTrip: one 64 B request and its echo every 2 ms — an
// application that calls now and then, not in a stream — through each
// door, over an in-memory pair and over an AF_XDP veth pair (root). The
// endpoints' loops are unpinned and adaptive, as `peregrine serve` runs
// its own; the echo peer's loop polls for it (PollLoop). Reports the
// round trips' p50 and p90 in µs (the gap is not timed). Run it with
// -benchtime=300x for figures; each iteration waits the gap.
func BenchmarkSparseRoundTrip(b *testing.B) {
	for _, where := range []string{"mem", "afxdp"} {
		for _, door := range []string{"inprocess", "sidecar"} {
			b.Run(where+"/"+door, func(b *testing.B) { sparseRoundTrips(b, where, door == "sidecar") })
		}
	}
}

func sparseRoundTrips(b *testing.B, where string, sidecar bool) {
	h, err := peregrine.NewHost(peregrine.HostOptions{})
	if err != nil {
		b.Fatal(err)
	}
	specA, specB := fmt.Sprintf("mem:sparse%d/0", doorSeq.Add(1)), ""
	specB = specA[:len(specA)-1] + "1"
	if where == "afxdp" {
		tp := netnstest.TwoNS(b, netns.VethOptions{})
		specA = fmt.Sprintf("afxdp:%s?netns=%s", tp.IfA, tp.A.Name)
		specB = fmt.Sprintf("afxdp:%s?netns=%s", tp.IfB, tp.B.Name)
	}
	a, err := h.Open(specA, peregrine.Options{IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		b.Fatal(err)
	}
	peer, err := h.Open(specB, peregrine.Options{IP: netip.MustParseAddr("198.18.0.2")})
	if err != nil {
		b.Fatal(err)
	}
	from := a
	var stopSrv func()
	if sidecar {
		from, _, stopSrv = serveSidecar(b, a)
	}
	b.Cleanup(func() {
		if stopSrv != nil {
			stopSrv()
		}
		a.Close()
		peer.Close()
		if err := h.Close(); err != nil {
			b.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang guard
	defer cancel()
	c, p := dialPeer(b, from, peer, peregrine.ConnOptions{})
	go echoConn(ctx, p, 64)
	buf := make([]byte, 64)
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		time.Sleep(sparseGap) // the quiet spell is the workload
		b.StartTimer()
		start := time.Now()
		if err := c.Send(ctx, buf); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Recv(ctx, buf); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50_us")
	b.ReportMetric(float64(took[len(took)*9/10].Nanoseconds())/1e3, "p90_us")
}
