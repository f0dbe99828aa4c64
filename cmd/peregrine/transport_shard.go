package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/lcore"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/internal/units"
	"github.com/peregrine-net/peregrine/pmd"
)

// runTransportSharded is runTransport with --shards N: N endpoints, shard i
// on its own loop (CPU --lcores + i) driving queue i of the port
// (app.AddShardedTransport). The summary gives each shard's figures and
// their sum.
func runTransportSharded(ctx context.Context, cfg transportConfig, ip netip.Addr, peer rt.PeerAddr, idle lcore.IdleMode, sizes []int, ioiMode ioi.Mode, out io.Writer) (bool, error) {
	lcores, loops := make([]app.Lcore, cfg.shards), make([]int, cfg.shards)
	for i := range lcores {
		cpu := cfg.lcore + i
		if cfg.lcore < 0 {
			cpu = -1
		}
		lcores[i], loops[i] = app.Lcore{Name: fmt.Sprintf("%s%d", cfg.role, i), CPU: cpu}, i
	}
	pipe, err := app.New(app.Options{
		Pool:   mbuf.Options{Name: "transport", Frames: cfg.frames, FrameSize: cfg.frameSize},
		Ports:  []string{cfg.port},
		Lcores: lcores,
		Idle:   lcore.IdlePolicy{Mode: idle},
		Clock:  clock.NewReal(),
	})
	if err != nil {
		return false, flagError(err, map[string]string{"Pool": "--frames/--frame-size", "Ports": "--port", "Lcores": "--lcores/--shards", "Idle": "--idle"})
	}
	defer pipe.Stop() // on early returns
	pool, p := pipe.Pool(), pipe.Port(0)
	st, err := pipe.AddShardedTransport(app.TransportOptions{
		Role: cfg.role, LocalIP: ip, Window: cfg.window, Sizes: sizes, RegionLen: cfg.regionLen,
		RegionKey: cfg.regionKey, Peer: peer, Conns: cfg.conns, PullEvery: cfg.pullEvery, Count: cfg.count,
		CongestionTarget: cfg.target, MinRTO: cfg.minRTO, Seed: cfg.seed, RTWindow: cfg.rtWindow,
		IOI: ioi.Config{Mode: ioiMode}, OpTimeout: cfg.opTimeout, Sends: cfg.sends, PostRecv: cfg.postRecv,
	}, loops)
	if err != nil {
		return false, flagError(err, map[string]string{"Shards": "--shards", "Conns": "--conns", "Count": "--count"})
	}
	initiator := cfg.role == "initiator"
	if !initiator {
		r := st.Shards[0].Region
		fmt.Fprintf(out, "READY key=%#x len=%d mac=%s ip=%s shards=%d\n", r.Key, r.Len, net.HardwareAddr(p.Info().MAC), ip, cfg.shards)
		if cfg.ready != nil {
			cfg.ready(r.Key, r.Len)
		}
	}
	if err := pipe.Start(); err != nil {
		return false, flagError(err, map[string]string{"Lcores": "--lcores/--shards"})
	}
	var done func() bool
	if initiator {
		done = func() bool {
			s := st.LoadStats()
			return st.Down() || cfg.count > 0 && s.Completed+s.Failed >= cfg.count
		}
	}
	var last txnload.Stats
	var lastAt time.Duration
	elapsed, interrupted, err := pipe.Run(ctx, app.RunOptions{Duration: cfg.duration, Period: time.Second, Done: done, Tick: func(at time.Duration) {
		if cfg.quiet {
			return
		}
		ts := st.TransportStats()
		if initiator {
			s := st.LoadStats()
			dt := (at - lastAt).Seconds()
			fmt.Fprintln(out, liveLine(at, fmt.Sprintf("%s ops/s, %s goodput over %d shards | retransmits %d | pool %d/%d in use",
				units.Sig3(float64(s.Completed-last.Completed)/dt), formatBits(float64(s.Bytes-last.Bytes)*8/dt), cfg.shards, ts.TxRetransmit, pool.InUse(), pool.Frames())))
			last, lastAt = s, at
			return
		}
		es := st.EndpointStats()
		fmt.Fprintf(out, "[%5.1fs] %d shards: requests %d, placed %d B, served %d B | retransmits %d | pool %d/%d in use\n",
			at.Seconds(), cfg.shards, es.RequestsDelivered, es.BytesPlaced, es.BytesServed, ts.TxRetransmit, pool.InUse(), pool.Frames())
	}})
	if err != nil {
		return false, err
	}
	atEnd := st.LoadStats()
	perShard := make([]txnload.Stats, len(st.Shards))
	for i, s := range st.Shards {
		if s.Load != nil {
			perShard[i] = s.Load.Stats()
		}
	}
	drained := drainOrHurry(ctx, st.Drain)
	runErr := pipe.StopLoops()
	_ = pipe.Close() // its leak check is reported below
	secs := elapsed.Seconds()
	ts := st.TransportStats()
	fmt.Fprintf(out, "\nsummary after %.2fs, %d shards: transport sent %d data + %d retransmitted (%d early), received %d frames (bad checksum %d, duplicate %d, stale %d), pool %d in use after stop\n",
		secs, cfg.shards, ts.TxData, ts.TxRetransmit, ts.TxEarlyRetransmit, ts.RxFrames, ts.RxBadChecksum, ts.RxDuplicate, ts.RxStalePSN, pool.InUse())
	for i, s := range st.Shards {
		rs, c := s.Endpoint.Transport().Stats(), st.Steer.Stats(i)
		line := fmt.Sprintf("  shard %d (queue %d): received %d frames, sent %d data; steered in software %d out, %d in", i, i, rs.RxFrames, rs.TxData, c.SteeredOut, c.SteeredIn)
		if initiator {
			ls := perShard[i]
			line += fmt.Sprintf("; %d ops, %s goodput", ls.Completed, formatBits(float64(ls.Bytes)*8/secs))
		} else {
			es := s.Endpoint.Stats()
			line += fmt.Sprintf("; %d requests, %d B placed", es.RequestsDelivered, es.BytesPlaced)
		}
		fmt.Fprintln(out, line)
	}
	steer := st.Steer.Total()
	fmt.Fprintf(out, "  sum of %d shards: steered in software %d of %d frames received (%.4f)", cfg.shards, steer.SteeredOut, steer.Received, steer.SteeredFraction())
	if m := st.Steer.Missteered(); m != nil {
		fmt.Fprintf(out, "; mis-steered on arrival (XDP, per queue) %v", m)
	}
	if initiator {
		fmt.Fprintf(out, "; %d ops, %s goodput\n", atEnd.Completed, formatBits(float64(atEnd.Bytes)*8/secs))
	} else {
		es := st.EndpointStats()
		fmt.Fprintf(out, "; %d requests, %d B placed\n", es.RequestsDelivered, es.BytesPlaced)
	}
	leak := pool.CheckLeaks()
	if !initiator {
		_, bad := st.Pushes()
		return report(out, []check{
			{runErr == nil, "poll loops exited cleanly" + because(runErr)},
			{leak == nil, "pool back to zero in use" + because(leak)},
			{bad == 0, fmt.Sprintf("every push's bytes are right (%d wrong)", bad)},
		}, interrupted), runErr
	}
	ls := st.LoadStats()
	if err := st.ConnErr(); err != nil {
		fmt.Fprintf(out, "  connection to the target failed: %v (every connection down: %v)\n", err, st.Down())
	}
	need := txnload.TargetMemoryLenFor(cfg.window, sizes, cfg.shards)
	ok := report(out, []check{
		{runErr == nil, "poll loops exited cleanly" + because(runErr)},
		drainCheck(drained, ls, 5*time.Second),
		{ls.Completed > 0, "operations completed"},
		failureCheck(ls, fmt.Sprintf(" (this initiator's --window %d, --shards %d and --sizes need a target region of at least %d B: start the target with the same --window, --shards and --sizes, or with --region-size %[3]d)", cfg.window, cfg.shards, need)),
		{ls.BadData == 0, fmt.Sprintf("pulled bytes are right (%d wrong)", ls.BadData)},
		{ls.OutOfOrder == 0, fmt.Sprintf("ordered connections completed in posting order (%d out of order)", ls.OutOfOrder)},
		{leak == nil, "pool back to zero in use" + because(leak)},
	}, interrupted)
	lat := st.Latency()
	fmt.Fprintf(out, "RESULT proto=peregrine ops=%d bytes=%d seconds=%.3f goodput_gbps=%.4f p50_us=%.1f p99_us=%.1f p999_us=%.1f shards=%d\n",
		atEnd.Completed, atEnd.Bytes, secs, float64(atEnd.Bytes)*8/secs/1e9,
		float64(lat.Quantile(0.5))/1e3, float64(lat.Quantile(0.99))/1e3, float64(lat.Quantile(0.999))/1e3, cfg.shards)
	return ok, nil
}

// shardedPortSpec completes an afxdp: --port for n shards: queues=n when
// the spec names no queue count, and shard_bits (the CID bits n shards
// use) when it has udp_port, so the XDP program counts frames that arrive
// on another shard's queue without the user working out log2 n. A
// shard_bits that contradicts --shards is refused: the program would
// check the wrong bits and count every frame, or none. udp_port is not
// added: it hands every other frame (ARP among them) to the kernel, which
// changes more than steering. Other drivers' specs are returned as given.
func shardedPortSpec(spec string, n int) (string, error) {
	s, err := pmd.ParseSpec(spec)
	if err != nil || s.Driver != "afxdp" || n <= 1 {
		return spec, nil // opening the port reports a malformed spec
	}
	bits := int(shard.Bits(n))
	var add []string
	if !s.Params.Has("queues") && !s.Params.Has("queue") {
		add = append(add, fmt.Sprintf("queues=%d", n))
	}
	if v := s.Params.Get("shard_bits"); v != "" {
		if got, err := strconv.Atoi(v); err == nil && got != bits {
			return "", fmt.Errorf("--port %q has shard_bits=%d but --shards %d puts the shard in %d CID bits: drop shard_bits (it follows --shards) or give shard_bits=%d", spec, got, n, bits, bits)
		}
	} else if s.Params.Has("udp_port") {
		add = append(add, fmt.Sprintf("shard_bits=%d", bits))
	}
	if len(add) == 0 {
		return spec, nil
	}
	sep := "?"
	if strings.Contains(spec, "?") {
		sep = "&"
		if strings.HasSuffix(spec, "&") || strings.HasSuffix(spec, "?") {
			sep = ""
		}
	}
	return spec + sep + strings.Join(add, "&"), nil
}
