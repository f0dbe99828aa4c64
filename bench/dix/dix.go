// Package dix is the `peregrine bench dix` scenario (issue 14): two-sided
// Sends placed by a delivery index (core/dix) against the baseline
// receiver without one, which must hold every packet that arrives before
// its turn.
//
// Both runs are the deterministic simulator (sim.Cluster: two nodes, the
// emulated switch, fabric links) on the virtual clock, with the same seed
// and the same workload: many concurrent Sends (DefaultWindow outstanding)
// of 4 KiB to 256 KiB from node 0 to node 1 over a 10 Gbit/s link that
// sprays them over four paths of different delays (10, 40, 70, 100 µs, so
// they arrive out of order), into WQEs node 1 keeps posted.
// They differ only in ConnOptions.Index: a 16-bit free-running index, or
// dix.None. A second pair of runs adds 1 % loss each way. Every received
// WQE is checked byte for byte against what its Send sent.
//
// Figures: the peak bytes held outside WQEs (the hold buffer); the 99th
// percentile of the time from a Send's last packet leaving the sender to
// its receive completion — the part of a Send's life the receiver
// decides (the time from posting adds the sender's queueing and the
// interleaving of concurrent Sends, identical for both receivers: it is
// printed beside it, not judged); the bytes copied per byte placed; the relative-index wrap check (WrapCheck, at the core/dix level:
// the full stack simulates about a million packets per second, too slow
// for a million Sends); and the receive cost per packet of a Send against
// a push of the same size (real clock, RxCost).
package dix

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/peregrine-net/peregrine/bench/report"
	"github.com/peregrine-net/peregrine/core/clock"
	coredix "github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/sim"
)

// Options configures a run.
type Options struct {
	Out io.Writer
	// Sends per simulated run (0 → 1500).
	Sends int
	// WrapTxns is how many transactions WrapCheck runs (0 → 1,000,000);
	// FullWrapSends how many 1 KiB Sends the full-stack wrap run makes
	// (0 → 20,000).
	WrapTxns      uint64
	FullWrapSends int
	// RxPackets is how many packets RxCost times per kind (0 → 200,000).
	RxPackets int
	Seed      uint64
}

// SimResult is one simulated run's figures.
type SimResult struct {
	Sends int
	Bytes uint64
	// P50 and P99: from the Send's last packet leaving the sender (its
	// first transmission) to its receive completion: the part of a Send's
	// life the receiver decides. PostP50, PostP99: from posting, which
	// adds the sender's queueing and the interleaving of concurrent Sends
	// (the same for both receivers).
	P50, P99         time.Duration
	PostP50, PostP99 time.Duration
	PeakHeld         uint64 // bytes held outside WQEs at once
	BytesPlaced      uint64
	BytesCopied      uint64
	Stats            txn.SendStats
	VirtualTime      time.Duration
	Retransmits      uint64
	Mismatches       int // WQEs whose bytes differ from their Send's
	CompletionErr    int
}

// CopiesPerByte is BytesCopied / BytesPlaced.
func (r *SimResult) CopiesPerByte() float64 {
	if r.BytesPlaced == 0 {
		return 0
	}
	return float64(r.BytesCopied) / float64(r.BytesPlaced)
}

const (
	maxSend   = 256 << 10
	minSend   = 4 << 10
	recvDepth = 64
	// DefaultWindow is the Sends outstanding on the connection.
	DefaultWindow = 16
)

// Simulate runs the workload once with index cfg over profile: sends
// Sends, window of them outstanding at once.
func Simulate(cfg coredix.Config, profile string, sends, window int, seed uint64) (*SimResult, error) {
	return simulate(cfg, profile, sends, window, minSend, maxSend, seed)
}

// simulate is Simulate with Sends of lo to hi bytes.
func simulate(cfg coredix.Config, profile string, sends, window, lo, hi int, seed uint64) (*SimResult, error) {
	maxSend, minSend := hi, lo
	prof, err := fabric.ParseProfile(profile)
	if err != nil {
		return nil, err
	}
	cfg.Outstanding = window
	var eps [2]*txn.Endpoint
	var connB *txn.Conn
	mk := func(i int) func(n *sim.Node, o rt.Options) (sim.Peer, error) {
		return func(n *sim.Node, o rt.Options) (sim.Peer, error) {
			o.WindowSize, o.MaxOutstanding = 256, 96
			opts := txn.Options{Transport: o, RecvDepth: recvDepth, HoldBytes: 64 << 20, MaxOps: 1024}
			if i == 1 {
				opts.OnConnEvent = func(ev txn.ConnEvent) {
					if ev.Kind == txn.ConnEstablished {
						connB = ev.Conn
					}
				}
			}
			e, err := txn.New(opts)
			eps[i] = e
			return e, err
		}
	}
	c, err := sim.NewCluster(sim.ClusterConfig{Seed: seed, Frames: 32768, Nodes: []sim.NodeConfig{
		{Name: "sender", Up: prof, Down: prof, Make: mk(0)},
		{Name: "receiver", Make: mk(1)},
	}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	a, b := eps[0], eps[1]
	conn, err := a.Open(c.Nodes[1].Addr(), txn.ConnOptions{Index: cfg})
	if err != nil {
		return nil, err
	}
	if err := c.Run(func() bool { return connB != nil }, time.Second); err != nil {
		return nil, fmt.Errorf("connection: %w", err)
	}
	r := rand.New(rand.NewPCG(seed, 0xd1c5))
	src := make([]byte, 2*maxSend)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	dst := make([]byte, recvDepth*maxSend)
	ra, err := a.Register(src, 0)
	if err != nil {
		return nil, err
	}
	rb, err := b.Register(dst, txn.RemoteWrite)
	if err != nil {
		return nil, err
	}
	type sendRec struct {
		off, n int
		posted clock.Time
		lastTx clock.Time // first transmission of its last packet
	}
	recs := make([]sendRec, sends)
	for i := range recs {
		recs[i] = sendRec{off: r.IntN(maxSend), n: minSend + r.IntN(maxSend-minSend+1)}
	}
	res := &SimResult{Sends: sends}
	lat := make([]time.Duration, 0, sends)
	postLat := make([]time.Duration, 0, sends)
	byRSN := make(map[uint32]int, sends)
	var f wire.Frame
	c.OnTransmit = func(node int, raw []byte) {
		if node != 0 || f.Decode(raw) != nil {
			return
		}
		h := &f.Header
		if h.Type != wire.TypeSend || !h.Flags.Has(wire.FlagLastOfMessage) || h.Flags.Has(wire.FlagRetransmission) {
			return
		}
		if i, ok := byRSN[h.RSN]; ok && recs[i].lastTx == 0 {
			recs[i].lastTx = c.Clock.Now()
		}
	}
	var next, postedWQE, doneA, doneB int
	cq := make([]txn.Completion, 64)
	start := c.Clock.Now()
	driver := &stage{poll: func(now clock.Time) int {
		work := 0
		for postedWQE < sends && postedWQE-doneB < recvDepth {
			slot := postedWQE % recvDepth
			if _, err := connB.PostRecv(txn.RecvWR{Local: rb, LocalAddr: uint64(slot * maxSend), Len: maxSend, WRID: uint64(postedWQE)}); err != nil {
				break
			}
			postedWQE++
			work++
		}
		for next < sends {
			s := &recs[next]
			rsn, err := conn.Send(txn.Op{Local: ra, LocalAddr: uint64(s.off), Len: s.n, Tag: uint64(next)})
			if err != nil {
				break
			}
			byRSN[rsn] = next
			s.posted = now
			next++
			work++
		}
		for n := a.Completions(cq); n > 0; n = a.Completions(cq) {
			for _, cp := range cq[:n] {
				if cp.Status != txn.StatusOK {
					res.CompletionErr++
				}
				doneA++
			}
			work += n
		}
		for n := b.Completions(cq); n > 0; n = b.Completions(cq) {
			for _, cp := range cq[:n] {
				doneB++
				i := int(cp.Tag)
				if cp.Status != txn.StatusOK || i >= sends || cp.Bytes != recs[i].n {
					res.CompletionErr++
					continue
				}
				slot := i % recvDepth
				s := &recs[i]
				got := dst[slot*maxSend : slot*maxSend+s.n]
				if string(got) != string(src[s.off:s.off+s.n]) {
					res.Mismatches++
				}
				postLat = append(postLat, cp.Done.Sub(s.posted))
				lat = append(lat, cp.Done.Sub(s.lastTx))
				res.Bytes += uint64(s.n)
			}
			work += n
		}
		return work
	}}
	c.AddStage(driver)
	if err := c.Run(func() bool { return doneA == sends && doneB == sends }, time.Minute); err != nil {
		return nil, fmt.Errorf("%d of %d Sends completed at the sender, %d at the receiver: %w", doneA, sends, doneB, err)
	}
	res.VirtualTime = c.Clock.Now().Sub(start)
	res.P50, res.P99 = quantiles(lat)
	res.PostP50, res.PostP99 = quantiles(postLat)
	st := b.SendStats()
	// Stats publish at the end of each Poll; the last Poll ran.
	res.Stats = st
	res.PeakHeld = st.PeakHeldBytes
	res.BytesPlaced, res.BytesCopied = st.BytesPlaced, st.BytesCopied
	res.Retransmits = a.Transport().Stats().TxRetransmit
	if err := c.Close(); err != nil { // stops everything, checks the pool for leaks
		return nil, fmt.Errorf("closing the simulation: %w", err)
	}
	return res, nil
}

// stage adapts a function to sim's extra stages.
type stage struct{ poll func(clock.Time) int }

func (s *stage) Name() string                     { return "dix-driver" }
func (s *stage) Poll(now clock.Time) int          { return s.poll(now) }
func (s *stage) NextDeadline() (clock.Time, bool) { return 0, false }

// Run measures and prints the report; it returns the pass and fail counts.
func Run(ctx context.Context, opts Options) (pass, fail int, err error) {
	if opts.Sends == 0 {
		opts.Sends = 1500
	}
	if opts.WrapTxns == 0 {
		opts.WrapTxns = 1_000_000
	}
	if opts.FullWrapSends == 0 {
		opts.FullWrapSends = 20_000
	}
	if opts.RxPackets == 0 {
		opts.RxPackets = 200_000
	}
	if opts.Seed == 0 {
		opts.Seed = 14
	}
	rep := report.New(opts.Out)
	fmt.Fprintf(opts.Out, "# bench dix: %s, GOMAXPROCS %d, %d Sends of 4 KiB-256 KiB per run, seed %d\n", runtime.Version(), runtime.GOMAXPROCS(0), opts.Sends, opts.Seed)
	idx := coredix.Config{Kind: coredix.FreeRunning, Width: 16}
	for _, sc := range []struct {
		name, profile string
		loss          float64
	}{
		{"", "rate=10gbit,paths=4,spread=30us,delay=10us", 0},
		{"_loss1pct", "loss=1%,rate=10gbit,paths=4,spread=30us,delay=10us", 1},
	} {
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		d, err := Simulate(idx, sc.profile, opts.Sends, DefaultWindow, opts.Seed)
		if err != nil {
			return 0, 0, fmt.Errorf("dix: index run %q: %w", sc.profile, err)
		}
		bl, err := Simulate(coredix.Config{}, sc.profile, opts.Sends, DefaultWindow, opts.Seed)
		if err != nil {
			return 0, 0, fmt.Errorf("dix: baseline run %q: %w", sc.profile, err)
		}
		for _, r := range []*SimResult{d, bl} {
			if r.Mismatches > 0 || r.CompletionErr > 0 {
				return 0, 0, fmt.Errorf("dix: run %q: %d WQEs with wrong bytes, %d completions in error", sc.profile, r.Mismatches, r.CompletionErr)
			}
		}
		fmt.Fprintf(opts.Out, "# profile %s: index %v, %d Sends (%d MiB) in %v virtual; baseline in %v; retransmits %d / %d\n",
			sc.profile, idx.Kind, d.Sends, d.Bytes>>20, d.VirtualTime, bl.VirtualTime, d.Retransmits, bl.Retransmits)
		for _, r := range []struct { // --report's figures: against loss
			name string
			r    *SimResult
		}{{"index", d}, {"buffered", bl}} {
			fmt.Fprintln(opts.Out, report.Point{Figure: "dix_p99_completion_vs_loss", Series: r.name, X: sc.loss, Y: float64(r.r.P99.Microseconds()), XLabel: "loss_%", YLabel: "p99_completion_us"}.Line())
			fmt.Fprintln(opts.Out, report.Point{Figure: "dix_peak_rx_bytes_vs_loss", Series: r.name, X: sc.loss, Y: float64(r.r.PeakHeld), XLabel: "loss_%", YLabel: "peak_bytes_held_outside_WQEs"}.Line())
		}
		rep.Add(report.Ratio{Name: "dix_vs_buffered_peak_rx_bytes" + sc.name, Value: ratio(float64(d.PeakHeld), float64(bl.PeakHeld)), Op: report.AtMost, Target: 0.10,
			Detail: fmt.Sprintf("peak bytes held outside WQEs: index %d, baseline %d (%d packets held)", d.PeakHeld, bl.PeakHeld, bl.Stats.Held)})
		rep.Add(report.Ratio{Name: "dix_vs_buffered_p99_completion" + sc.name, Value: ratio(float64(d.P99), float64(bl.P99)), Op: report.AtMost, Target: 0.50,
			Detail: fmt.Sprintf("last packet sent -> receive completion: index p50 %v p99 %v; baseline p50 %v p99 %v", d.P50, d.P99, bl.P50, bl.P99)})
		rep.Note("from posting instead (adds the sender's queueing and the interleaving of concurrent Sends, the same for both receivers; not the ratio): index p50 %v p99 %v, baseline p50 %v p99 %v, ratio %.3f",
			d.PostP50, d.PostP99, bl.PostP50, bl.PostP99, ratio(float64(d.PostP99), float64(bl.PostP99)))
		rep.Add(report.Ratio{Name: "dix_copies_per_byte" + sc.name, Value: d.CopiesPerByte(), Op: report.AtMost, Target: 1.0,
			Detail: fmt.Sprintf("index: %d bytes copied for %d placed (%d packets direct, %d through elements, peak elements %d); baseline %.3f copies per byte",
				d.BytesCopied, d.BytesPlaced, d.Stats.PlacedDirect, d.Stats.PlacedElement, d.Stats.PeakElements, bl.CopiesPerByte())})
	}
	// The same index through the whole stack, fewer Sends: 1 KiB each, so
	// the 8-bit numbers and base tags wrap every 256.
	full, err := simulate(coredix.Config{Kind: coredix.Relative, Width: 8}, "loss=1%,rate=10gbit,paths=4,spread=30us,delay=10us", opts.FullWrapSends, 64, 1024, 1024, opts.Seed)
	if err != nil {
		return 0, 0, fmt.Errorf("dix: full-stack wrap run: %w", err)
	}
	if full.Mismatches > 0 || full.CompletionErr > 0 {
		return 0, 0, fmt.Errorf("dix: full-stack wrap run: %d WQEs with wrong bytes, %d completions in error", full.Mismatches, full.CompletionErr)
	}
	wr, err := WrapCheck(coredix.Config{Kind: coredix.Relative, Width: 8}, opts.WrapTxns, opts.Seed)
	if err != nil {
		return 0, 0, fmt.Errorf("dix: wrap check: %w", err)
	}
	rep.Add(report.Ratio{Name: "relative_8bit_wrap_misplaced", Value: float64(wr.Misplaced), Op: report.AtMost, Target: 0,
		Detail: fmt.Sprintf("core/dix level: %d transactions, %d packets (%d overtaken), 8-bit relative index, ACKs late and out of order; %d refused for now", wr.Transactions, wr.Packets, wr.Reordered, wr.Refused)})
	rep.Note("and through the whole stack (simulator, 1%% loss, sprayed): %d Sends of 1 KiB with an 8-bit relative index, each WQE byte-exact with its Send (%d through elements), in %v virtual", full.Sends, full.Stats.BindsElement, full.VirtualTime)
	if ctx.Err() != nil {
		return 0, 0, ctx.Err()
	}
	rc, err := RxCost(opts.RxPackets)
	if err != nil {
		return 0, 0, fmt.Errorf("dix: receive cost: %w", err)
	}
	rep.Add(report.Ratio{Name: "dix_rx_cost_vs_push_rx", Value: ratio(rc.SendNs, rc.PushNs), Op: report.AtMost, Target: 1.20,
		Detail: fmt.Sprintf("real clock, receiver's Poll per data packet: Send with index %.1f ns (%.2f allocs/packet), unsolicited push %.1f ns (%.2f allocs/packet)", rc.SendNs, rc.SendAllocs, rc.PushNs, rc.PushAllocs)})
	// Whole-process mallocs over the timed run (the runtime's own
	// included): a per-packet allocation shows as 1 or more.
	if rc.SendAllocs >= 0.01 {
		rep.Note("FAIL-NOTE: the Send receive path allocated %.2f times per packet", rc.SendAllocs)
	}
	pass, fail = rep.Summary()
	return pass, fail, nil
}

// quantiles returns the median and the 99th percentile of ds (sorted in
// place).
func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 0
		}
		return a
	}
	return a / b
}
