package txn

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
)

// TestSteadyStateAllocatesNothing posts, transfers and completes pushes
// (unsolicited and solicited) and pulls with Swift on: no heap allocation
// per operation once warm.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	p := newPair(t, 11, "", func(a, b *Options) {
		a.OnRequest, b.OnRequest = nil, func(*Request) {}
		sp := swift.DefaultParams()
		a.Congestion, b.Congestion = &sp, &sp
	})
	// Every operation has a timeout: arming and cancelling it allocates
	// nothing either.
	c := p.connect(ConnOptions{Ordered: true, OpTimeout: time.Second})
	src := pattern(1, 64<<10)
	dst := make([]byte, 64<<10)
	ra, _ := p.a.Register(src, 0)
	rd, _ := p.a.Register(dst, 0)
	rb, _ := p.b.Register(make([]byte, 64<<10), RemoteWrite|RemoteRead)
	cq := make([]Completion, 8)
	one := func(kind OpKind, n int) {
		op := Op{Local: ra, Len: n, Remote: wire.RegionRef{Key: rb.Key}}
		var err error
		if kind == OpPush {
			_, err = c.Push(op)
		} else {
			op.Local = rd
			_, err = c.Pull(op)
		}
		if err != nil {
			t.Fatal(err)
		}
		for got := 0; got == 0; {
			now := p.clk.Now()
			w := p.a.Poll(now) + p.fab.Poll(now) + p.b.Poll(now)
			got = p.a.Completions(cq)
			if w == 0 && got == 0 {
				p.clk.Advance(time.Microsecond)
			}
		}
		if cq[0].Status != StatusOK {
			t.Fatal(cq[0].Status)
		}
	}
	cycle := func() {
		one(OpPush, 2000)
		one(OpPush, 40<<10)
		one(OpPull, 20<<10)
	}
	for range 20 {
		cycle()
	}
	require.Zero(t, testing.AllocsPerRun(50, cycle))

	// Cancel, the abort notice it owes on an ordered connection and the
	// target's placeholder allocate nothing either.
	cancelled := func() {
		rsn, err := c.Pull(Op{Local: rd, Len: 20 << 10, Remote: wire.RegionRef{Key: rb.Key}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Cancel(rsn); err != nil {
			t.Fatal(err)
		}
		for p.a.Outstanding() != 0 || p.b.Outstanding() != 0 {
			now := p.clk.Now()
			if p.a.Poll(now)+p.fab.Poll(now)+p.b.Poll(now) == 0 {
				p.clk.Advance(time.Microsecond)
			}
		}
		if n := p.a.Completions(cq); n != 1 || cq[0].Status != StatusCancelled {
			t.Fatalf("%d completions, %v", n, cq[0].Status)
		}
	}
	for range 5 {
		cancelled()
	}
	require.Zero(t, testing.AllocsPerRun(20, cancelled))
	require.GreaterOrEqual(t, p.a.Stats().NoticesSent, uint64(25), "each cancel told the target")
	require.Equal(t, p.a.Stats().NoticesSent, p.b.Stats().NoticesReceived)
}

func BenchmarkPushPull(b *testing.B) {
	for _, n := range []int{64, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("push/%dB", n), func(b *testing.B) {
			p := newPair(b, 1, "", func(x, y *Options) { x.OnRequest, y.OnRequest = nil, nil })
			c := p.connect(ConnOptions{Ordered: true})
			ra, _ := p.a.Register(make([]byte, 64<<10), 0)
			rb, _ := p.b.Register(make([]byte, 64<<10), RemoteWrite)
			cq := make([]Completion, 64)
			b.ReportAllocs()
			b.SetBytes(int64(n))
			b.ResetTimer()
			posted, done := 0, 0
			for done < b.N {
				for posted < b.N && posted-done < 32 {
					if _, err := c.Push(Op{Local: ra, Len: n, Remote: wire.RegionRef{Key: rb.Key}}); err != nil {
						break
					}
					posted++
				}
				now := p.clk.Now()
				w := p.a.Poll(now) + p.fab.Poll(now) + p.b.Poll(now)
				done += p.a.Completions(cq)
				if w == 0 {
					p.clk.Advance(time.Microsecond)
				}
			}
		})
	}
}
