package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/fabric"
)

// runDemoTransport is the demo's default workload: an initiator keeps a
// window of pushes and pulls outstanding on ordered and unordered
// connections to a target through the fabric emulator, and every
// completion is checked (status, order, bytes).
func runDemoTransport(ctx context.Context, cfg demoConfig, cpus []int, idle lcore.IdleMode, out io.Writer, js *jsonRun) (bool, error) {
	prof, err := fabric.ParseProfile(cfg.profile)
	if err != nil {
		return false, fmt.Errorf("--profile: %w", err)
	}
	var (
		topo   *app.VethTopology
		mqVeth *app.MCSQDemoVeth
		ipA    = netip.MustParseAddr("198.18.0.1")
		ipB    = netip.MustParseAddr("198.18.0.6")
		over   = "mem ports"
		clk    = clock.NewReal()
		opts   = app.Options{Pool: mbuf.Options{Name: "demo", Frames: cfg.frames}, Lcores: demoLcores(cpus), Idle: lcore.IdlePolicy{Mode: idle}, Clock: clk}
	)
	if cfg.veth {
		if topo, err = demoTopology(cfg.driver); err != nil {
			return false, err
		}
		defer topo.Delete()
		onKill(ctx, func() { _ = topo.Delete() })
		opts.Ports = topo.Specs()
		opts.Ports[0] = app.WithCapture(opts.Ports[0], cfg.capture)
		// The MCSQ part crosses its own veth pair, gen to sink (demo_mcsq.go).
		if mqVeth, err = mcsqDemoVeth(topo, &opts); err != nil {
			return false, err
		}
	}
	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	p, err := app.New(opts)
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(p)
	defer p.Stop() // on early returns; the checks below report the normal stop
	pool := p.Pool()
	if cfg.veth {
		ipA, ipB = topo.GenAddr.Addr(), topo.SinkAddr.Addr()
		over = cfg.driver + " ports over veth across three namespaces, fabric in the middle one"
	}
	demo, err := p.AddTransportDemo(app.TransportDemoOptions{Profile: prof, Seed: cfg.seed, InitiatorIP: ipA, TargetIP: ipB,
		Window: cfg.window, CongestionTarget: cfg.target, MinRTO: cfg.minRTO, GlobalQPNs: true, Capture: cfg.memCapture()})
	if err != nil {
		return false, err
	}
	initiator, target, load, fab, sizes := demo.Initiator, demo.Target, demo.Load, demo.Fabric, demo.Sizes
	obs.watchTransport("initiator", initiator, load)
	obs.watchTransport("target", target, nil)
	obs.watchConns("initiator", demo.Samplers[0])
	obs.watchConns("target", demo.Samplers[1])
	obs.watchFabric("fabric", fab)
	// In memory, with a pool that holds its endpoints' caches too: client
	// goroutines post through MCSQs to hosts on a switch.
	var mq *app.MCSQDemo
	if cfg.frames >= 8192 {
		if mq, err = p.AddMCSQDemo(app.MCSQDemoOptions{Seed: cfg.seed, Veth: mqVeth}); err != nil {
			return false, err
		}
	}

	fmt.Fprintf(out, "peregrine demo: transport workload (pushes %v B, every 4th a pull; window %d; 4 connections, 2 ordered; Sends by delivery index on a fifth, unordered) over %s, fabric %q, %d lcore(s) %v, for %v\n",
		sizes, cfg.window, over, cfg.profile, len(cpus), cpus, cfg.duration)
	if err := p.Start(); err != nil {
		return false, flagError(err, map[string]string{"Lcores": "--lcores"})
	}
	if mq != nil {
		mq.Start(ctx)
	}
	meter := &loadMeter{load: load}
	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: time.Second, Tick: func(at time.Duration) {
		js.interval(at.Seconds(), demoJSONInterval(load, initiator, target, pool))
		if !cfg.quiet {
			retx := initiator.Transport().Stats().TxRetransmit + target.Transport().Stats().TxRetransmit
			fmt.Fprintln(out, meter.line(at, retx, pool))
		}
	}})
	if err != nil {
		return false, err
	}
	if cfg.drain == 0 {
		cfg.drain = defaultDrain
	}
	drainStart := time.Now()
	drained := drainOrHurry(ctx, func() bool { return demo.Drain(cfg.drain) })
	drainTook := time.Since(drainStart)
	mqDrained := mq == nil || drainOrHurry(ctx, func() bool { return mq.Drain(cfg.drain) })
	runErr := p.StopLoops()
	fs := fab.Stats()
	// Close's leak check is reported by the checks below.
	_ = p.Close()

	ls := load.Stats()
	is, ts := initiator.Stats(), target.Stats()
	ir, tr := initiator.Transport().Stats(), target.Transport().Stats()
	secs := elapsed.Seconds()
	lat := &load.Latency
	fmt.Fprintf(out, "\nsummary after %.2fs:\n", secs)
	fmt.Fprintf(out, "  operations: %d posted, %d completed ok, %d failed: %.0f ops/s, goodput %.3f Gbit/s\n",
		ls.Posted, ls.Completed, ls.Failed, float64(ls.Completed)/secs, float64(ls.Bytes)*8/secs/1e9)
	fmt.Fprintf(out, "  latency post→completion: p50 %v  p99 %v  p999 %v  max %v\n",
		roundDur(lat.Quantile(0.5)), roundDur(lat.Quantile(0.99)), roundDur(lat.Quantile(0.999)), roundDur(lat.Max()))
	fmt.Fprintf(out, "  pushes %d (solicited %d, unsolicited %d), pulls %d; grants issued %d (peak %d B granted); reorder-engine waits %d (initiator) %d (target)\n",
		is.Pushes, is.Solicited, is.Unsolicited, is.Pulls, ts.GrantsIssued, ts.GrantedMax, is.ReorderWaits, ts.ReorderWaits)
	fmt.Fprintf(out, "  retransmissions: %d timeout + %d early (initiator), %d + %d (target); resyncs %d\n",
		ir.TxRetransmit, ir.TxEarlyRetransmit, tr.TxRetransmit, tr.TxEarlyRetransmit, ir.ResyncSent+tr.ResyncSent)
	resends, drops := ir.TxRetransmit+ir.TxEarlyRetransmit+tr.TxRetransmit+tr.TxEarlyRetransmit, app.FabricDrops(fs)
	fmt.Fprintf(out, "  retransmissions per fabric loss: %.2f (%d resends for %d frames dropped); copies the receivers had already %d; duplicate reports %d, resends they showed spurious %d\n",
		float64(resends)/float64(max(drops, 1)), resends, drops, ir.RxDuplicate+tr.RxDuplicate+ir.RxStalePSN+tr.RxStalePSN,
		ir.TxDupReport+tr.TxDupReport, ir.SpuriousDupReport+tr.SpuriousDupReport)
	fmt.Fprintf(out, "  fabric drops: loss %d, burst %d, queue %d, limit %d, ttl expired %d; corrupted %d, duplicated %d, reordered %d\n",
		fs.AtoB.LossRandom+fs.BtoA.LossRandom, fs.AtoB.LossBurst+fs.BtoA.LossBurst, fs.AtoB.QueueFull+fs.BtoA.QueueFull,
		fs.AtoB.LimitFull+fs.BtoA.LimitFull, fs.AtoB.TTLExpired+fs.BtoA.TTLExpired,
		fs.AtoB.Corrupted+fs.BtoA.Corrupted, fs.AtoB.Duplicated+fs.BtoA.Duplicated, fs.AtoB.Reordered+fs.BtoA.Reordered)
	fmt.Fprintf(out, "  transport drops: bad checksum %d, duplicate %d, stale PSN %d, out of window %d, malformed %d, not transport %d, refused %d\n",
		ir.RxBadChecksum+tr.RxBadChecksum, ir.RxDuplicate+tr.RxDuplicate, ir.RxStalePSN+tr.RxStalePSN,
		ir.RxOutOfWindow+tr.RxOutOfWindow, ir.RxMalformed+tr.RxMalformed, ir.RxNotTransport+tr.RxNotTransport, ir.RxRefused+tr.RxRefused)
	for _, l := range demo.IOILines() {
		fmt.Fprintf(out, "  %s\n", l)
	}
	fmt.Fprintf(out, "  %s\n", demo.QPNSummary())
	fmt.Fprintf(out, "  pool: %d frames, %d in use after stop\n", pool.Frames(), pool.InUse())
	sendChecks := sendSummary(out, demo)

	qpnOK, qpnWhat := demo.QPNCheck()
	checks := []check{
		{runErr == nil, "poll loops exited cleanly" + because(runErr)},
		demoDrainCheck(drained, ls, cfg.drain, drainTook),
		{ls.Completed > 0, "operations completed"},
		failureCheck(ls, ""),
		{ls.BadData == 0, fmt.Sprintf("every completed operation's bytes are where they belong (%d wrong; the target checked %d pushes)", ls.BadData, ls.Checked)},
		{ls.OutOfOrder == 0, fmt.Sprintf("ordered connections completed in posting order (%d out of order)", ls.OutOfOrder)},
		{ls.Posted == ls.Completed+ls.Failed, fmt.Sprintf("every operation completed exactly once (%d posted, %d completed)", ls.Posted, ls.Completed+ls.Failed)},
		{ir.Internal == 0 && tr.Internal == 0, "no internal transport errors"},
		{qpnOK, qpnWhat},
		{pool.CheckLeaks() == nil, "pool back to zero in use" + because(pool.CheckLeaks())},
	}
	checks = append(checks, sendChecks...)
	ioiOK, ioiWhat := demo.IOICheck()
	checks = append(checks, check{ioiOK, ioiWhat})
	if mq != nil {
		checks = append(checks, mcsqDemoSummary(out, mq, mqDrained)...)
	}
	js.summary(secs, demoJSONSummary(ls, ir, tr, fs, lat, pool), checks, interrupted)
	return report(out, checks, interrupted), nil
}

// loadMeter turns a load's cumulative counters into per-second rates.
type loadMeter struct {
	load *txnload.Load
	last txnload.Stats
	at   time.Duration
}

func (m *loadMeter) line(at time.Duration, retransmits uint64, pool *mbuf.Pool) string {
	s := m.load.Stats()
	dt := (at - m.at).Seconds()
	line := fmt.Sprintf("[%5.1fs] %8.0f ops/s %7.3f Gbit/s goodput | retransmits %d | pool %d/%d in use",
		at.Seconds(), float64(s.Completed-m.last.Completed)/dt, float64(s.Bytes-m.last.Bytes)*8/dt/1e9,
		retransmits, pool.InUse(), pool.Frames())
	m.last, m.at = s, at
	return line
}

type check struct {
	ok   bool
	what string
}

// drainCheck is the check that the load's operations all ended within the
// drain limit of its stop (demo --drain; transport's app.Transport.Drain).
func drainCheck(drained bool, ls txnload.Stats, within time.Duration) check {
	return check{drained, fmt.Sprintf("every outstanding operation completed within %v of the load stopping (%d still outstanding)", within, ls.Posted-ls.Completed-ls.Failed)}
}

// failureCheck is the check that no operation failed, naming the causes
// of any that did; tooSmallHint follows a count of regions refused as too
// small (what to change).
func failureCheck(ls txnload.Stats, tooSmallHint string) check {
	if ls.Failed == 0 {
		return check{true, "no operation failed (0)"}
	}
	var why []string
	for _, c := range []struct {
		n    uint64
		what string
	}{
		{ls.RefusedUnregistered, "refused: no region under the key (--region-key must be the target's READY key)"},
		{ls.RefusedAccess, "refused: the region does not allow the access"},
		{ls.RefusedTooSmall, "refused: the region is too small for the span" + tooSmallHint},
		{ls.RefusedOther, "refused by the target without a reason"},
		{ls.Abandoned, "a packet ran out of retries"},
		{ls.ConnFailed, "the connection failed or closed"},
		{ls.TimedOut, "timed out (--op-timeout)"},
	} {
		if c.n > 0 {
			why = append(why, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return check{false, fmt.Sprintf("no operation failed (%d: %s)", ls.Failed, strings.Join(why, "; "))}
}

// report prints the checks and the verdict.
func report(out io.Writer, checks []check, interrupted bool) bool {
	ok := true
	for _, c := range checks {
		mark := "ok  "
		if !c.ok {
			mark, ok = "FAIL", false
		}
		fmt.Fprintf(out, "  [%s] %s\n", mark, c.what)
	}
	if interrupted {
		fmt.Fprintln(out, "  (interrupted: stopped early; the checks apply to what ran until then)")
	}
	if ok {
		fmt.Fprintln(out, "verification passed")
	} else {
		fmt.Fprintln(out, "verification FAILED")
	}
	return ok
}
