package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

type transportConfig struct {
	role      string
	port      string
	ip        string
	peerMAC   string
	peerIP    string
	regionKey uint32
	regionLen int
	sizes     string
	window    int
	conns     int
	pullEvery int
	duration  time.Duration
	count     uint64
	lcore     int
	idle      string
	frames    int
	obs       observeFlags
	target    time.Duration
	minRTO    time.Duration
	minCwnd   float64
	seed      uint64
	rtWindow  int
	frameSize int
	quiet     bool
	ioi       string // --ioi: on|off|inorder|sprayed
	msgSize   string // --msg-size: one message size, instead of --sizes
	opTimeout time.Duration
	sends     int                          // initiator: two-sided Sends outstanding (0: none)
	qpns      bool                         // global QP numbers on the wire (both ends)
	postRecv  int                          // target: receive WQEs kept posted per connection (0: none)
	ready     func(key uint32, length int) // tests: the target is up
	targets   int                          // initiator through an MCSQ (transport_mcsq.go)
	shards    int                          // endpoints, one per loop and queue (transport_shard.go)
	dcSQs     int
}

func newTransportCommand() *cobra.Command {
	var cfg transportConfig
	cmd := &cobra.Command{
		Use:   "transport initiator|target",
		Short: "Run one end of the reliable transport on a real port (the two-process end-to-end test)",
		Long: `transport runs one endpoint of the reliable transport on a port.

A target registers --region-size bytes (pushes land in the first half; the
second half, filled with a fixed pattern, serves pulls), prints
  READY key=0x... len=N mac=... ip=...
and serves until --duration passes or SIGINT/SIGTERM.

An initiator keeps --window operations outstanding on --conns connections
(even ones ordered) to the target: pushes of --sizes in turn, every
--pull-every-th a pull. It checks each completion (status, posting order on
ordered connections, pulled bytes) and ends with a summary and one line
  RESULT proto=peregrine ops=N bytes=N seconds=S goodput_gbps=G p50_us=.. p99_us=.. p999_us=..
It exits 0 only if every operation completed without error.

With --op-timeout, an operation not completed that long after posting ends
with a timeout error (one whose packets are still unacknowledged ends when
they resolve: acknowledged, or given up after the transport's retries).
If the target dies, every operation ends with an error — timed out, or
failed with its connection once the retries run out (RetryLimit 20,
back-off up to 100ms: within about 5s) — the initiator stops posting once
every connection failed, prints the summary with the reason, and exits 1.`,
		Example: `  sudo peregrine transport target --port afxdp:veth1?netns=b --ip 198.18.0.6
  sudo peregrine transport initiator --port afxdp:veth0?netns=a --ip 198.18.0.1 \
      --peer-mac 02:70:67:00:01:06 --peer-ip 198.18.0.6 --region-key 0x10001 --duration 5s
  peregrine transport initiator ... --sizes 4KiB --window 1 --pull-every 0   # latency`,
		Args:      transportRoleArgs,
		ValidArgs: []string{"initiator", "target"},
		PreRunE: func(cmd *cobra.Command, args []string) error {
			cfg.role = args[0]
			return cfg.validate(cmd.Flags())
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := notifyContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			ok, err := runTransport(ctx, cfg, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if !ok {
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	cfg.obs.register(f) // --json, --metrics
	f.StringVar(&cfg.port, "port", "", "port spec, e.g. afxdp:veth0?netns=a (required)")
	f.StringVar(&cfg.ip, "ip", "", "this endpoint's IP address (required)")
	f.StringVar(&cfg.peerMAC, "peer-mac", "", "initiator: the target's MAC")
	f.StringVar(&cfg.peerIP, "peer-ip", "", "initiator: the target's IP")
	f.Uint32Var(&cfg.regionKey, "region-key", 0x10001, "initiator: the target's region key (its READY line)")
	sizeVar(f, &cfg.regionLen, "region-size", 0, "bytes of the target's region, at least 2 × window × largest size (default: that)")
	f.StringVar(&cfg.sizes, "sizes", "64KiB", "initiator: message sizes used in turn, e.g. 512,4KiB,64KiB")
	f.IntVar(&cfg.window, "window", 32, "operations outstanding at once")
	f.IntVar(&cfg.conns, "conns", 2, "initiator: connections (even ones ordered)")
	f.IntVar(&cfg.pullEvery, "pull-every", 0, "initiator: every n-th operation is a pull (0: none)")
	f.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long to post (initiator) or serve (target; 0: until a signal)")
	f.Uint64Var(&cfg.count, "count", 0, "initiator: stop after this many operations (0: --duration)")
	f.IntVar(&cfg.lcore, "lcores", 0, "CPU of the poll loop (one: the endpoint runs one loop)")
	f.IntVar(&cfg.lcore, "lcore", 0, "CPU of the poll loop")
	_ = f.MarkDeprecated("lcore", "use --lcores, as every other subcommand")
	idleVar(f, &cfg.idle)
	f.IntVar(&cfg.frames, "frames", 32768, "frames in the packet pool (at least 1024)")
	sizeVar(f, &cfg.frameSize, "frame-size", 2048, "bytes per pool frame: 2048, 4096, 8192 or 16384 (4096 for an MTU above 1778 on AF_XDP; above 4096, AF_XDP carries jumbo frames as several chunks)")
	f.DurationVar(&cfg.target, "target-delay", app.DefaultCongestionTarget, "Swift's base target delay")
	f.DurationVar(&cfg.minRTO, "min-rto", app.DefaultMinRTO, "the shortest retransmit timeout")
	f.Float64Var(&cfg.minCwnd, "min-cwnd", 0, "Swift's least congestion window in packets (0: 8; 0.01 is Swift's own floor, which paces a connection to a packet per hundred round trips once the loops' scheduling delays read as congestion)")
	f.IntVar(&cfg.rtWindow, "psn-window", 512, "PSNs per sliding window and direction (64..4096, a multiple of 64): packets a connection may have in flight")
	f.Uint64Var(&cfg.seed, "seed", 0, "seed of the endpoint's random choices: CIDs, initial PSNs (0: unpredictable, from crypto/rand, so a rerun is a new peer to the target; set one only to replay a run)")
	f.DurationVar(&cfg.opTimeout, "op-timeout", 0, "initiator: end an operation not completed this long after posting with a timeout error (0: no timeout; a dead target is then found by the transport's retries only)")
	f.BoolVar(&cfg.quiet, "quiet", false, "no per-second lines")
	f.StringVar(&cfg.ioi, "ioi", "off", "IOI forwarding of data packets: on (in-order head and tail, sprayed middle), off, inorder (every packet on the ordered path) or sprayed")
	f.StringVar(&cfg.msgSize, "msg-size", "", "initiator: one message size (overrides --sizes), e.g. 16MiB")
	f.IntVar(&cfg.sends, "sends", 0, "initiator: also keep this many two-sided Sends outstanding on one more, unordered connection with a delivery index (0: none; the target needs --post-recv and the same --sizes)")
	f.BoolVar(&cfg.qpns, "global-qpns", false, "run on global QP numbers (docs/qp-translation.md): every packet carries both ends' 24-bit QPNs, checked through a QP-translation CAM; it changes the wire, so give it to both ends")
	f.IntVar(&cfg.postRecv, "post-recv", 0, "target: keep this many receive WQEs posted on every connection and check each Send placed in them (0: none)")
	f.IntVar(&cfg.targets, "targets", 0, "initiator: post through a multi-channel send queue from 4 goroutines to this many targets (slices of the target's region; 0: the --conns workload)")
	f.IntVar(&cfg.shards, "shards", 1, "endpoints, each on its own poll loop (shard i on CPU --lcores + i, or unpinned with --lcores -1) driving queue i of --port (open it with queues=N: an afxdp: port that names no queue count gets queues=N, and one with udp_port gets the matching shard_bits, so its XDP program counts frames arriving on another shard's queue); the initiator deals its --conns round robin, each shard keeps --window in flight; give the target the same --shards")
	f.IntVar(&cfg.dcSQs, "dc-sqs", 16, "initiator with --targets: DC send queues (connections) shared by the targets, 1..60")
	return cmd
}

// messageSizes reads --sizes: message sizes as internal/units reads them.
func messageSizes(spec string) ([]int, error) { return parseByteSizes(spec, 16, txn.MaxMessage) }

func runTransport(ctx context.Context, cfg transportConfig, out io.Writer) (bool, error) {
	if cfg.role != "initiator" && cfg.role != "target" {
		return false, fmt.Errorf("role %q: use initiator or target", cfg.role)
	}
	out, js := jsonOutput(cfg.obs.json, out)
	if cfg.port == "" {
		return false, errors.New("--port is required, e.g. --port afxdp:veth0?netns=a")
	}
	ip, err := netip.ParseAddr(cfg.ip)
	if err != nil {
		return false, fmt.Errorf("--ip %q: %v", cfg.ip, err)
	}
	if cfg.msgSize != "" {
		cfg.sizes = cfg.msgSize
	}
	sizes, err := messageSizes(cfg.sizes)
	if err != nil {
		return false, fmt.Errorf("--sizes/--msg-size: %w", err)
	}
	ioiMode := ioi.ModeOff
	if cfg.ioi != "" { // configs built without the flag: off
		if ioiMode, err = ioi.ParseMode(cfg.ioi); err != nil {
			return false, fmt.Errorf("--ioi: %w", err)
		}
	}
	if cfg.window < 1 || cfg.window > 4096 {
		return false, fmt.Errorf("--window %d: use 1..4096", cfg.window)
	}
	idle, err := lcore.ParseIdleMode(cfg.idle)
	if err != nil {
		return false, fmt.Errorf("--idle: %w", err)
	}
	var peer rt.PeerAddr
	if cfg.role == "initiator" {
		mac, err := net.ParseMAC(cfg.peerMAC)
		if err != nil || len(mac) != 6 {
			return false, fmt.Errorf("--peer-mac %q: give the target's Ethernet MAC, e.g. 02:70:67:00:01:06", cfg.peerMAC)
		}
		pip, err := netip.ParseAddr(cfg.peerIP)
		if err != nil {
			return false, fmt.Errorf("--peer-ip %q: %v", cfg.peerIP, err)
		}
		peer = rt.PeerAddr{MAC: [6]byte(mac), IP: pip}
	}
	clk := clock.NewReal()
	if cfg.role == "initiator" && cfg.targets > 0 {
		return runTransportMCSQ(ctx, cfg, ip, peer, idle, sizes, out, js)
	}
	if cfg.shards > 1 {
		return runTransportSharded(ctx, cfg, ip, peer, idle, sizes, ioiMode, out)
	}
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
		Clock:  clk,
	})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames/--frame-size", "Ports": "--port", "Lcores": "--lcores", "Idle": "--idle"})
	}
	obs.watchPipeline(pipe)
	defer pipe.Stop() // on early returns
	pool, p := pipe.Pool(), pipe.Port(0)
	tp, err := pipe.AddTransport(app.TransportOptions{
		Role: cfg.role, LocalIP: ip, Window: cfg.window, Sizes: sizes, RegionLen: cfg.regionLen,
		RegionKey: cfg.regionKey, Peer: peer, Conns: cfg.conns, PullEvery: cfg.pullEvery, Count: cfg.count,
		CongestionTarget: cfg.target, MinCwnd: cfg.minCwnd, MinRTO: cfg.minRTO, Seed: cfg.seed, RTWindow: cfg.rtWindow,
		IOI:       ioi.Config{Mode: ioiMode},
		OpTimeout: cfg.opTimeout,
		Sends:     cfg.sends, PostRecv: cfg.postRecv,
		GlobalQPNs: cfg.qpns,
	})
	if err != nil {
		return false, err
	}
	ep, load := tp.Endpoint, tp.Load
	obs.watchTransport(cfg.role, ep, load)
	obs.watchConns(cfg.role, tp.Sampler)
	if cfg.role == "target" {
		fmt.Fprintf(out, "READY key=%#x len=%d mac=%s ip=%s\n", tp.Region.Key, tp.Region.Len, net.HardwareAddr(p.Info().MAC), ip)
		js.ready(tp.Region.Key, tp.Region.Len, net.HardwareAddr(p.Info().MAC), ip)
		if cfg.ready != nil {
			cfg.ready(tp.Region.Key, tp.Region.Len)
		}
	}
	if err := pipe.Start(); err != nil {
		return false, flagError(err, map[string]string{"Lcores": "--lcores"})
	}
	var meter *loadMeter
	var done func() bool
	if load != nil {
		meter = &loadMeter{load: load}
		// The run ends when the last operation completes, or when every
		// connection failed (the target is gone: nothing more can be posted).
		done = func() bool {
			s := load.Stats()
			return load.Down() || cfg.count > 0 && s.Completed+s.Failed >= cfg.count
		}
	}
	elapsed, interrupted, err := pipe.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: time.Second, Done: done, Tick: func(at time.Duration) {
		js.interval(at.Seconds(), transportCounters(ep, load, tp.Sampler))
		if cfg.quiet {
			return
		}
		retx := ep.Transport().Stats().TxRetransmit
		if meter != nil {
			fmt.Fprintln(out, meter.line(at, retx, pool))
			return
		}
		st := ep.Stats()
		fmt.Fprintf(out, "[%5.1fs] requests %d, placed %d B, served %d B | retransmits %d | pool %d/%d in use\n",
			at.Seconds(), st.RequestsDelivered, st.BytesPlaced, st.BytesServed, retx, pool.InUse(), pool.Frames())
	}})
	if err != nil {
		return false, err
	}
	var atEnd txnload.Stats // the figures of the measured interval
	if load != nil {
		atEnd = load.Stats()
	}
	drained := drainOrHurry(ctx, tp.Drain)
	runErr := pipe.StopLoops()
	ps := p.Stats()
	// Close's leak check is reported below (pool back to zero in use).
	_ = pipe.Close()
	ts := ep.Transport().Stats()
	fmt.Fprintf(out, "\nsummary after %.2fs: transport sent %d data + %d retransmitted (%d early; %d timeouts found spurious), received %d frames (bad checksum %d, duplicate %d, stale %d), pool %d in use after stop\n",
		elapsed.Seconds(), ts.TxData, ts.TxRetransmit, ts.TxEarlyRetransmit, ts.SpuriousRTO, ts.RxFrames, ts.RxBadChecksum, ts.RxDuplicate, ts.RxStalePSN, pool.InUse())
	fmt.Fprintf(out, "  port %s: received %d, dropped %d (ring full or no buffer), no buffer %d; sent %d, refused %d (queue full, retried)\n",
		p.Info().Name, ps.RxPackets, ps.RxDropped, ps.RxNoBuf, ps.TxPackets, ps.TxDropped)
	if cfg.qpns {
		q := ep.QPNStats()
		fmt.Fprintf(out, "  global QPNs: %d opened, %d packets translated through the CAM; dropped: retired %d, unknown %d, misrouted %d, wrong source %d, missing %d\n",
			q.CAM.Opened, q.CAM.Translated, q.DropRetired, q.DropUnknown, q.DropMisrouted, q.DropSource, q.DropMissing)
	}
	if load == nil {
		st := ep.Stats()
		pushes, badPushes := tp.Pushes()
		fmt.Fprintf(out, "  target: %d requests delivered, %d B placed, %d B served, %d grants (peak %d B), refused %d; %d pushes checked, %d with wrong bytes\n",
			st.RequestsDelivered, st.BytesPlaced, st.BytesServed, st.GrantsIssued, st.GrantedMax, st.RefusedUnregistered+st.RefusedAccess+st.RefusedTooSmall,
			pushes, badPushes)
		recvOK := transportRecvSummary(out, tp)
		js.summary(elapsed.Seconds(), map[string]any{"counters": transportCounters(ep, nil, tp.Sampler), "pool_in_use": pool.InUse()}, []check{
			{runErr == nil, "poll loop exited cleanly" + because(runErr)},
			{pool.CheckLeaks() == nil, "pool back to zero in use" + because(pool.CheckLeaks())},
			{badPushes == 0, fmt.Sprintf("every push's bytes are right (%d wrong)", badPushes)},
			{recvOK, "every received WQE holds its Send's bytes"},
		}, interrupted)
		return runErr == nil && pool.CheckLeaks() == nil && badPushes == 0 && recvOK, runErr
	}
	ls := load.Stats()
	lat := &load.Latency
	if err := tp.ConnErr(); err != nil {
		fmt.Fprintf(out, "  connection to the target failed: %v (every connection down: %v)\n", err, load.Down())
	}
	if ls.Failed > 0 {
		fmt.Fprintf(out, "  slowest failed operation ended %v after it was posted (--op-timeout %v)\n", ls.SlowestFailed, cfg.opTimeout)
	}
	secs := elapsed.Seconds()
	checks := []check{
		{runErr == nil, "poll loop exited cleanly" + because(runErr)},
		drainCheck(drained, ls, 5*time.Second),
		{ls.Completed > 0, "operations completed"},
		failureCheck(ls, fmt.Sprintf(" (this initiator's --window %d and --sizes need a target region of at least %[2]d B, where the target's READY line gives its len=: start the target with the same --window and --sizes, or with --region-size %[2]d)",
			cfg.window, txnload.TargetMemoryLen(cfg.window, sizes))),
		{ls.BadData == 0, fmt.Sprintf("pulled bytes are right (%d wrong)", ls.BadData)},
		{ls.OutOfOrder == 0, fmt.Sprintf("ordered connections completed in posting order (%d out of order)", ls.OutOfOrder)},
		{pool.CheckLeaks() == nil, "pool back to zero in use" + because(pool.CheckLeaks())},
	}
	checks = append(checks, transportSendChecks(out, tp)...)
	ok := report(out, checks, interrupted)
	fmt.Fprintf(out, "RESULT proto=peregrine ops=%d bytes=%d seconds=%.3f goodput_gbps=%.4f p50_us=%.1f p99_us=%.1f p999_us=%.1f\n",
		atEnd.Completed, atEnd.Bytes, secs, float64(atEnd.Bytes)*8/secs/1e9,
		float64(lat.Quantile(0.5))/1e3, float64(lat.Quantile(0.99))/1e3, float64(lat.Quantile(0.999))/1e3)
	js.summary(secs, map[string]any{"counters": transportCounters(ep, load, tp.Sampler), "pool_in_use": pool.InUse(),
		"ops": atEnd.Completed, "bytes": atEnd.Bytes, "goodput_gbps": float64(atEnd.Bytes) * 8 / secs / 1e9,
		"p50_us": float64(lat.Quantile(0.5)) / 1e3, "p99_us": float64(lat.Quantile(0.99)) / 1e3, "p999_us": float64(lat.Quantile(0.999)) / 1e3}, checks, interrupted)
	return ok, nil
}
