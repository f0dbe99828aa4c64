// Package integrity is the `peregrine bench integrity` scenario: how close
// the transport's retransmissions stay to the losses, and whether
// operations survive loss with everything in order, in the deterministic
// simulation (fabric emulator, mem ports, virtual clock), so every figure
// is exact and repeats with the seed.
//
// The traffic is the demo's (app.TransportDemo): its fabric profile
// (app.DemoProfile: four 1 Gbit/s paths of their own delays, 0.5 % loss,
// 1 % reordering), its mix of pushes and pulls (app.DemoSizes, every
// fourth a pull, IOI on, four connections of which two ordered, a window
// of 32 operations) and its two-sided Sends on a fifth connection, its
// transports' settings (Swift with the demo's floor and target, a
// shortest timeout of 1 ms, 20 retries), for Duration of virtual time,
// then drained. Each figure counts both endpoints:
//
//   - retransmits_per_loss: every resend (timeout and early) per frame the
//     fabric dropped (app.FabricDrops);
//   - spurious_resends_per_loss: copies that reached a receiver which had
//     the packet already (duplicates and stale PSNs; the profile
//     duplicates nothing, so each is a resend that was not needed) per
//     frame dropped;
//   - goodput_vs_before: goodput over a run of the same traffic and seed
//     with the transport's early retransmission as it was before
//     duplicate reports (rt.Options.NoDupReports). Everything else (path
//     health, timeouts, congestion control) is the same code in both
//     runs, so the ratio is what duplicate reports do to goodput, not a
//     comparison with an older build: a change elsewhere moves both;
//   - inorder_2pct_loss_ops_abandoned: operations that did not complete OK
//     with every data packet in order (ioi.ModeInOrder), 128 packets
//     outstanding per connection (a fixed window the size of the
//     transport's, no congestion control, the default retry limit) and
//     2 % loss.
package integrity

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
)

// Defaults of the scenario.
const (
	DefaultDuration = 500 * time.Millisecond // virtual time of posting
	DefaultSeed     = 1
	DefaultWindow   = 32 // the demo's --window
)

// Options configures a run.
type Options struct {
	Out io.Writer
	// Duration is the virtual time the load posts (0: DefaultDuration);
	// Seed seeds the fabric and the endpoints (0: DefaultSeed).
	Duration time.Duration
	Seed     uint64
}

func (o *Options) defaults() {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
}

// Run measures and prints the report; it returns the pass and fail counts.
func Run(ctx context.Context, opts Options) (pass, fail int, err error) {
	opts.defaults()
	rep := report.New(opts.Out)
	prof, err := fabric.ParseProfile(app.DemoProfile)
	if err != nil {
		return 0, 0, err
	}
	rep.Note("the demo's traffic over %q, seed %d, %v of virtual time then drained", app.DemoProfile, opts.Seed, opts.Duration)
	now, err := Simulate(ctx, SimOptions{Profile: prof, Seed: opts.Seed, Duration: opts.Duration})
	if err != nil {
		return 0, 0, fmt.Errorf("bench integrity: %w", err)
	}
	before, err := Simulate(ctx, SimOptions{Profile: prof, Seed: opts.Seed, Duration: opts.Duration, NoDupReports: true})
	if err != nil {
		return 0, 0, fmt.Errorf("bench integrity: before: %w", err)
	}
	for _, r := range []struct {
		name string
		res  Result
	}{{"now", now}, {"before", before}} {
		rep.Note("%-6s %s", r.name, r.res)
	}
	rep.Add(report.Ratio{Name: "retransmits_per_loss", Value: now.PerLoss(now.Retransmits()), Op: report.AtMost, Target: 1.2,
		Detail: fmt.Sprintf("%d resends (%d timeout, %d early) for %d fabric drops; before duplicate reports %.3f (%d resends)",
			now.Retransmits(), now.Timeout, now.Early, now.Drops, before.PerLoss(before.Retransmits()), before.Retransmits())})
	rep.Add(report.Ratio{Name: "spurious_resends_per_loss", Value: now.PerLoss(now.Spurious), Op: report.AtMost, Target: 0.2,
		Detail: fmt.Sprintf("%d copies arrived already had; before %.3f (%d); duplicate reports sent %d, resends they showed spurious %d",
			now.Spurious, before.PerLoss(before.Spurious), before.Spurious, now.DupReports, now.SpuriousReported)})
	rep.Add(report.Ratio{Name: "goodput_vs_before", Value: now.Goodput() / before.Goodput(), Op: report.AtLeast, Target: 1.0,
		Detail: fmt.Sprintf("%.3f vs %.3f Gbit/s", now.Goodput()*8/1e9, before.Goodput()*8/1e9)})
	lossy := prof
	lossy.Loss = 2
	inorder, err := Simulate(ctx, SimOptions{Profile: lossy, Seed: opts.Seed, Duration: opts.Duration, Mode: ioi.ModeInOrder, Window: 128})
	if err != nil {
		return 0, 0, fmt.Errorf("bench integrity: in order: %w", err)
	}
	rep.Note("inorder %s", inorder)
	rep.Add(report.Ratio{Name: "inorder_2pct_loss_ops_abandoned", Value: float64(inorder.NotOK), Op: report.AtMost, Target: 0,
		Detail: fmt.Sprintf("every data packet in order, 128 packets outstanding (fixed window), 2%% loss: %d operations and Sends completed, %d not OK",
			inorder.Completed, inorder.NotOK)})
	p, f := rep.Summary()
	return p, f, nil
}

// SimOptions configures Simulate.
type SimOptions struct {
	Profile  fabric.Profile // each direction
	Seed     uint64
	Duration time.Duration // of posting, then drained
	// Mode is the endpoints' IOI mode (0, ModeOff, is taken as the demo's
	// ModeIOI).
	Mode ioi.Mode
	// Window, when set, is the transports' WindowSize and the packets they
	// keep outstanding (a fixed window, MaxOutstanding, instead of Swift),
	// with the transport's default RetryLimit rather than the demo's 20.
	Window int
	// NoDupReports runs the transports as before duplicate reports.
	NoDupReports bool
}

// Result is one simulated run.
type Result struct {
	Elapsed          time.Duration // virtual, posting and drain
	Posting          time.Duration // virtual, while the load posted
	PostingBytes     uint64        // of operations and Sends completed OK by then
	Bytes            uint64        // of operations and Sends completed OK
	Completed, NotOK uint64        // operations and Sends
	Timeout, Early   uint64        // resends, both endpoints
	Drops            uint64        // frames the fabric dropped, both ways
	Spurious         uint64        // copies a receiver had already
	DupReports       uint64        // duplicate reports sent
	SpuriousReported uint64        // resends reports showed spurious
	SpuriousEarly    uint64        // early resends found spurious by timing
	// OrderedMoves and AckMoves: times the endpoints moved a connection's
	// ordered path or the path of its ACKs (rt.PathStats).
	OrderedMoves, AckMoves uint64
}

// Retransmits is every resend.
func (r Result) Retransmits() uint64 { return r.Timeout + r.Early }

// PerLoss is n per frame dropped.
func (r Result) PerLoss(n uint64) float64 { return float64(n) / float64(max(r.Drops, 1)) }

// Goodput is the bytes completed OK per second while the load posted (the
// drain's tail, a few large messages finishing, would only add noise).
func (r Result) Goodput() float64 { return float64(r.PostingBytes) / r.Posting.Seconds() }

func (r Result) String() string {
	return fmt.Sprintf("%d completed (%d not OK) in %v: %.3f Gbit/s; resends %d timeout + %d early for %d drops (%.3f per drop); %d arrived already had; dup reports %d, spurious %d by reports + %d by timing; path moves %d ordered, %d ACK",
		r.Completed, r.NotOK, r.Elapsed, r.Goodput()*8/1e9, r.Timeout, r.Early, r.Drops, r.PerLoss(r.Retransmits()), r.Spurious,
		r.DupReports, r.SpuriousReported, r.SpuriousEarly, r.OrderedMoves, r.AckMoves)
}

var (
	ipA = netip.MustParseAddr("198.18.0.1")
	ipB = netip.MustParseAddr("198.18.0.6")
)

// Simulate runs the demo's traffic on the virtual clock.
func Simulate(ctx context.Context, o SimOptions) (Result, error) {
	pool, err := mbuf.New(mbuf.Options{Name: "bench-integrity", Frames: 16384, CacheSize: 128})
	if err != nil {
		return Result{}, err
	}
	defer pool.Close()
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: "integrity", AtoB: o.Profile, BtoA: o.Profile, Seed: o.Seed, LinkRing: 1 << 14,
		Classify: fabric.TransportClassifier(0)})
	if err != nil {
		return Result{}, err
	}
	s := &sim{clk: clock.NewVirtual(1_000_000), pool: pool, fab: fab, ports: [2]port.Port{pa, pb}}
	defer s.close()
	if err := s.build(o); err != nil {
		return Result{}, err
	}
	start := s.clk.Now()
	end := start.Add(o.Duration)
	if err := s.run(ctx, func() bool { return s.clk.Now() >= end }, end); err != nil {
		return Result{}, err
	}
	posted := s.load.Stats().Bytes + s.sends.Stats().Bytes
	s.load.Stop()
	s.sends.Stop()
	drained := func() bool {
		ls := s.load.Stats()
		return ls.Posted == ls.Completed+ls.Failed && s.sends.Idle()
	}
	if err := s.run(ctx, drained, s.clk.Now().Add(time.Minute)); err != nil {
		return Result{}, fmt.Errorf("drain: %w", err)
	}
	var r Result
	r.Elapsed = s.clk.Now().Sub(start)
	r.Posting, r.PostingBytes = o.Duration, posted
	ls, ss := s.load.Stats(), s.sends.Stats()
	r.Bytes = ls.Bytes + ss.Bytes
	r.Completed = ls.Completed + ss.Completed
	r.NotOK = ls.Failed + ls.BadData + ls.OutOfOrder + ss.Failed + ss.RecvFailed + ss.BadData
	for _, e := range []*txn.Endpoint{s.a, s.b} {
		st := e.Transport().Stats()
		r.Timeout += st.TxRetransmit
		r.Early += st.TxEarlyRetransmit
		r.Spurious += st.RxDuplicate + st.RxStalePSN
		r.DupReports += st.TxDupReport
		r.SpuriousReported += st.SpuriousDupReport
		r.SpuriousEarly += st.SpuriousEarlyRetransmit
		ps := e.Transport().PathStats()
		r.OrderedMoves += ps.OrderedMoves
		r.AckMoves += ps.AckMoves
	}
	r.Drops = app.FabricDrops(fab.Stats())
	return r, nil
}

// sim is the demo's two endpoints, its loads and the fabric on one clock.
type sim struct {
	clk    *clock.Virtual
	pool   *mbuf.Pool
	fab    *fabric.Fabric
	ports  [2]port.Port
	a, b   *txn.Endpoint
	load   *txnload.Load
	sends  *txnload.SendLoad
	stages []interface{ Poll(clock.Time) int }
}

func (s *sim) build(o SimOptions) error {
	sp := swift.DefaultParams()
	sp.BaseTarget = 200 * time.Microsecond // the demo's --target-delay
	sp.MinCwnd = app.DemoMinCwnd
	cfg := ioi.Config{Mode: ioi.ModeIOI}
	if o.Mode != ioi.ModeOff {
		cfg.Mode = o.Mode
	}
	mk := func(name string, pt port.Port, ip netip.Addr, seed uint64, onReq func(*txn.Request), onConn func(txn.ConnEvent)) (*txn.Endpoint, error) {
		tr := rt.Options{Name: name, Port: pt, Pool: s.pool, Clock: s.clk, LocalIP: ip, LocalMAC: [6]byte(pt.Info().MAC), Seed: seed, MaxConns: 16,
			MinRTO: time.Millisecond, RetryLimit: 20, NoDupReports: o.NoDupReports}
		if o.Window > 0 {
			tr.WindowSize, tr.MaxOutstanding = o.Window, o.Window
			tr.RetryLimit = 0 // the transport's default
		}
		to := txn.Options{OnRequest: onReq, OnConnEvent: onConn, Transport: tr, Congestion: &sp, IOI: cfg}
		if o.Window > 0 {
			to.Congestion = nil // the transport's fixed window of Window packets
		}
		return txn.New(to)
	}
	var err error
	if s.a, err = mk("initiator", s.ports[0], ipA, o.Seed, nil, nil); err != nil {
		return err
	}
	if s.b, err = mk("target", s.ports[1], ipB, o.Seed+1, func(r *txn.Request) { s.load.CheckRequest(r) },
		func(ev txn.ConnEvent) { s.sends.Recv.OnConnEvent(ev) }); err != nil {
		return err
	}
	peer := rt.PeerAddr{MAC: [6]byte(s.ports[1].Info().MAC), IP: ipB}
	if s.load, err = txnload.New(txnload.Options{Initiator: s.a, Target: s.b, Conns: 4, Window: DefaultWindow, Sizes: app.DemoSizes, Peer: peer},
		txnload.TargetMemory(DefaultWindow, app.DemoSizes)); err != nil {
		return err
	}
	if s.sends, err = txnload.NewSends(txnload.SendOptions{Initiator: s.a, Target: s.b, Peer: peer, Window: max(2, DefaultWindow/4)}); err != nil {
		return err
	}
	s.load.Sends = s.sends
	s.stages = []interface{ Poll(clock.Time) int }{s.load, s.sends, s.a, s.fab, s.sends.Recv, s.b}
	return nil
}

// run polls every stage until done holds, moving the virtual clock to
// the earliest deadline when nothing moves; it fails past limit.
func (s *sim) run(ctx context.Context, done func() bool, limit clock.Time) error {
	for n := 0; !done(); n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		now := s.clk.Now()
		work := 0
		for _, st := range s.stages {
			work += st.Poll(now)
		}
		if work > 0 {
			continue
		}
		next, ok := limit, false
		for _, f := range []func() (clock.Time, bool){s.a.NextDeadline, s.fab.NextDeadline, s.b.NextDeadline} {
			if t, tok := f(); tok && t < next {
				next, ok = t, true
			}
		}
		if !ok {
			next = limit
		}
		if next <= now {
			next = now.Add(time.Microsecond)
		}
		if next > limit {
			if now >= limit {
				return fmt.Errorf("not done at %v of virtual time", limit)
			}
			next = limit
		}
		if err := s.clk.Set(next); err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) close() {
	now := s.clk.Now()
	for _, e := range []*txn.Endpoint{s.a, s.b} {
		if e != nil {
			e.Stop(now)
			_ = e.Close()
		}
	}
	s.fab.Stop(now)
	drain := make([]mbuf.Handle, 64)
	for _, p := range s.ports {
		for n := p.RxBurst(0, drain); n > 0; n = p.RxBurst(0, drain) {
			s.pool.Free(drain[:n])
		}
	}
	_ = s.fab.Close()
}
