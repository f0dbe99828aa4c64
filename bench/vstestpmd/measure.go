package vstestpmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/bench/anchor"
	"github.com/peregrine-net/peregrine/bench/kgen"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	_ "github.com/peregrine-net/peregrine/pmd/afpacket" // registers afpacket:
	"github.com/peregrine-net/peregrine/pmd/afxdp"      // registers afxdp:
	"github.com/peregrine-net/peregrine/pmd/netns"
)

// poolFrames sizes each measurement's pool as a DPDK mempool is sized: to
// what the ports may hold at once — per AF_XDP port a fill, RX, TX and
// completion ring of 2048 — plus the caches, with room to spare, and no
// more. Frames that pass from one cache to another go through the pool's
// shared FIFO ring, which spreads the kernel's copies over the whole pool:
// measured here, rxonly fell from 4.0 to 3.0 Mpps with 32768 frames.
var poolFrames = map[string]int{
	"rxonly": 8192,
	"txonly": 8192,
	"io":     16384,
}

// driverParams configure peregrine's ports as DPDK 22.11 configures its own
// by default, so that the two differ only in code: net_af_xdp turns on
// preferred busy polling with a budget of 64 (busy_budget; it logs "Busy
// polling budget set to: 64") and net_af_packet bypasses the qdisc
// (qdisc_bypass=1).
var driverParams = map[string]string{
	"afxdp":    "&busy_budget=64",
	"afpacket": "&qdisc_bypass=1",
}

// bench is one run's topology and sink.
type bench struct {
	topo *netns.Topology3
	sink *kgen.Sink
	dur  time.Duration
	// prof records measurement windows when ProfileEnv is set; window
	// names the current measurement's files.
	prof   profiler
	window string
	// params, when it has the driver, replaces driverParams[driver] (A/B
	// experiments of driver settings; the report never sets it).
	params map[string]string
	// ownCaches leaves the ports on their own caches (A/B experiments).
	ownCaches bool
	// shareCPU lets the process's other threads run on the loop's CPU
	// (A/B experiments; lcore.Options.Isolate otherwise).
	shareCPU bool
}

// result is one measurement of one side.
type result struct {
	pps    float64 // packets per second at the comparison's counting point
	detail string  // raw figures
	// Peregrine only: heap allocations (process-wide) while the loop moved
	// windowPkts packets after its warm-up, and the threads the Go runtime
	// created meanwhile (each costs it a few allocations).
	allocs, windowPkts uint64
	newThreads         int
	// genStolen and dutStolen are the shares of the window the pinned
	// generator and device-under-test threads waited for their CPUs while
	// other work ran there (see stealMeter).
	genStolen, dutStolen float64
	// starved: nothing moved in the window (the loop moved packets only
	// after it; see waitMoved).
	starved bool
}

// disturbed reports whether other work took more than maxStolen of either
// pinned thread's CPU, or nothing moved in the window.
func (r result) disturbed() bool { return r.starved || max(r.genStolen, r.dutStolen) > maxStolen }

// starvedBound is how long a loop that moved nothing in its window gets to
// move one packet before the measurement fails: far beyond any scheduling
// delay, so only a loop that does not work fails.
const starvedBound = 10 * time.Second

// waitMoved waits until moved() exceeds from, for at most bound.
func waitMoved(ctx context.Context, moved func() uint64, from uint64, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for moved() == from {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// stealDetail formats the stolen shares for a round's detail.
func (r result) stealDetail() string {
	return fmt.Sprintf("; CPU taken by others: gen %.1f%%, dut %.1f%%", 100*r.genStolen, 100*r.dutStolen)
}

// driverParams returns the parameters peregrine's ports of driver get.
func (b *bench) driverParams(driver string) string {
	if p, ok := b.params[driver]; ok {
		return p
	}
	return driverParams[driver]
}

// startGen floods gen → fwd with size-byte UDP frames addressed to the fwd
// end's MAC and the sink's IP, as a forwarded flow would be.
func (b *bench) startGen(size int) (*kgen.Gen, error) {
	frame, err := kgen.UDPFrame(kgen.FrameOptions{
		Size: size, Dst: b.topo.FwdGenMAC, Src: b.topo.GenMAC,
		SrcIP: b.topo.GenAddr.Addr(), DstIP: b.topo.SinkAddr.Addr(),
	})
	if err != nil {
		return nil, err
	}
	return kgen.Start(b.topo.Gen, b.topo.GenIf, frame, kgen.Options{CPU: genCPU})
}

// genSent is gen's count so far, 0 without a generator.
func genSent(gen *kgen.Gen) uint64 {
	if gen == nil {
		return 0
	}
	return gen.Sent()
}

// needsGen reports whether mode's traffic comes from the generator.
func needsGen(mode string) bool { return mode != "txonly" }

// peregrine measures one side: ports opened through the pmd registry in the
// fwd namespace, core/fwd forwarders (or app/traffic's generator for
// txonly) on one busy-polling loop pinned to dutCPU, assembled by app.
func (b *bench) peregrine(ctx context.Context, c comparison, size int) (res result, err error) {
	var ifnames []string
	switch c.mode {
	case "rxonly":
		ifnames = []string{b.topo.FwdGenIf}
	case "txonly":
		ifnames = []string{b.topo.FwdSinkIf}
	case "io":
		ifnames = []string{b.topo.FwdGenIf, b.topo.FwdSinkIf}
	default:
		return result{}, fmt.Errorf("vstestpmd: unknown mode %q", c.mode)
	}
	var specs []string
	for _, ifname := range ifnames {
		specs = append(specs, fmt.Sprintf("%s:%s?netns=%s", c.driver, ifname, b.topo.Fwd.Name)+b.driverParams(c.driver))
	}
	// The loop's cache: an afxdp port stocks its fill ring from it and
	// frees completed frames to it, so frames cycle through one LIFO
	// cache on the forwarding CPU, as through a DPDK lcore's mempool cache
	// (app wires it into the queue halves each stage declares, unless
	// ownCaches).
	p, err := app.New(app.Options{
		Pool:          mbuf.Options{Name: "vs-testpmd", Frames: poolFrames[c.mode]},
		Ports:         specs,
		Lcores:        []app.Lcore{{Name: "vs-testpmd", CPU: dutCPU}},
		Idle:          lcore.IdlePolicy{Mode: lcore.IdleBusy},
		Isolate:       !b.shareCPU,
		PortOwnCaches: b.ownCaches,
	})
	if err != nil {
		return result{}, err
	}
	// Stops the loop on early returns, then closes the ports and checks
	// the pool for leaks.
	defer func() { err = errors.Join(err, p.Stop()) }()
	pool, loopCache := p.Pool(), p.Cache(0)
	q0 := func(pt port.Port) []app.Queue { return []app.Queue{{Port: pt, Queue: 0}} }

	var moved func() uint64 // packets the loop handled: the allocation denominator
	var ownCount func() string
	switch c.mode {
	case "rxonly":
		in := p.Port(0)
		f, err := fwd.New(fwd.Options{Mode: fwd.ModeRxOnly, In: in, Pool: pool, Cache: loopCache})
		if err != nil {
			return result{}, err
		}
		if err := p.Add(app.Stage{Stage: f, Rx: q0(in)}); err != nil {
			return result{}, err
		}
		moved = func() uint64 { return f.Stats().Rx }
		ownCount = func() string {
			st := in.Stats()
			return fmt.Sprintf("port rx %d, kernel dropped %d (fill ring empty %d)%s", st.RxPackets, st.RxDropped, st.RxNoBuf, xskDetail(in))
		}
	case "txonly":
		out := p.Port(0)
		g, err := traffic.NewGenerator(traffic.GeneratorOptions{
			Port: out, Pool: pool, Sizes: traffic.FixedSize(size), Cache: loopCache,
			SrcMAC: b.topo.FwdSinkMAC, DstMAC: b.topo.SinkMAC,
		})
		if err != nil {
			return result{}, err
		}
		if err := p.Add(app.Stage{Stage: g, Tx: q0(out)}); err != nil {
			return result{}, err
		}
		moved = func() uint64 { return g.Stats().Sent }
		ownCount = func() string { return fmt.Sprintf("port tx %d", out.Stats().TxPackets) }
	case "io":
		in, out := p.Port(0), p.Port(1)
		// Both streams, as testpmd's io mode polls port 0 → 1 and 1 → 0.
		there, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: in, Out: out, Pool: pool, Cache: loopCache})
		if err != nil {
			return result{}, err
		}
		back, err := fwd.New(fwd.Options{Mode: fwd.ModeIO, In: out, Out: in, Pool: pool, Cache: loopCache})
		if err != nil {
			return result{}, err
		}
		if err := p.Add(app.Stage{Stage: there, Rx: q0(in), Tx: q0(out)}); err != nil {
			return result{}, err
		}
		// The loop's cache serves the measured stream's halves only (gen
		// → in, out → sink); the back stream, which carries nothing here,
		// leaves its halves on the ports' own caches, as when the figures
		// in bench/RESULTS.md were taken.
		if err := p.Add(app.Stage{Stage: back}); err != nil {
			return result{}, err
		}
		moved = func() uint64 { return there.Stats().Rx + back.Stats().Rx }
		ownCount = func() string {
			st := there.Stats()
			return fmt.Sprintf("forwarded rx %d tx %d refused %d, kernel dropped at rx %d%s", st.Rx, st.Tx, st.Dropped, in.Stats().RxDropped, xskDetail(in))
		}
	}

	var gen *kgen.Gen
	if needsGen(c.mode) {
		if gen, err = b.startGen(size); err != nil {
			return result{}, err
		}
		defer func() {
			if _, gerr := gen.Stop(); gerr != nil {
				err = errors.Join(err, gerr)
			}
		}()
	}
	sink0, err := b.sink.Count()
	if err != nil {
		return result{}, err
	}
	var ms0, ms1 runtime.MemStats
	offered0 := genSent(gen)
	prof, perr := b.prof.start(b.window, true)
	if perr != nil {
		return result{}, perr
	}
	defer func() { err = errors.Join(err, prof.stop()) }() // on early returns
	started := time.Now()
	if err := p.Start(); err != nil {
		return result{}, err
	}
	// Allocations are counted inside the forwarding window only, after a
	// warm-up: starting and stopping the loop allocate, and so does the Go
	// runtime while it creates the threads it needs once the loop and the
	// generator hold theirs. Forwarding must not. The window is slept
	// through rather than waited on with a timer and select, whose sudog
	// and timer this goroutine would allocate inside it; the warm-up's
	// sleeps allocate this goroutine's sleep timer once.
	if err := sleepUntil(ctx, started.Add(b.dur/4)); err != nil {
		return result{}, err
	}
	th0 := threads()
	steal := startSteal(os.Getpid())
	runtime.ReadMemStats(&ms0)
	moved0 := moved()
	if err := sleepUntil(ctx, started.Add(b.dur)); err != nil {
		return result{}, err
	}
	moved1 := moved()
	runtime.ReadMemStats(&ms1)
	res.genStolen, res.dutStolen = steal.stop()
	res.newThreads = max(threads()-th0, 0)
	if moved1 == moved0 {
		// Nothing moved in the window: on a loaded machine the pinned
		// generator and loop can both be kept off their CPUs that long
		// (the kernel then drops on the fill ring it could not have
		// refilled). Whether the loop works is a question of an event, not
		// of a rate: wait, generously, for it to move one packet; the
		// round is then disturbed, not failed.
		if err := waitMoved(ctx, moved, moved0, starvedBound); err != nil {
			return result{}, fmt.Errorf("vstestpmd: peregrine's loop moved no packets in %v and %v more (%s; loop %+v; generated %d): %w",
				b.dur, starvedBound, ownCount(), p.LoopStats(), genSent(gen)-offered0, err)
		}
		res.starved = true
	}
	p.Halt()
	elapsed := time.Since(started)
	if perr := prof.stop(); perr != nil {
		return result{}, perr
	}
	prof = nil
	offered := genSent(gen) - offered0
	err = p.StopLoops()
	polls := p.LoopStats()
	if err != nil {
		return result{}, err
	}
	sink1, err := b.sink.Count()
	if err != nil {
		return result{}, err
	}

	var counted uint64
	if c.mode == "rxonly" {
		counted = moved()
	} else {
		counted = sink1 - sink0
	}
	res.pps = float64(counted) / elapsed.Seconds()
	res.allocs, res.windowPkts = ms1.Mallocs-ms0.Mallocs, moved1-moved0
	res.detail = fmt.Sprintf("%d pkts in %.3fs; %s; loop polls %d (idle %d); %d allocs over %d pkts",
		counted, elapsed.Seconds(), ownCount(), polls.Polls, polls.IdlePolls, res.allocs, res.windowPkts)
	if gen != nil {
		res.detail += fmt.Sprintf("; generated %d", offered)
	}
	res.detail += res.stealDetail()
	if res.starved {
		res.detail += fmt.Sprintf("; nothing moved in the %v window (loop or generator starved of CPU)", b.dur)
	}
	if c.mode != "rxonly" {
		res.detail = fmt.Sprintf("sink %s", res.detail)
	}
	return res, nil
}

// testpmd measures the other side: dpdk-testpmd in the fwd namespace with
// net_af_xdp or net_af_packet vdevs on the same interfaces, -l 0,1.
func (b *bench) testpmd(ctx context.Context, c comparison, size int) (res result, err error) {
	vdev := func(i int, ifname string) string {
		if c.driver == "afxdp" {
			return fmt.Sprintf("net_af_xdp%d,iface=%s,start_queue=0,queue_count=1", i, ifname)
		}
		return fmt.Sprintf("net_af_packet%d,iface=%s", i, ifname)
	}
	opts := anchor.TestpmdOptions{Netns: b.topo.Fwd.Name, ForwardMode: c.mode, Lcores: fmt.Sprintf("%d,%d", genCPU, dutCPU), Duration: b.dur}
	var used []string
	switch c.mode {
	case "rxonly":
		used = []string{b.topo.FwdGenIf}
	case "txonly":
		used = []string{b.topo.FwdSinkIf}
		opts.TxPktLen = size
	case "io":
		used = []string{b.topo.FwdGenIf, b.topo.FwdSinkIf}
	}
	for i, ifname := range used {
		opts.Vdevs = append(opts.Vdevs, vdev(i, ifname))
	}
	var gen *kgen.Gen
	var sink0, sink1, offered0, offered1 uint64
	var sinkErr error
	var prof *window
	var steal *stealMeter
	opts.BeforeStart = func() {
		var e error
		prof, e = b.prof.start(b.window, false)
		sinkErr = errors.Join(sinkErr, e)
		steal = startSteal(append(testpmdPids(), os.Getpid())...)
		sink0, e = b.sink.Count()
		sinkErr = errors.Join(sinkErr, e)
		offered0 = genSent(gen)
	}
	opts.AfterStop = func() {
		res.genStolen, res.dutStolen = steal.stop()
		sinkErr = errors.Join(sinkErr, prof.stop())
		offered1 = genSent(gen)
		var e error
		sink1, e = b.sink.Count()
		sinkErr = errors.Join(sinkErr, e)
	}
	defer func() {
		// A testpmd that was killed leaves its XDP program on the
		// interface (libxdp attaches through netlink, not a BPF link),
		// which would block the next AF_XDP port. These interfaces are
		// ours: remove what is left.
		for _, ifname := range used {
			_, cerr := b.topo.Fwd.ClearXDP(ifname)
			err = errors.Join(err, cerr)
		}
	}()

	if needsGen(c.mode) {
		if gen, err = b.startGen(size); err != nil {
			return result{}, err
		}
		defer func() {
			if _, gerr := gen.Stop(); gerr != nil {
				err = errors.Join(err, gerr)
			}
		}()
	}
	tp, err := anchor.Testpmd(ctx, opts)
	if err != nil {
		return result{}, err
	}
	if sinkErr != nil {
		return result{}, sinkErr
	}
	counted := sink1 - sink0
	if c.mode == "rxonly" {
		counted = tp.RxPackets
	}
	res.pps = float64(counted) / tp.Elapsed.Seconds()
	res.detail = fmt.Sprintf("%d pkts in %.3fs; RX-packets %d RX-dropped %d TX-packets %d TX-dropped %d",
		counted, tp.Elapsed.Seconds(), tp.RxPackets, tp.RxDropped, tp.TxPackets, tp.TxDropped)
	if gen != nil {
		res.detail += fmt.Sprintf("; generated %d", offered1-offered0)
	}
	res.detail += res.stealDetail()
	if c.mode != "rxonly" {
		res.detail = "sink " + res.detail
	}
	if counted == 0 {
		// testpmd's window cannot be extended as peregrine's is: when other
		// work took its CPUs, the round is disturbed; otherwise testpmd is
		// broken.
		if !res.disturbed() {
			return result{}, fmt.Errorf("vstestpmd: testpmd moved no packets (%s)\n%s", res.detail, tp.Output)
		}
		res.starved = true
		res.detail += fmt.Sprintf("; nothing moved in the %v window (testpmd or the generator starved of CPU)", b.dur)
	}
	return res, nil
}

// xskDetail spells out an afxdp port's socket counters, or "" for other
// ports: why the kernel dropped frames tells a slow consumer (RX ring full)
// from a starved fill ring.
func xskDetail(p port.Port) string {
	ks, ok := p.(interface{ KernelStats() []afxdp.KernelStats })
	if !ok {
		return ""
	}
	var k afxdp.KernelStats
	for _, q := range ks.KernelStats() {
		k.RxDropped += q.RxDropped
		k.RxRingFull += q.RxRingFull
		k.RxFillRingEmptyDescs += q.RxFillRingEmptyDescs
	}
	return fmt.Sprintf(" (xsk: rx_dropped %d rx_ring_full %d fill_ring_empty %d)", k.RxDropped, k.RxRingFull, k.RxFillRingEmptyDescs)
}

// threads counts the process's threads (not allocation-free: call it
// outside the allocation window).
func threads() int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	return len(tasks)
}

// sleepUntil sleeps in short steps until deadline, returning early with
// ctx's error when it ends. A measurement window, not a synchronisation: it
// allocates nothing once the goroutine has slept before.
func sleepUntil(ctx context.Context, deadline time.Time) error {
	const step = 20 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		time.Sleep(min(left, step))
	}
}
