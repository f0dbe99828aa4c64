package ioi

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	cioi "github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// The sender's cost per packet (ioi_sender_cost_vs_plain) on the real
// clock: what IOI adds to the sending endpoint, not to the whole push.
//
// One pair of endpoints, joined by a fabric with no impairment and one
// path, carries two ordered connections: one with IOI off (ModeOff, no
// marks: the plain transport) and one with IOI on (a threshold of 64 KiB,
// so every 1 MiB message has a head, a sprayed middle and a tail). The
// fabric and the receiver run too (the sender needs their
// acknowledgements to keep its window open) but only the sender's Poll is
// timed: everything the sending endpoint does per packet, from taking the
// acknowledgements and IOI's bookkeeping of them (OPC, UPC, the
// threshold) to marking, building and transmitting the packets. With one
// path the fabric delivers both connections' packets alike, so the
// receiver's work and the acknowledgements the sender gets do not differ
// by mode either.
//
// The two connections push in alternating rounds, their order swapped
// each round, on the same endpoints and memory, so both see the same
// caches, allocator state and clock speed. Each round gives each mode
// its nanoseconds per packet; the ratio is the median of the rounds'
// ratios, which a burst of other work on the machine moves only if it
// hits most rounds. Allocations are counted in each IOI round.

// Cost is the result of SenderCost.
type Cost struct {
	// Plain and IOI are the median rounds' sender nanoseconds per packet.
	Plain, IOI float64
	// Ratio is the median of the rounds' IOI ÷ plain; RatioMin and
	// RatioMax the extremes, the spread a quiet machine keeps small.
	Ratio, RatioMin, RatioMax float64
	// Rounds and the packets each mode sent per round.
	Rounds, Packets int
	// Allocs is the heap allocations per packet of the median IOI round,
	// AllocsMax of the round with the most. An allocation per packet (or
	// per message) shows in every round; the Go runtime's own, once per
	// process (it builds a call site's type-assertion cache on one miss in
	// 1024, at random: errors.Is on a full window, port.FlushTx), in one.
	Allocs, AllocsMax float64
	// Middle is the sprayed packets the IOI rounds sent: proof they ran
	// the procedure.
	Middle uint64
	// RxPlain and RxIOI are the receiver's nanoseconds per packet in the
	// same rounds (its Poll, timed alike): for information, not a goal.
	RxPlain, RxIOI float64
}

// costSize is the message size of the cost measurement.
const costSize = 1 << 20

// SenderCost measures the sender's nanoseconds per packet with and without
// IOI over rounds rounds (0: 31) of at least packets packets (0: 1<<11,
// a few milliseconds: short rounds leave most of them untouched by the
// machine's other work, and the median takes those) per mode.
func SenderCost(packets, rounds int) (Cost, error) {
	if packets <= 0 {
		packets = 1 << 11
	}
	if rounds <= 0 {
		rounds = 31
	}
	pool, err := mbuf.New(mbuf.Options{Name: "bench-ioi-cost", Frames: 1 << 14, CacheSize: 128})
	if err != nil {
		return Cost{}, err
	}
	defer pool.Close()
	e, err := newEnv(pool, fabric.Profile{}, cioi.ModeOff, 64, 1, costSize)
	if err != nil {
		return Cost{}, err
	}
	defer e.close()
	plain, err := e.open(txn.ConnOptions{Ordered: true, IOI: &cioi.Config{Mode: cioi.ModeOff}})
	if err != nil {
		return Cost{}, err
	}
	withIOI, err := e.open(txn.ConnOptions{Ordered: true, IOI: &cioi.Config{Mode: cioi.ModeIOI, Threshold: 64 << 10}})
	if err != nil {
		return Cost{}, err
	}
	seg := e.a.Segment()
	perPush := (costSize + seg - 1) / seg
	pushes := max(1, (packets+perPush-1)/perPush)
	// Warm up: caches, the scheduler's state, and most of the runtime's
	// type-assertion caches (see Cost.Allocs; port.FlushTx's, which fails
	// for mem ports, built inside a measured round of a process's first
	// run, seen with -memprofilerate=1: 64 pushes of each mode make
	// ~16,000 calls there; rarer call sites may still build theirs later).
	for _, c := range []*txn.Conn{plain, withIOI} {
		if _, err := e.timedPushes(c, 64); err != nil {
			return Cost{}, err
		}
	}
	over := timerOverhead()
	res := Cost{Rounds: rounds, Packets: pushes * perPush}
	pkts := float64(res.Packets)
	var plainNs, ioiNs, ratios, rxPlain, rxIOI, allocs []float64
	middle0 := e.a.IOIStats().PktMiddle
	runtime.GC()
	for r := range rounds {
		order := []*txn.Conn{plain, withIOI}
		if r%2 == 1 {
			order[0], order[1] = withIOI, plain
		}
		var p, w float64
		for _, c := range order {
			var ms0, ms1 runtime.MemStats
			if c == withIOI {
				runtime.ReadMemStats(&ms0)
			}
			t, err := e.timedPushes(c, pushes)
			if err != nil {
				return Cost{}, err
			}
			ns := float64(t.elapsed-time.Duration(t.polls)*over) / pkts
			rx := float64(t.rx-time.Duration(t.polls)*over) / pkts
			if c == withIOI {
				runtime.ReadMemStats(&ms1)
				allocs = append(allocs, float64(ms1.Mallocs-ms0.Mallocs)/pkts)
				w, rxIOI = ns, append(rxIOI, rx)
			} else {
				p, rxPlain = ns, append(rxPlain, rx)
			}
		}
		plainNs, ioiNs, ratios = append(plainNs, p), append(ioiNs, w), append(ratios, w/p)
	}
	res.Middle = e.a.IOIStats().PktMiddle - middle0
	res.Plain, res.IOI, res.Ratio = median(plainNs), median(ioiNs), median(ratios)
	res.RatioMin, res.RatioMax = slices.Min(ratios), slices.Max(ratios)
	res.RxPlain, res.RxIOI = median(rxPlain), median(rxIOI)
	res.Allocs, res.AllocsMax = median(allocs), slices.Max(allocs)
	if res.Middle == 0 {
		return res, fmt.Errorf("the IOI rounds sprayed no packet (threshold %d B, segment %d B): they did not measure IOI", 64<<10, seg)
	}
	return res, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// timerOverhead is what timing adds to each timed Poll: the interval an
// empty timed region measures (the least of a few tries).
func timerOverhead() time.Duration {
	best := time.Duration(math.MaxInt64)
	for range 5 {
		const n = 1 << 12
		var acc time.Duration
		for range n {
			start := time.Now()
			acc += time.Since(start)
		}
		best = min(best, acc/n)
	}
	return best
}

// open opens a connection with opts and waits until it is established.
func (e *env) open(opts txn.ConnOptions) (*txn.Conn, error) {
	c, err := e.a.Open(rt.PeerAddr{MAC: [6]byte(e.pb.Info().MAC), IP: ipB}, opts)
	if err != nil {
		return nil, err
	}
	err = e.run(func() bool { return c.Transport() != nil && c.Transport().State() == rt.StateEstablished }, time.Second)
	return c, err
}

// timed is the real time spent in the sender's and the receiver's Polls,
// and how many Polls each.
type timed struct {
	elapsed, rx time.Duration
	polls       int
}

// timedPushes pushes n messages of costSize on c one after the other,
// timing the sender's Polls only.
func (e *env) timedPushes(c *txn.Conn, n int) (timed, error) {
	var t timed
	for range n {
		e.got = e.got[:0]
		if _, err := c.Push(txnOp(e)); err != nil {
			return t, err
		}
		if err := e.runTimed(&t); err != nil {
			return t, err
		}
		if e.got[0].Status != txn.StatusOK {
			return t, fmt.Errorf("push completed with %v", e.got[0].Status)
		}
	}
	return t, nil
}

func txnOp(e *env) txn.Op {
	return txn.Op{Local: e.local, Len: costSize, Remote: wire.RegionRef{Key: e.region.Key}}
}

// runTimed is run until the push completes, with the sender's Poll timed.
func (e *env) runTimed(t *timed) error {
	end := e.clk.Now().Add(10 * time.Second)
	for len(e.got) == 0 {
		now := e.clk.Now()
		start := time.Now()
		w := e.a.Poll(now)
		t.elapsed += time.Since(start)
		t.polls++
		w += e.fab.Poll(now)
		start = time.Now()
		w += e.b.Poll(now)
		t.rx += time.Since(start)
		n := e.a.Completions(e.cq)
		e.got = append(e.got, e.cq[:n]...)
		if w+n > 0 {
			continue
		}
		next, ok := e.nextDeadline()
		if !ok {
			return fmt.Errorf("stalled at %v: nothing left to do", now)
		}
		next = max(next, now.Add(time.Microsecond))
		if next > end {
			return fmt.Errorf("not done within 10s of virtual time")
		}
		if err := e.clk.Set(next); err != nil {
			return err
		}
	}
	return nil
}

// nextDeadline is the earliest deadline of the sender, the fabric and the
// receiver (three calls, not a slice of method values: those would be
// allocated on every idle turn of a timed loop).
func (e *env) nextDeadline() (next clock.Time, ok bool) {
	if d, dok := e.a.NextDeadline(); dok {
		next, ok = d, true
	}
	if d, dok := e.fab.NextDeadline(); dok && (!ok || d < next) {
		next, ok = d, true
	}
	if d, dok := e.b.NextDeadline(); dok && (!ok || d < next) {
		next, ok = d, true
	}
	return next, ok
}
