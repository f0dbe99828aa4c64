package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"time"

	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/internal/units"
)

// demoShardSizes are the sharded demo's push, pull and Send sizes: 4 KiB
// unsolicited and 64 KiB solicited through the target's grants (the
// Sends' own default), without the 256 KiB and 1 MiB messages that are
// there to show IOI.
var demoShardSizes = []int{4 << 10, 64 << 10}

// demoShardFlagsRefused are the flags demo --shards N (N > 1) refuses, and
// why: the mechanisms they drive cannot run sharded.
var demoShardFlagsRefused = map[string]string{
	"profile": "the fabric emulator (and IOI, which sprays over its paths) joins one queue of each side; sharded, the endpoints meet over a mem: pair of N queues",
	"veth":    "the veth topology puts the fabric between single-queue ports (peregrine transport --shards runs sharded over AF_XDP veth)",
	"capture": "the capture mirrors one queue of one port",
}

// runDemoSharded is the transport demo with --shards N: both endpoints
// sharded (app.AddShardedTransport) over a mem: pair of N queues whose
// frames stay on the queue they were sent on (steer=queue), so initiator
// shard i pairs with target shard i; shard i of both endpoints runs on
// lcore i mod len(--lcores). Pushes, pulls, ordered and unordered
// connections and delivery-index Sends run on every shard; the fabric,
// IOI, the MCSQ part and global QPNs do not (demoShardFlagsRefused).
func runDemoSharded(ctx context.Context, cfg demoConfig, cpus []int, idle lcore.IdleMode, out io.Writer, js *jsonRun) (bool, error) {
	n := cfg.shards
	name := fmt.Sprintf("demoshard%d", n)
	specs := []string{fmt.Sprintf("mem:%s/0?queues=%d&steer=queue", name, n), fmt.Sprintf("mem:%s/1?queues=%d&steer=queue", name, n)}
	obs, err := cfg.obs.start(out)
	if err != nil {
		return false, err
	}
	defer obs.close()
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: "demo", Frames: cfg.frames}, Ports: specs, Lcores: demoLcores(cpus),
		Idle: lcore.IdlePolicy{Mode: idle}, Clock: clock.NewReal()})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(p)
	defer p.Stop() // on early returns; the checks below report the normal stop
	loops := make([]int, n)
	for i := range loops {
		loops[i] = i % len(cpus)
	}
	ipA, ipB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.6")
	common := app.TransportOptions{Window: cfg.window, Sizes: demoShardSizes, CongestionTarget: cfg.target, MinRTO: cfg.minRTO}
	to := common
	to.Role, to.Port, to.LocalIP, to.Seed, to.PostRecv = "target", 1, ipB, cfg.seed+1, 8
	tgt, err := p.AddShardedTransport(to, loops)
	if err != nil {
		return false, flagError(err, map[string]string{"Shards": "--shards", "Window": "--window"})
	}
	iniOpts := common
	iniOpts.Role, iniOpts.Port, iniOpts.LocalIP, iniOpts.Seed, iniOpts.Sends = "initiator", 0, ipA, cfg.seed, 4
	iniOpts.RegionKey, iniOpts.Peer = tgt.Shards[0].Region.Key, rt.PeerAddr{MAC: [6]byte(p.Port(1).Info().MAC), IP: ipB}
	iniOpts.Conns, iniOpts.PullEvery = 2*n, 4 // two connections a shard: txnload makes one ordered, one unordered
	ini, err := p.AddShardedTransport(iniOpts, loops)
	if err != nil {
		return false, flagError(err, map[string]string{"Shards": "--shards", "Window": "--window"})
	}
	fmt.Fprintf(out, "peregrine demo: transport, %d shards of each endpoint over a mem pair of %d queues (shard i on lcore i mod %d: %v), window %d, sizes %v B, for %v\n",
		n, n, len(cpus), cpus, cfg.window, demoShardSizes, cfg.duration)
	if err := p.Start(); err != nil {
		return false, flagError(err, map[string]string{"Lcores": "--lcores"})
	}
	pool := p.Pool()
	var last txnload.Stats
	var lastAt time.Duration
	elapsed, interrupted, err := p.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: time.Second, Tick: func(at time.Duration) {
		s := ini.LoadStats()
		rtx := ini.TransportStats().TxRetransmit + tgt.TransportStats().TxRetransmit
		js.interval(at.Seconds(), map[string]float64{"ops_completed": float64(s.Completed), "ops_failed": float64(s.Failed), "goodput_bytes": float64(s.Bytes),
			"retransmits": float64(rtx), "pool_in_use": float64(pool.InUse())})
		if !cfg.quiet {
			dt := (at - lastAt).Seconds()
			fmt.Fprintln(out, liveLine(at, fmt.Sprintf("%s ops/s, %s goodput over %d shards | retransmits %d | pool %d/%d in use",
				units.Sig3(float64(s.Completed-last.Completed)/dt), formatBits(float64(s.Bytes-last.Bytes)*8/dt), n, rtx, pool.InUse(), pool.Frames())))
		}
		last, lastAt = s, at
	}})
	if err != nil {
		return false, err
	}
	start := time.Now()
	drained := drainOrHurry(ctx, func() bool { return ini.Drain() && tgt.Drain() })
	took := time.Since(start)
	runErr := p.StopLoops()
	_ = p.Close() // its leak check is reported below

	secs := elapsed.Seconds()
	ls := ini.LoadStats()
	type shardFigures struct {
		Ops               uint64  `json:"ops"`
		GoodputBps        float64 `json:"goodput_bps"`
		Retransmits       uint64  `json:"retransmits"`
		SteeredInSoftware uint64  `json:"steered_in_software"`
		RequestsAtTarget  uint64  `json:"target_requests"`
	}
	per := make([]shardFigures, n)
	var sum shardFigures
	fmt.Fprintf(out, "\nsummary after %.2fs, %d shards:\n", secs, n)
	for i := range n {
		is, ts := ini.Shards[i], tgt.Shards[i]
		f := shardFigures{
			Ops:               is.Load.Stats().Completed,
			Retransmits:       is.Endpoint.Transport().Stats().TxRetransmit + ts.Endpoint.Transport().Stats().TxRetransmit,
			SteeredInSoftware: ini.Steer.Stats(i).SteeredOut + tgt.Steer.Stats(i).SteeredOut,
			RequestsAtTarget:  ts.Endpoint.Stats().RequestsDelivered,
		}
		f.GoodputBps = float64(is.Load.Stats().Bytes) * 8 / secs
		per[i] = f
		sum.Ops, sum.GoodputBps, sum.Retransmits = sum.Ops+f.Ops, sum.GoodputBps+f.GoodputBps, sum.Retransmits+f.Retransmits
		sum.SteeredInSoftware, sum.RequestsAtTarget = sum.SteeredInSoftware+f.SteeredInSoftware, sum.RequestsAtTarget+f.RequestsAtTarget
		fmt.Fprintf(out, "  shard %d (queue %d, lcore %d): %d ops, %s goodput, retransmissions %d, steered_in_software %d, target requests %d\n",
			i, i, cpus[loops[i]], f.Ops, formatBits(f.GoodputBps), f.Retransmits, f.SteeredInSoftware, f.RequestsAtTarget)
	}
	fmt.Fprintf(out, "  sum of %d shards: %d ops, %s goodput, retransmissions %d, steered_in_software %d, target requests %d\n",
		n, sum.Ops, formatBits(sum.GoodputBps), sum.Retransmits, sum.SteeredInSoftware, sum.RequestsAtTarget)
	lat := ini.Latency()
	fmt.Fprintf(out, "  latency post→completion: %s\n", latencies(lat))
	fmt.Fprintf(out, "  pool: %d frames, %d in use after stop\n", pool.Frames(), pool.InUse())

	var ss, rs txnload.SendStats // the Sends the initiator shards posted, the WQEs the target shards filled
	for i := range n {
		if l := ini.Shards[i].Sends; l != nil {
			st := l.Stats()
			ss.Posted, ss.Completed, ss.Failed = ss.Posted+st.Posted, ss.Completed+st.Completed, ss.Failed+st.Failed
		}
		if r := tgt.Shards[i].Recv; r != nil {
			st := r.Stats()
			rs.Received, rs.RecvFailed, rs.BadData, rs.Bytes = rs.Received+st.Received, rs.RecvFailed+st.RecvFailed, rs.BadData+st.BadData, rs.Bytes+st.Bytes
		}
	}
	fmt.Fprintf(out, "  sends (unordered, 16-bit delivery index): %d posted, %d completed ok, %d failed; target: %d WQEs received ok (%d MiB), %d in error\n",
		ss.Posted, ss.Completed, ss.Failed, rs.Received, rs.Bytes>>20, rs.RecvFailed)
	pushes, wrong := tgt.Pushes()
	spread := true
	for _, f := range per {
		spread = spread && f.Ops > 0 && f.RequestsAtTarget > 0
	}
	foreign := uint64(0)
	for _, st := range []*app.ShardedTransport{ini, tgt} {
		s := st.TransportStats()
		foreign += s.RxUnknownCID + s.RxStaleCID
	}
	checks := []check{
		errCheck("poll loops exited cleanly", runErr),
		demoDrainCheck(drained, ls, defaultDrain, took),
		progress(ls.Completed > 0, fmt.Sprintf("operations completed (%d)", ls.Completed)),
		{ls.Failed == 0 && ls.Completed == ls.Posted, fmt.Sprintf("every operation completed exactly once with no error (%d posted, %d completed, %d failed)", ls.Posted, ls.Completed, ls.Failed)},
		{ls.OutOfOrder == 0, fmt.Sprintf("ordered connections completed in posting order (%d out of order)", ls.OutOfOrder)},
		{ls.BadData == 0 && wrong == 0, fmt.Sprintf("every pull's and push's bytes are right (%d pulls wrong; %d of %d pushes wrong, the target checked)", ls.BadData, wrong, pushes)},
		progress(ss.Completed > 0, fmt.Sprintf("Sends completed (%d)", ss.Completed)),
		{ss.Failed == 0 && rs.RecvFailed == 0, fmt.Sprintf("Sends completed without error at both ends (%d ok, %d failed, %d receive errors)", ss.Completed, ss.Failed, rs.RecvFailed)},
		{rs.BadData == 0 && rs.Received >= ss.Completed, fmt.Sprintf("every Send landed byte-exact in the WQE its order names (%d wrong, %d received for %d completed)", rs.BadData, rs.Received, ss.Completed)},
		{spread, fmt.Sprintf("every shard completed operations and its paired target shard served them (%d shards)", n)},
		{foreign == 0, fmt.Sprintf("no shard received a frame of another shard's connection (%d)", foreign)},
		{sum.Ops == ls.Completed, fmt.Sprintf("the shards' operations sum to the total (%d)", ls.Completed)},
		leakCheck(pool),
	}
	checks = append(checks, errCheck("pool closed", pool.Close()))
	js.summary(secs, map[string]any{"shards": n, "ops_posted": ls.Posted, "ops_completed": ls.Completed, "ops_failed": ls.Failed, "goodput_bytes": ls.Bytes,
		"latency_p50_ns": lat.Quantile(0.5), "latency_p99_ns": lat.Quantile(0.99), "latency_p999_ns": lat.Quantile(0.999),
		"per_shard": per, "sum": sum, "pool_in_use": pool.InUse()}, checks, interrupted)
	return report(out, checks, interrupted), nil
}

// checkShards refuses a --shards that is not a power of two in
// 1..shard.MaxShards, and, sharded, a workload or flag whose mechanism
// cannot run sharded (demoShardFlagsRefused), naming both flags.
func (c *demoConfig) checkShards(fs *pflag.FlagSet) error {
	n := c.shards
	if n < 1 || n > shard.MaxShards || n&(n-1) != 0 {
		return fmt.Errorf("--shards %d: a power of two in 1..%d (the shard is in the CIDs' top bits)", n, shard.MaxShards)
	}
	if n == 1 {
		return nil
	}
	if c.workload != "" && c.workload != "transport" {
		return fmt.Errorf("--shards %d with --workload %s: only the transport workload runs sharded", n, c.workload)
	}
	names := make([]string, 0, len(demoShardFlagsRefused))
	for name := range demoShardFlagsRefused {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if fs.Changed(name) {
			return fmt.Errorf("--shards %d with --%s: %s (drop --%[2]s, or --shards 1)", n, name, demoShardFlagsRefused[name])
		}
	}
	return nil
}
