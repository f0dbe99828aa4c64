package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/app/config"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/fabric"
)

// Each subcommand's validate checks every flag before anything is opened,
// with the shared rules of flags.go, and returns a usageError naming the
// first bad flag. The run functions keep their own checks for callers that
// build a config directly (tests).

// The bounds are app/config's: a flag and a config key take the same.
const maxBurst = config.MaxBurst

// maxRegion bounds the memory a transport target registers (its region is
// 2 × --window × the largest of --sizes unless --region-size says more).
const maxRegion = config.MaxRegion

func (c *genConfig) validate(fs *pflag.FlagSet) error {
	if c.port == "" {
		return usage(errors.New("--port is required, e.g. --port afxdp:veth0"))
	}
	if err := usage(checkPorts("port", c.port), c.obs.validate()); err != nil {
		return err
	}
	cpus, err := parseCPUs("lcores", c.lcores)
	if err != nil {
		return usage(err)
	}
	zero := "run until --count, --idle-exit or a signal"
	if c.rx {
		zero = "run until --expect, --idle-exit or a signal"
		err = inert(fs, "with --rx: it shapes what is sent", "count", "rate", "size", "replay", "timing", "loop", "src-mac", "dst-mac", "src-ip", "dst-ip", "dst-port", "vlan")
	} else {
		err = inert(fs, "without --rx: it belongs to the receiver", "expect", "idle-exit")
	}
	if err == nil && c.replay == "" {
		err = inert(fs, "without --replay", "timing", "loop")
	}
	if err == nil {
		err = c.rxf.validate(fs, c.rx)
	}
	if err != nil {
		return usage(err)
	}
	var replay error
	if c.replay != "" && !c.rx {
		replay = c.checkReplay(fs)
	}
	var addressing error
	if fs.Changed("src-port") && c.srcPort == 0 {
		addressing = fmt.Errorf("--src-port 0: give 1..%d, the UDP source port of flow 0", 65536-max(c.flows, 1))
	} else if addr, _, _, err := c.addressing(); err != nil {
		addressing = errors.Unwrap(err)
	} else if sizes, err := traffic.ParseSizes(c.size, genMaxFrame); err == nil && !c.rx && c.replay == "" {
		addressing = flagged("size", config.CheckFrameFits(c.size, sizes, addr))
	}
	return usage(
		addressing,
		checkGenFrames(c.size, c.rate, c.frameSz, c.rx || c.replay != ""),
		checkInt("flows", c.flows, 1, maxFlows),
		checkInt("burst", c.burst, 1, maxBurst),
		checkIdle(c.idle),
		checkPeriod(c.period),
		checkDuration("duration", c.duration, zero),
		checkDuration("idle-exit", c.idleExit, "never stop for idleness"),
		checkInt("loop", c.loop, 0, 1<<30),
		replay,
		checkFrameSize(c.frameSz),
		checkFrames(c.frames, len(cpus), 0, c.frameSz),
	)
}

func (c *fwdConfig) validate(fs *pflag.FlagSet) error {
	if n := len(c.ports); n < 1 || n > 2 {
		return usage(fmt.Errorf("--port: give one or two ports (got %d), e.g. --port afxdp:veth0 --port afxdp:veth1", n))
	}
	if err := usage(checkPorts("port", c.ports...), c.obs.validate()); err != nil {
		return err
	}
	if c.mode != "txonly" {
		if err := inert(fs, "unless --mode txonly: only the generator uses it", "size", "rate", "flows"); err != nil {
			return usage(err)
		}
	}
	if c.mode == "mac" && c.peerMAC == "" {
		return usage(errors.New("--mode mac needs --peer-mac: the destination MAC to write, e.g. --peer-mac 02:00:00:00:00:02"))
	}
	if c.mode != "mac" {
		if err := inert(fs, "unless --mode mac", "peer-mac"); err != nil {
			return usage(err)
		}
	}
	cpus, err := parseCPUs("lcores", c.lcores)
	if err != nil {
		return usage(err)
	}
	var mode, peer, txonly error
	if c.mode == "txonly" {
		txonly = checkSizesAndRate(c.size, c.rate, traffic.MaxFrame)
	} else if _, err := fwd.ParseMode(c.mode); err != nil {
		mode = fmt.Errorf("--mode: %w (or txonly)", err)
	}
	if c.peerMAC != "" {
		if _, err := net.ParseMAC(c.peerMAC); err != nil {
			peer = fmt.Errorf("--peer-mac %q: %w", c.peerMAC, err)
		}
	}
	return usage(
		mode, peer, txonly,
		checkInt("flows", c.flows, 1, maxFlows),
		checkInt("burst", c.burst, 1, maxBurst),
		checkIdle(c.idle),
		checkPeriod(c.period),
		checkDuration("duration", c.duration, "run until a signal"),
		checkFrames(c.frames, len(cpus), 0, 0),
	)
}

func (c *fabricConfig) validate() error {
	if c.portA == "" || c.portB == "" {
		return usage(errors.New("--port-a and --port-b are both required, e.g. --port-a afxdp:veth1 --port-b afxdp:veth2"))
	}
	if err := checkInt("in-order-dscp", int(c.inOrderDSCP), 0, 63); err != nil {
		return usage(err)
	}
	// Each profile is checked under the flag that gave it: --profile is
	// blamed for its own mistakes, not the direction it would fill in.
	for _, p := range []struct{ flag, value string }{{"profile", c.both}, {"a-to-b", c.aToB}, {"b-to-a", c.bToA}} {
		if p.value == "" {
			continue
		}
		if _, err := fabric.ParseProfile(p.value); err != nil {
			return usage(fmt.Errorf("--%s: %w", p.flag, err))
		}
	}
	cpus, err := parseCPUs("lcores", c.lcores)
	if err != nil {
		return usage(err)
	}
	if len(cpus) != 1 {
		return usage(fmt.Errorf("--lcores %s: the fabric runs one poll loop: give one CPU", c.lcores))
	}
	return usage(
		checkPorts("port-a", c.portA),
		checkPorts("port-b", c.portB),
		samePorts("port-a", c.portA, "port-b", c.portB),
		c.obs.validate(),
		checkInt("udp-port", int(c.udpPort), 1, 65535),
		checkIdle(c.idle),
		checkPeriod(c.period),
		checkDuration("duration", c.duration, "run until a signal"),
		checkFrameSize(c.frameSize),
		checkFrames(c.frames, 1, 0, c.frameSize),
	)
}

// transportRoleArgs is the transport command's argument rule, with an
// answer that says what is missing.
func transportRoleArgs(_ *cobra.Command, args []string) error {
	const example = "e.g. peregrine transport target --port afxdp:veth1 --ip 198.18.0.6"
	switch {
	case len(args) == 0:
		return usage(fmt.Errorf("transport needs a role: initiator or target, %s", example))
	case len(args) > 1:
		return usage(fmt.Errorf("transport takes one role, initiator or target (got %q), %s", args, example))
	case args[0] != "initiator" && args[0] != "target":
		return usage(fmt.Errorf("transport role %q: use initiator or target, %s", args[0], example))
	}
	return nil
}

func (c *transportConfig) validate(fs *pflag.FlagSet) error {
	if c.port == "" {
		return usage(errors.New("--port is required, e.g. --port afxdp:veth0?netns=a"))
	}
	if err := usage(checkPorts("port", c.port), c.obs.validate()); err != nil {
		return err
	}
	if _, err := netip.ParseAddr(c.ip); err != nil {
		return usage(fmt.Errorf("--ip %q: give this endpoint's IP address, e.g. 198.18.0.1", c.ip))
	}
	if c.role == "initiator" {
		if mac, err := net.ParseMAC(c.peerMAC); err != nil || len(mac) != 6 {
			return usage(fmt.Errorf("--peer-mac %q: give the target's Ethernet MAC, e.g. 02:70:67:00:01:06", c.peerMAC))
		}
		if _, err := netip.ParseAddr(c.peerIP); err != nil {
			return usage(fmt.Errorf("--peer-ip %q: give the target's IP address, e.g. 198.18.0.6", c.peerIP))
		}
	} else if err := inert(fs, "for a target: it belongs to the initiator", "peer-mac", "peer-ip", "region-key", "conns", "pull-every", "count", "op-timeout", "sends", "targets", "dc-sqs", "msg-size"); err != nil {
		return usage(err)
	}
	if c.role == "initiator" {
		if err := inert(fs, "for an initiator: it belongs to the target", "post-recv"); err != nil {
			return usage(err)
		}
	}
	sizesFlag, spec := "sizes", c.sizes
	if c.msgSize != "" {
		sizesFlag, spec = "msg-size", c.msgSize
	}
	sizes, err := parseByteSizes(spec, 16, txn.MaxMessage)
	if err != nil {
		return usage(fmt.Errorf("--%s: %w", sizesFlag, err))
	}
	if c.ioi != "" {
		if _, err := ioi.ParseMode(c.ioi); err != nil {
			return usage(fmt.Errorf("--ioi %q: use on, off, inorder or sprayed", c.ioi))
		}
	}
	if err := usage(
		checkInt("window", c.window, 1, 4096),
		checkInt("sends", c.sends, 0, 4096),
		checkInt("post-recv", c.postRecv, 0, txn.DefaultRecvDepth),
		checkInt("targets", c.targets, 0, 1<<20),
		checkInt("dc-sqs", c.dcSQs, 1, 60),
	); err != nil {
		return err
	}
	if err := config.CheckTargetRegion(c.window, sizes); err != nil {
		return usage(fmt.Errorf("--%s %s: %w", sizesFlag, spec, err))
	}
	if err := config.CheckTransportMemory(c.window, c.sends, c.postRecv, sizes); err != nil {
		flag := sizesFlag
		if c.sends > 0 {
			flag = "sends"
		} else if c.postRecv > 0 {
			flag = "post-recv"
		}
		return usage(fmt.Errorf("--%s: %w", flag, err))
	}
	if err := usage(checkInt("region-size", c.regionLen, 0, maxRegion)); err != nil {
		return err
	}
	if err := usage(checkInt("shards", c.shards, 1, shard.MaxShards)); err != nil {
		return err
	}
	if c.shards > 1 {
		if err := inert(fs, "with --shards: it runs on one endpoint (drop it, or --shards 1)", "json", "metrics", "metrics-public", "targets", "dc-sqs", "global-qpns"); err != nil {
			return usage(err)
		}
		if c.role == "initiator" && c.conns < c.shards {
			return usage(fmt.Errorf("--conns %d for --shards %d: give each shard a connection (use --conns %d or more)", c.conns, c.shards, c.shards))
		}
		if c.count > 0 && c.count < uint64(c.shards) {
			return usage(fmt.Errorf("--count %d for --shards %d: give each shard an operation (use --count %d or more, or 0)", c.count, c.shards, c.shards))
		}
		port, err := shardedPortSpec(c.port, c.shards)
		if err != nil {
			return usage(err)
		}
		c.port = port
	}
	if need := txnload.TargetMemoryLenFor(c.window, sizes, c.shards); c.role == "target" && c.regionLen != 0 && c.regionLen < need {
		return usage(fmt.Errorf("--region-size %d is smaller than the %d B this --window %d, --shards %d and --%s %s need ((shards + 1) × window × largest size): leave it out, or give at least %d", c.regionLen, need, c.window, c.shards, sizesFlag, spec, need))
	}
	if c.targets > 0 {
		if c.regionLen == 0 {
			return usage(errors.New("--targets needs --region-size: the len= of the target's READY line"))
		}
	} else if err := inert(fs, "without --targets", "dc-sqs"); err != nil {
		return usage(err)
	}
	psn := flagged("psn-window", config.CheckPSNWindow(c.rtWindow))
	zero := "serve until a signal"
	if c.role == "initiator" {
		zero = "post until --count or a signal"
	}
	return usage(
		checkInt("conns", c.conns, 1, 1024),
		checkInt("pull-every", c.pullEvery, 0, 1<<30),
		checkDuration("duration", c.duration, zero),
		checkDuration("op-timeout", c.opTimeout, "have no operation timeout"),
		checkCPU(typedName(fs, "lcores", "lcore"), c.lcore),
		checkIdle(c.idle),
		checkFrameSize(c.frameSize),
		checkFrames(c.frames, 1, 0, c.frameSize),
		flagged("target-delay", config.CheckTargetDelay(c.target)),
		flagged("min-cwnd", config.CheckMinCwnd(c.minCwnd)),
		checkPositiveDuration("min-rto", c.minRTO, time.Microsecond),
		psn,
	)
}

// demoTransportFrames is what the transport workload holds on top of the
// loops' caches (config.TransportFrames: grants bound it, not --window).
const demoTransportFrames = config.TransportFrames

// afxdpFillFrames is what an AF_XDP port keeps in its fill ring: demo
// --veth opens four of them.
const afxdpFillFrames = config.AFXDPFillFrames

func (c *demoConfig) validate(fs *pflag.FlagSet) error {
	if !c.veth {
		if err := usage(inert(fs, "without --veth: the demo runs over mem ports", "driver")); err != nil {
			return err
		}
	}
	if c.workload != "forward" {
		if err := usage(inert(fs, "unless --workload forward: only the generator uses it", "size", "rate")); err != nil {
			return err
		}
	}
	if c.workload == "" || c.workload == "transport" {
		if err := usage(inert(fs, "in the transport workload", "burst")); err != nil {
			return err
		}
	}
	if err := usage(c.obs.validate()); err != nil {
		return err
	}
	if err := usage(checkDuration("duration", c.duration, ""), checkDuration("drain", c.drain, "take the default, "+defaultDrain.String())); err != nil {
		return err
	}
	if err := usage(c.checkShards(fs)); err != nil {
		return err
	}
	loops := len(defaultLcores())
	if c.lcores != "" {
		cpus, err := parseCPUs("lcores", c.lcores)
		if err != nil {
			return usage(err)
		}
		if len(cpus) > 2 {
			return usage(fmt.Errorf("--lcores %s: the demo uses one or two lcores", c.lcores))
		}
		loops = len(cpus)
	}
	var workload, driver, prof error
	extra := 0
	switch c.workload {
	case "", "transport":
		extra = demoTransportFrames
		if _, err := fabric.ParseProfile(c.profile); err != nil {
			prof = fmt.Errorf("--profile: %w", err)
		}
	case "forward":
	case "roce":
		if c.veth {
			workload = errors.New("--workload roce runs over mem ports; it takes no --veth (peregrine roce runs the stage on any ports)")
		}
	default:
		workload = fmt.Errorf("--workload %q: use transport, forward or roce", c.workload)
	}
	if c.veth {
		driver = driverCheck(c.driver)
		if c.driver == "afxdp" {
			extra += 4 * afxdpFillFrames
		}
	}
	return usage(
		workload, driver, prof,
		checkSizesAndRate(c.size, c.rate, traffic.MaxFrame),
		checkInt("burst", c.burst, 1, maxBurst),
		checkIdle(c.idle),
		checkInt("window", c.window, 1, 4096),
		flagged("target-delay", config.CheckTargetDelay(c.target)),
		checkPositiveDuration("min-rto", c.minRTO, time.Microsecond),
		checkFrames(c.frames, loops, extra, 0),
	)
}
