package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/sched/mcsq"
)

// runTransportMCSQ is `transport initiator --targets N --dc-sqs M`: client
// goroutines post pushes of the first --sizes for N targets (slices of the
// target's region) through one DC MCSQ of M SQs, and every CQE is checked.
func runTransportMCSQ(ctx context.Context, cfg transportConfig, ip netip.Addr, peer rt.PeerAddr, idle lcore.IdleMode, sizes []int, out io.Writer, js *jsonRun) (bool, error) {
	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	pipe, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "transport", Frames: cfg.frames, FrameSize: cfg.frameSize},
		Ports:  []string{cfg.port},
		Lcores: []app.Lcore{{Name: cfg.role, CPU: cfg.lcore}},
		Idle:   lcore.IdlePolicy{Mode: idle},
		Clock:  clock.NewReal(),
	})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames/--frame-size", "Ports": "--port", "Lcores": "--lcores", "Idle": "--idle"})
	}
	defer pipe.Stop()
	obs.watchPipeline(pipe)
	pool := pipe.Pool()
	m, err := pipe.AddMCSQInitiator(app.MCSQInitiatorOptions{LocalIP: ip, Peer: peer, RegionKey: cfg.regionKey, RegionLen: cfg.regionLen,
		Targets: cfg.targets, DCSQs: cfg.dcSQs, Size: sizes[0], Count: cfg.count, MinRTO: cfg.minRTO, Seed: cfg.seed})
	if err != nil {
		return false, flagError(err, map[string]string{"Targets": "--targets", "DCSQs": "--dc-sqs", "Size": "--sizes"})
	}
	obs.watchMCSQ(cfg.role, m, sizes[0])
	if err := pipe.Start(); err != nil {
		return false, flagError(err, map[string]string{"Lcores": "--lcores"})
	}
	m.Start(ctx)
	var done func() bool
	if cfg.count > 0 {
		done = m.Done
	}
	var last app.MCSQInitiatorStats
	var lastAt time.Duration
	elapsed, interrupted, err := pipe.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: time.Second, Done: done, Tick: func(at time.Duration) {
		js.interval(at.Seconds(), mcsqCounters(m))
		if cfg.quiet {
			return
		}
		s := m.Stats()
		ps := m.Pool.Stats()
		fmt.Fprintf(out, "[%5.1fs] %8.0f WRs/s | DC connects %d, disconnects %d | pool %d/%d in use\n",
			at.Seconds(), float64(s.Covered-last.Covered)/(at-lastAt).Seconds(), ps.DCConnects, ps.DCDisconnects, pool.InUse(), pool.Frames())
		last, lastAt = s, at
	}})
	if err != nil {
		return false, err
	}
	drained := drainOrHurry(ctx, func() bool { return m.Drain(5 * time.Second) })
	runErr := pipe.StopLoops()
	_ = pipe.Close()
	s, ps, qs := m.Stats(), m.Pool.Stats(), m.Queue.Stats()
	fmt.Fprintf(out, "\nsummary after %.2fs: %d WRs to %d targets over %d DC SQs: %d ok, %d failed, %.0f WRs/s\n",
		elapsed.Seconds(), s.Posted, cfg.targets, cfg.dcSQs, s.OK, s.Failed, float64(s.OK)/elapsed.Seconds())
	fmt.Fprintf(out, "  SQ binds %d (%d WRs found theirs bound), DC connects %d / disconnects %d, head-of-line waits %d (%.1f ms, %d WRs placed past a waiting head); blacklist adds %d (refused %d, unreachable %d, retries exhausted %d, remote error %d)\n",
		ps.Binds, ps.BoundHits, ps.DCConnects, ps.DCDisconnects, qs.HOLNoSQ+qs.HOLSQFull, float64(qs.HOLWaitNs)/1e6, qs.Overtook, ps.BlacklistAdds,
		ps.Failures[mcsq.CauseRefused], ps.Failures[mcsq.CauseUnreachable], ps.Failures[mcsq.CauseRetryExhausted], ps.Failures[mcsq.CauseRemoteError])
	fmt.Fprintf(out, "  CQEs %d for %d WRs (ordered CQ, %d WRs folded into a later CQE)\n", s.CQEs, s.Covered, qs.Coalesced)
	checks := []check{
		{runErr == nil, "poll loop exited cleanly" + because(runErr)},
		coverCheck("", drained, s.Posted, s.Covered, "the drain waits 5s for them, so check that the target still runs and its port is up"),
		{s.OK > 0 && s.Failed == 0, fmt.Sprintf("WRs completed, none failed (%d failed)", s.Failed)},
		{s.OutOfOrder == 0, fmt.Sprintf("CQEs in posting order (%d out of order)", s.OutOfOrder)},
		{pool.CheckLeaks() == nil, "pool back to zero in use" + because(pool.CheckLeaks())},
	}
	js.summary(elapsed.Seconds(), map[string]any{"counters": mcsqCounters(m), "pool_in_use": pool.InUse(), "targets": cfg.targets, "dc_sqs": cfg.dcSQs}, checks, interrupted)
	return report(out, checks, interrupted), nil
}
