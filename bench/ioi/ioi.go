// Package ioi is the `peregrine bench ioi` scenario: IOI
// forwarding (docs/ioi.md) against all-in-order and all-sprayed delivery of
// the same messages over the same multipath fabric, in the deterministic
// simulation (fabric emulator, mem ports, virtual clock), so completion
// times are exact; and the sender's cost per packet on the real clock
// (cost.go).
//
// The fabric has four paths of equal rate R (PathRate) and one-way delays
// d, d+2, d+5, d+10 µs behind the sender's access link of 4R (the
// direction's shared Rate); sprayed frames go adaptively (the path whose
// link frees first, as adaptive routing does) and in-order frames (the
// IOIInOrder flag) keep their flow's path. One push of each size travels
// on an ordered connection with a fixed window of Window packets, once per
// policy: ModeInOrder (every packet on the ordered path), ModeSprayed
// (every packet sprayed) and ModeIOI; its completion time is the
// operation's post-to-completion time on the virtual clock.
//
// The window (14 packets, 23.6 KB) covers the four paths' bandwidth-delay
// product, so all-sprayed delivery is not window-bound; a larger window
// only lengthens IOI's tail, which is what was outstanding when it began
// (OPC + UPC), on one path. It also makes a 64 KiB message stay in order:
// at its first response 14 packets were sent and the rest is within the
// threshold (twice that). The transport's retransmit settings keep the
// ordered path's queue from reading as loss: a shortest timeout of 1 ms,
// and the transport's default early retransmission, whose time-based
// reorder window (core/rt, detectLoss) gives the head packets queued on
// the ordered path the time they take while middle packets on emptier
// paths overtake them.
//
// The path-death rows (pathdeath.go) black-hole one of the four paths
// mid-run and compare the goodput with that of three healthy paths.
package ioi

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	cioi "github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// Defaults of the scenario.
const (
	DefaultPathRate = 1e9 // R, bit/s per path
	DefaultDelay    = 5 * time.Microsecond
	DefaultWindow   = 14 // packets outstanding per connection
)

// Options configures a run.
type Options struct {
	Out io.Writer
	// PathRate is R (0: DefaultPathRate); Delay is d (0: DefaultDelay);
	// Window the packets a connection keeps outstanding (0:
	// DefaultWindow).
	PathRate uint64
	Delay    time.Duration
	Window   int
	// DeathSize is the message size of the path-death rows (0: 16 MiB).
	DeathSize int
	// CostPackets is the packets per mode and round of the real-clock
	// sender cost (0: 1<<11), CostRounds its rounds (0: 31; cost.go).
	CostPackets, CostRounds int
}

func (o *Options) defaults() {
	if o.PathRate == 0 {
		o.PathRate = DefaultPathRate
	}
	if o.Delay == 0 {
		o.Delay = DefaultDelay
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.DeathSize == 0 {
		o.DeathSize = 16 << 20
	}
}

// Profile returns the fabric profile of the scenario: four paths of rate
// R and delays d, d+2, d+5, d+10 µs behind an access link of 4R, and
// loss on every path.
func Profile(r uint64, d time.Duration, loss fabric.Percent) fabric.Profile {
	p := fabric.Profile{
		Delay: d, Rate: 4 * r, QueuePackets: 4096, Paths: 4, Spray: fabric.SprayAdaptive,
		PathRate: []uint64{r}, PathQueue: []int{4096},
		PathDelay: []time.Duration{0, 2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond},
		Limit:     1 << 16,
	}
	if loss > 0 {
		p.PathLoss = []fabric.Percent{loss}
	}
	return p
}

// Result is one simulated push.
type Result struct {
	Completion  time.Duration
	Bytes       int
	IOI         txn.IOIStats // the initiator's (the sender's)
	RxIOI       txn.IOIStats // the target's (the receiver's)
	Fabric      fabric.Stats
	Retransmits uint64 // timeout and early resends of the initiator
}

// Goodput returns the push's bytes per second.
func (r Result) Goodput() float64 { return float64(r.Bytes) / r.Completion.Seconds() }

// Run measures and prints the report; it returns the pass and fail counts.
func Run(ctx context.Context, opts Options) (pass, fail int, err error) {
	opts.defaults()
	rep := report.New(opts.Out)
	rep.Note("4 paths of %s each, delays d=%v +0/2/5/10us, access link 4R, adaptive spraying, window %d packets, ordered connection",
		fmtRate(opts.PathRate), opts.Delay, opts.Window)
	prof := Profile(opts.PathRate, opts.Delay, 0)
	modes := []cioi.Mode{cioi.ModeInOrder, cioi.ModeSprayed, cioi.ModeIOI}
	res := map[int]map[cioi.Mode]Result{}
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
		res[size] = map[cioi.Mode]Result{}
		for _, m := range modes {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			r, err := Simulate(SimOptions{Profile: prof, Mode: m, Size: size, Window: opts.Window, Seed: 1})
			if err != nil {
				return 0, 0, fmt.Errorf("bench ioi: %v %s: %w", m, fmtSize(size), err)
			}
			res[size][m] = r
			rep.Note("%-8s %-7s completion %10v  goodput %6.2f Gbit/s  head/middle/tail %d/%d/%d  in-order %d  peak OPC/UPC %d/%d  threshold %d B  retransmits %d",
				fmtSize(size), m, r.Completion, r.Goodput()*8/1e9, r.IOI.PktHead, r.IOI.PktMiddle, r.IOI.PktTail, r.IOI.PktInOrder,
				r.IOI.PeakOPC, r.IOI.PeakUPC, r.IOI.Threshold, r.Retransmits)
		}
	}
	// The figure of --report: completion time against message size, one
	// line per policy.
	for _, m := range modes {
		for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
			fmt.Fprintln(opts.Out, report.Point{Figure: "ioi_completion_vs_message_size", Series: m.String(), X: float64(size >> 10),
				Y: float64(res[size][m].Completion.Microseconds()), XLabel: "message_size_KiB", YLabel: "completion_us"}.Line())
		}
	}
	ratio := func(a, b Result) float64 { return a.Completion.Seconds() / b.Completion.Seconds() }
	for _, size := range []int{1 << 20, 16 << 20} {
		in, sp, io := res[size][cioi.ModeInOrder], res[size][cioi.ModeSprayed], res[size][cioi.ModeIOI]
		rep.Add(report.Ratio{Name: "ioi_vs_inorder_speedup_" + fmtSize(size), Value: ratio(in, io), Op: report.AtLeast, Target: 3.0,
			Detail: fmt.Sprintf("in order %v, IOI %v", in.Completion, io.Completion)})
		rep.Add(report.Ratio{Name: "ioi_vs_sprayed_completion_" + fmtSize(size), Value: ratio(io, sp), Op: report.AtMost, Target: 1.10,
			Detail: fmt.Sprintf("IOI %v, all sprayed %v", io.Completion, sp.Completion)})
	}
	small := res[64<<10]
	rep.Add(report.Ratio{Name: "below_threshold_unchanged_64KiB", Value: ratio(small[cioi.ModeIOI], small[cioi.ModeInOrder]), Op: report.AtMost, Target: 1.01,
		Detail: fmt.Sprintf("IOI %v (middle packets %d, threshold %d B), in order %v", small[cioi.ModeIOI].Completion,
			small[cioi.ModeIOI].IOI.PktMiddle, small[cioi.ModeIOI].IOI.Threshold, small[cioi.ModeInOrder].Completion)})
	lossy, err := Simulate(SimOptions{Profile: Profile(opts.PathRate, opts.Delay, 1), Mode: cioi.ModeIOI, Size: 16 << 20, Window: opts.Window, Seed: 1})
	if err != nil {
		return 0, 0, fmt.Errorf("bench ioi: 1%% loss: %w", err)
	}
	clean := res[16<<20][cioi.ModeIOI]
	rep.Add(report.Ratio{Name: "ioi_loss1pct_vs_noloss_16MiB", Value: lossy.Goodput() / clean.Goodput(), Op: report.AtLeast, Target: 0.80,
		Detail: fmt.Sprintf("goodput %.2f vs %.2f Gbit/s; %d retransmits, %d path losses; in-order packets out of sequence at the receiver %d (buffered), refused %d",
			lossy.Goodput()*8/1e9, clean.Goodput()*8/1e9, lossy.Retransmits, lossy.Fabric.AtoB.PathLossDrops, lossy.RxIOI.OutOfSequence, lossy.RxIOI.Refused)})
	if err := pathDeathRows(ctx, rep, opts); err != nil {
		return 0, 0, err
	}
	cost, err := SenderCost(opts.CostPackets, opts.CostRounds)
	if err != nil {
		return 0, 0, fmt.Errorf("bench ioi: sender cost: %w", err)
	}
	rep.Add(report.Ratio{Name: "ioi_sender_cost_vs_plain", Value: cost.Ratio, Op: report.AtMost, Target: 1.10,
		Detail: fmt.Sprintf("the sending endpoint's Poll only, real clock: %.0f ns/packet with IOI, %.0f without (median of %d interleaved rounds of %d packets each; round ratios %.3f..%.3f; %d sprayed; the receiver's Poll, for information: %.0f and %.0f ns/packet)",
			cost.IOI, cost.Plain, cost.Rounds, cost.Packets, cost.RatioMin, cost.RatioMax, cost.Middle, cost.RxIOI, cost.RxPlain)})
	rep.Add(report.Ratio{Name: "ioi_sender_allocs_per_packet", Value: cost.Allocs, Op: report.AtMost, Target: 0,
		Detail: fmt.Sprintf("heap allocations per packet while IOI pushes run (the median round; the most in any round %.4f: the Go runtime builds a call site's type-assertion cache once per process, at random)", cost.AllocsMax)})
	p, f := rep.Summary()
	return p, f, nil
}

// SimOptions configures Simulate.
type SimOptions struct {
	Profile fabric.Profile // the data direction; ACKs come back over the same
	Mode    cioi.Mode
	Size    int
	Window  int
	Seed    uint64
	// Pushes is how many pushes of Size go one after the other (0: 1); the
	// result is the last one's.
	Pushes int
}

// The transport's retransmission settings in the scenario (see the
// package doc).
const (
	minRTO    = time.Millisecond
	earlyRetx = 0 // the transport's default
)

var (
	ipA = netip.MustParseAddr("198.18.0.1")
	ipB = netip.MustParseAddr("198.18.0.2")
)

// Simulate pushes opts.Size bytes on an ordered connection through the
// fabric on a virtual clock and returns the completion time.
func Simulate(opts SimOptions) (Result, error) {
	frames := 1 << 15
	pool, err := mbuf.New(mbuf.Options{Name: "bench-ioi", Frames: frames, CacheSize: 128})
	if err != nil {
		return Result{}, err
	}
	defer pool.Close()
	env, err := newEnv(pool, opts.Profile, opts.Mode, opts.Window, opts.Seed, opts.Size)
	if err != nil {
		return Result{}, err
	}
	defer env.close()
	conn, err := env.connect()
	if err != nil {
		return Result{}, err
	}
	var res Result
	for range max(opts.Pushes, 1) {
		if res.Completion, err = env.push(conn, opts.Size); err != nil {
			return Result{}, err
		}
	}
	res.Bytes = opts.Size
	res.IOI, res.RxIOI = env.a.IOIStats(), env.b.IOIStats()
	res.Fabric = env.fab.Stats()
	st := env.a.Transport().Stats()
	res.Retransmits = st.TxRetransmit + st.TxEarlyRetransmit
	return res, nil
}

// env is two txn endpoints joined by a fabric on a virtual clock.
type env struct {
	clk    *clock.Virtual
	pool   *mbuf.Pool
	fab    *fabric.Fabric
	pa, pb port.Port
	a, b   *txn.Endpoint
	region txn.Region
	local  txn.Region
	cq     []txn.Completion
	got    []txn.Completion
	// hook, when set, runs before every poll of run (the path-death
	// scenario's timeline and its observer).
	hook func()
}

func newEnv(pool *mbuf.Pool, prof fabric.Profile, mode cioi.Mode, window int, seed uint64, size int) (*env, error) {
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: "ioi", AtoB: prof, BtoA: prof, Seed: seed, LinkRing: 1 << 14,
		Classify: fabric.TransportClassifier(0)})
	if err != nil {
		return nil, err
	}
	e := &env{clk: clock.NewVirtual(1_000_000), pool: pool, fab: fab, pa: pa, pb: pb, cq: make([]txn.Completion, 64)}
	tr := func(name string, p port.Port, ip netip.Addr, s uint64) rt.Options {
		return rt.Options{Name: name, Port: p, Pool: pool, Clock: e.clk, LocalIP: ip, Seed: s, MaxConns: 4,
			WindowSize: 256, MaxOutstanding: window, MinRTO: minRTO, EarlyRetransmitDistance: earlyRetx}
	}
	cfg := cioi.Config{Mode: mode}
	if e.a, err = txn.New(txn.Options{Transport: tr("a", pa, ipA, seed), IOI: cfg, SolicitThreshold: -1}); err != nil {
		e.close()
		return nil, err
	}
	if e.b, err = txn.New(txn.Options{Transport: tr("b", pb, ipB, seed+1), IOI: cfg}); err != nil {
		e.close()
		return nil, err
	}
	if e.region, err = e.b.Register(make([]byte, size), txn.RemoteWrite|txn.RemoteRead); err != nil {
		e.close()
		return nil, err
	}
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	if e.local, err = e.a.Register(src, 0); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	now := e.clk.Now()
	if e.a != nil {
		e.a.Stop(now)
		_ = e.a.Close()
	}
	if e.b != nil {
		e.b.Stop(now)
		_ = e.b.Close()
	}
	e.fab.Stop(now)
	drain := make([]mbuf.Handle, 64)
	for _, p := range []port.Port{e.pa, e.pb} {
		for n := p.RxBurst(0, drain); n > 0; n = p.RxBurst(0, drain) {
			e.pool.Free(drain[:n])
		}
	}
	_ = e.fab.Close()
}

func (e *env) poll() int {
	now := e.clk.Now()
	w := e.a.Poll(now) + e.fab.Poll(now) + e.b.Poll(now)
	n := e.a.Completions(e.cq)
	e.got = append(e.got, e.cq[:n]...)
	return w
}

// run polls until cond holds, jumping the virtual clock when idle.
func (e *env) run(cond func() bool, limit time.Duration) error {
	end := e.clk.Now().Add(limit)
	for !cond() {
		if e.hook != nil {
			e.hook()
		}
		if e.poll() > 0 {
			continue
		}
		next, ok := e.clk.Now(), false
		for _, f := range []func() (clock.Time, bool){e.a.NextDeadline, e.fab.NextDeadline, e.b.NextDeadline} {
			if t, tok := f(); tok && (!ok || t < next) {
				next, ok = t, true
			}
		}
		if !ok {
			return fmt.Errorf("stalled at %v: nothing left to do", e.clk.Now())
		}
		if next <= e.clk.Now() {
			next = e.clk.Now().Add(time.Microsecond)
		}
		if next > end {
			return fmt.Errorf("not done within %v of virtual time", limit)
		}
		if err := e.clk.Set(next); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) connect() (*txn.Conn, error) {
	c, err := e.a.Open(rt.PeerAddr{MAC: [6]byte(e.pb.Info().MAC), IP: ipB}, txn.ConnOptions{Ordered: true})
	if err != nil {
		return nil, err
	}
	err = e.run(func() bool { return c.Transport() != nil && c.Transport().State() == rt.StateEstablished }, time.Second)
	return c, err
}

func (e *env) push(c *txn.Conn, size int) (time.Duration, error) {
	e.got = e.got[:0]
	if _, err := c.Push(txn.Op{Local: e.local, Len: size, Remote: wire.RegionRef{Key: e.region.Key}}); err != nil {
		return 0, err
	}
	if err := e.run(func() bool { return len(e.got) > 0 }, 10*time.Second); err != nil {
		return 0, err
	}
	cp := e.got[0]
	if cp.Status != txn.StatusOK {
		return 0, fmt.Errorf("push completed with %v", cp.Status)
	}
	return cp.Done.Sub(cp.Posted), nil
}

func fmtSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func fmtRate(r uint64) string { return fmt.Sprintf("%g Gbit/s", float64(r)/1e9) }
