package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// runDemoRoCE is the demo's roce workload: the RoCEv2 QP-translation stage
// between simulated requesters and a host over mem ports, on one lcore,
// with QPs closed and reopened as it runs and the closed QPs' last frames
// arriving late.
func runDemoRoCE(ctx context.Context, cfg demoConfig, cpus []int, idle lcore.IdleMode, out io.Writer) (bool, error) {
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: "demo", Frames: cfg.frames}, Lcores: demoLcores(cpus[:1]), Idle: lcore.IdlePolicy{Mode: idle}})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames", "Lcores": "--lcores", "Idle": "--idle"})
	}
	defer p.Stop() // on early returns; the checks below report the normal stop
	d, err := p.AddRoCEDemo(app.RoCEDemoOptions{Burst: cfg.burst})
	if err != nil {
		return false, flagError(err, map[string]string{"Burst": "--burst"})
	}
	fmt.Fprintf(out, "peregrine demo: RoCEv2 QP translation: requesters send RDMA SENDs by global QPN -> stage (ICRC, CAM, PSN) -> host by local QP number, ACKs back; %d local contexts, a QP closed and reopened every 512 frames; lcore %d, for %v\n",
		d.Stage.Stats().QPX.Slots, cpus[0], cfg.duration)
	if err := p.Start(); err != nil {
		return false, flagError(err, map[string]string{"Lcores": "--lcores"})
	}
	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: time.Second, Tick: func(at time.Duration) {
		if !cfg.quiet {
			s := d.Stage.Stats()
			fmt.Fprintf(out, "%6.1fs to-host %d fwd, %d retired-QPN drops; QPs opened %d\n", at.Seconds(), s.ToHost.Forwarded, s.ToHost.DropRetired, s.QPX.Opened)
		}
	}})
	if err != nil {
		return false, err
	}
	runErr := p.StopLoops()
	_ = p.Close()
	s, ns, hs := d.Stage.Stats(), d.Net.Stats(), d.Host.Stats()
	secs := elapsed.Seconds()
	fmt.Fprintf(out, "\nsummary after %.2fs:\n", secs)
	fmt.Fprintf(out, "  network: %d requests sent (%d of them after their QP closed), %d QP churns, %d ACKs back (%d bad)\n", ns.Sent, ns.StaleSent, ns.Churns, ns.Acks, ns.AcksBad)
	fmt.Fprintf(out, "  stage to host:    %v\n  stage to network: %v\n  qpx: %v\n", s.ToHost, s.ToNet, s.QPX)
	fmt.Fprintf(out, "  host: %d requests, %d in the wrong context; %.2f Mpps through the stage each way\n", hs.Got, hs.Wrong, float64(s.ToHost.Forwarded)/secs/1e6)
	fmt.Fprintf(out, "  pool: %d frames, %d in use after stop\n", p.Pool().Frames(), p.Pool().InUse())
	checks := []check{
		{runErr == nil, "poll loop exited cleanly" + because(runErr)},
		{s.ToHost.Forwarded > 0 && ns.Churns > 0, fmt.Sprintf("requests crossed the stage (%d) while QPs were closed and reopened (%d)", s.ToHost.Forwarded, ns.Churns)},
		{hs.Wrong == 0, fmt.Sprintf("no request reached a context that another QP holds (%d did)", hs.Wrong)},
		{s.ToHost.DropRetired == ns.StaleSent, fmt.Sprintf("every frame for a closed QP was dropped as retired (%d sent, %d dropped)", ns.StaleSent, s.ToHost.DropRetired)},
		{s.ToHost.DropICRC+s.ToHost.DropMalformed+s.ToNet.Dropped() == 0 && ns.AcksBad == 0, "every ICRC checked and every ACK came back with a global QPN"},
		{s.ToHost.OutOfSequence+s.ToHost.Duplicate == 0, fmt.Sprintf("every PSN in sequence (%d out, %d duplicate)", s.ToHost.OutOfSequence, s.ToHost.Duplicate)},
		{p.Pool().CheckLeaks() == nil, "pool back to zero in use" + because(p.Pool().CheckLeaks())},
	}
	return report(out, checks, interrupted), nil
}
