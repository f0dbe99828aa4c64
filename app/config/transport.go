package config

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/internal/units"
)

// MaxRegion bounds the memory a transport target registers.
const MaxRegion = 4 << 30

// Transport is one endpoint of the reliable transport on a port
// (app.AddTransport): a target serving a registered region, or an
// initiator keeping pushes and pulls outstanding against a target.
type Transport struct {
	// Role is initiator or target.
	Role string `yaml:"role"`
	Port string `yaml:"port"`
	// IP is the endpoint's IPv4 address.
	IP string `yaml:"ip"`
	// Window is operations outstanding per connection (default 32); Sizes
	// the message sizes used in turn (default [64KiB]). A target sizes its
	// region for them.
	Window int      `yaml:"window" default:"32"`
	Sizes  []string `yaml:"sizes"`
	// RegionSize is the target's region in bytes (default: what Window
	// and Sizes need); for an initiator, the length of the target's.
	RegionSize int `yaml:"region_size"`
	// Peer names a target stage of this file: its address and region key
	// are taken from it (same process). Otherwise PeerMAC, PeerIP and
	// RegionKey (the target's READY line) say where it is.
	Peer      string `yaml:"peer"`
	PeerMAC   string `yaml:"peer_mac"`
	PeerIP    string `yaml:"peer_ip"`
	RegionKey string `yaml:"region_key"`
	// Conns (default 2; even ones ordered), PullEvery (every n-th
	// operation a pull, 0 none) and Count (operations in all, 0 no end)
	// shape an initiator's workload.
	Conns     int    `yaml:"conns" default:"2"`
	PullEvery int    `yaml:"pull_every"`
	Count     uint64 `yaml:"count"`
	// Seed, MinRTO (default 1ms), TargetDelay (Swift's base target,
	// default 200us), MinCwnd (Swift's least window in packets, default
	// app.DefaultMinCwnd: app.TransportOptions.MinCwnd says why not Swift's 0.01)
	// and PSNWindow (default 512) tune the transport.
	Seed        uint64   `yaml:"seed"`
	MinRTO      Duration `yaml:"min_rto" default:"1ms"`
	TargetDelay Duration `yaml:"target_delay" default:"200us"`
	MinCwnd     float64  `yaml:"min_cwnd"`
	PSNWindow   int      `yaml:"psn_window" default:"512"`
	// IOI is the forwarding of data packets (the transport subcommand's
	// --ioi): on (in-order head and tail, sprayed middle), off (the
	// default), inorder or sprayed.
	IOI string `yaml:"ioi"`
	// MsgSize is one message size, instead of Sizes (--msg-size).
	MsgSize string `yaml:"msg_size"`
	// Sends (initiator) keeps that many two-sided Sends outstanding on one
	// more, unordered connection with a delivery index; PostRecv (target)
	// keeps that many receive WQEs posted per connection and checks each
	// Send's bytes. 0: none (--sends, --post-recv).
	Sends    int `yaml:"sends"`
	PostRecv int `yaml:"post_recv"`
	// OpTimeout (initiator) ends an operation not completed this long
	// after posting with a timeout error (0: none; --op-timeout).
	OpTimeout Duration `yaml:"op_timeout"`
	// GlobalQPNs runs the endpoint on global QP numbers (docs/qp-translation.md,
	// --global-qpns); it changes the wire, so both ends set it.
	GlobalQPNs bool `yaml:"global_qpns"`
	// Targets (initiator) posts through a multi-channel send queue
	// instead of the conns workload (transport --targets, mcsq.go):
	// Posters goroutines (default 4) post bursts of Burst (default 8)
	// pushes of the one message size to that many DC targets, slices of
	// the peer's region, over DCSQs DC send queues (default 16, --dc-sqs).
	Targets int `yaml:"targets"`
	DCSQs   int `yaml:"dc_sqs" default:"16"`
	Posters int `yaml:"posters" default:"4"`
	Burst   int `yaml:"burst" default:"8"`
	// Lcores, when it names more than one lcore, shards the endpoint: one
	// endpoint per named lcore, shard i on lcores[i] driving queue i of
	// port (open it with queues=N), the first the lcore of the pipeline
	// holding the stage (transport --shards, transport_shard.go).
	Lcores []string `yaml:"lcores"`

	opts app.TransportOptions
}

// Check implements Stage.
func (s *Transport) Check(c *Checker) {
	if s.Role != "initiator" && s.Role != "target" {
		c.Errorf("role", "%q: use initiator or target", s.Role)
	}
	c.Polls("port", s.Port)
	ip, err := netip.ParseAddr(s.IP)
	if err != nil || !ip.Is4() {
		c.Errorf("ip", "%q: give the endpoint's IPv4 address, e.g. 198.18.0.1", s.IP)
	}
	if s.Window == 0 {
		s.Window = 32
	}
	c.Err("window", CheckRange(s.Window, 1, 4096))
	sizesField := "sizes"
	if s.MsgSize != "" {
		if len(s.Sizes) > 0 {
			c.Errorf("msg_size", "%q and sizes %v both give the message sizes: keep one", s.MsgSize, s.Sizes)
		}
		sizesField = "msg_size"
	} else {
		s.Sizes = orDefault(s.Sizes)
	}
	list := s.sizeList()
	sizes, err := ParseByteSizes(list, 16, txn.MaxMessage)
	if err != nil {
		c.Err(sizesField, err)
	} else if s.Window <= 4096 {
		c.Err(sizesField, CheckTargetRegion(s.Window, sizes))
	}
	c.Err("region_size", CheckRange(s.RegionSize, 0, MaxRegion))
	if s.Conns == 0 {
		s.Conns = 2
	}
	c.Err("conns", CheckRange(s.Conns, 1, 1024))
	c.Err("pull_every", CheckRange(s.PullEvery, 0, 1<<30))
	if s.MinRTO == 0 {
		s.MinRTO = Duration(time.Millisecond)
	}
	c.Err("min_rto", CheckAtLeast(s.MinRTO.D(), time.Microsecond))
	if s.TargetDelay == 0 {
		s.TargetDelay = Duration(200 * time.Microsecond)
	}
	c.Err("target_delay", CheckTargetDelay(s.TargetDelay.D()))
	c.Err("min_cwnd", CheckMinCwnd(s.MinCwnd))
	if s.PSNWindow == 0 {
		s.PSNWindow = 512
	}
	c.Err("psn_window", CheckPSNWindow(s.PSNWindow))
	mode := ioi.ModeOff
	if s.IOI != "" {
		if mode, err = ioi.ParseMode(s.IOI); err != nil {
			c.Errorf("ioi", "%q: use on, off, inorder or sprayed", s.IOI)
		}
	}
	c.Err("sends", CheckRange(s.Sends, 0, 4096))
	c.Err("post_recv", CheckRange(s.PostRecv, 0, txn.DefaultRecvDepth))
	if sizes != nil && s.Window >= 1 && s.Window <= 4096 && s.Sends >= 0 && s.Sends <= 4096 && s.PostRecv >= 0 && s.PostRecv <= txn.DefaultRecvDepth &&
		CheckTargetRegion(s.Window, sizes) == nil {
		field := "sends"
		if s.Sends == 0 {
			field = "post_recv"
		}
		c.Err(field, CheckTransportMemory(s.Window, s.Sends, s.PostRecv, sizes))
	}
	c.Err("op_timeout", CheckDuration(s.OpTimeout.D(), "have no operation timeout"))
	s.opts = app.TransportOptions{
		Role: s.Role, LocalIP: ip, Window: s.Window, Sizes: sizes, RegionLen: s.RegionSize,
		Conns: s.Conns, PullEvery: s.PullEvery, Count: s.Count,
		CongestionTarget: s.TargetDelay.D(), MinCwnd: s.MinCwnd, MinRTO: s.MinRTO.D(), Seed: s.Seed, RTWindow: s.PSNWindow,
		IOI: ioi.Config{Mode: mode}, OpTimeout: s.OpTimeout.D(), Sends: s.Sends, PostRecv: s.PostRecv, GlobalQPNs: s.GlobalQPNs,
	}
	c.KeepFrames(TransportFrames * max(len(s.Lcores), 1))
	s.checkShards(c)
	mcsqInit := s.checkMCSQ(c, sizes, sizesField)
	if s.Role != "initiator" {
		for _, f := range []struct{ field, v string }{{"peer", s.Peer}, {"peer_mac", s.PeerMAC}, {"peer_ip", s.PeerIP}, {"region_key", s.RegionKey}} {
			if f.v != "" {
				c.Errorf(f.field, "only an initiator has a peer: remove it from the target")
			}
		}
		if s.Sends != 0 {
			c.Errorf("sends", "only an initiator posts Sends: a target keeps receive WQEs posted (post_recv)")
		}
		if s.OpTimeout != 0 {
			c.Errorf("op_timeout", "only an initiator's operations time out: remove it from the target")
		}
		return
	}
	if s.PostRecv != 0 {
		c.Errorf("post_recv", "only a target posts receive WQEs: give the initiator sends, its target post_recv")
	}
	if s.Peer != "" {
		if s.PeerMAC != "" || s.PeerIP != "" || s.RegionKey != "" {
			c.Errorf("peer", "give either peer (a target stage of this file) or peer_mac, peer_ip and region_key, not both")
		}
		p := c.Stage(s.Peer)
		t, ok := stageSpec[*Transport](p)
		if !ok || t.Role != "target" {
			c.Errorf("peer", "%q is not a transport target stage of this file: name one (its name key), or give peer_mac, peer_ip and region_key", s.Peer)
			return
		}
		// The target sizes its region for its own window and sizes; this
		// initiator's must fit in it.
		if sizes != nil && !mcsqInit {
			need := txnload.TargetMemoryLenFor(s.Window, sizes, len(s.Lcores))
			tsizes, terr := ParseByteSizes(t.sizeList(), 16, txn.MaxMessage)
			tw := t.Window
			if tw == 0 {
				tw = 32 // its default: it may be checked after this stage
			}
			if terr == nil && tw <= 4096 {
				have := max(txnload.TargetMemoryLenFor(tw, tsizes, len(t.Lcores)), t.RegionSize)
				if need > have {
					c.Errorf("window", "%d with sizes %v needs a %d B region at the target, and target %q registers %d B: give the target the same window and sizes, or a region_size of %d", s.Window, list, need, s.Peer, have, need)
				}
			}
			// A Send lands in a WQE the target posted, sized for its
			// own sizes: both sides must use the same.
			if s.Sends > 0 && terr == nil && !slices.Equal(sizes, tsizes) {
				c.Errorf("sends", "target %q uses sizes %v and this initiator %v: Sends need the same sizes on both sides", s.Peer, t.sizeList(), list)
			}
		}
		if s.Sends > 0 && t.PostRecv == 0 && !mcsqInit {
			c.Errorf("sends", "target %q posts no receive WQEs, so every Send would wait: give it post_recv (e.g. 32)", s.Peer)
		}
		if s.GlobalQPNs != t.GlobalQPNs && !mcsqInit {
			c.Errorf("global_qpns", "%v here and %v at target %q: global QP numbers change the wire, so set the same on both ends", s.GlobalQPNs, t.GlobalQPNs, s.Peer)
		}
		return
	}
	mac, err := net.ParseMAC(s.PeerMAC)
	if err != nil || len(mac) != 6 {
		c.Errorf("peer_mac", "%q: give the target's Ethernet MAC, e.g. 02:70:67:00:01:06 (or peer: a target stage of this file)", s.PeerMAC)
	}
	pip, err := netip.ParseAddr(s.PeerIP)
	if err != nil || !pip.Is4() {
		c.Errorf("peer_ip", "%q: give the target's IPv4 address, e.g. 198.18.0.6", s.PeerIP)
	}
	key, err := strconv.ParseUint(strings.TrimSpace(s.RegionKey), 0, 32)
	if err != nil {
		c.Errorf("region_key", "%q: give the target's region key from its READY line, e.g. 0x10001", s.RegionKey)
	}
	if len(mac) == 6 {
		s.opts.Peer = rt.PeerAddr{MAC: [6]byte(mac), IP: pip}
	}
	s.opts.RegionKey = uint32(key)
}

// Needs implements Needer: an initiator needs its in-process target.
func (s *Transport) Needs() []string {
	if s.Peer == "" {
		return nil
	}
	return []string{s.Peer}
}

// stageSpec returns p's spec as a T.
func stageSpec[T Stage](p *Placed) (T, bool) {
	var zero T
	if p == nil {
		return zero, false
	}
	t, ok := p.Spec.(T)
	return t, ok
}

// Build implements Stage.
func (s *Transport) Build(b *Builder) (Running, error) {
	o := s.opts
	o.Port, o.Loop = b.Port(s.Port), b.Loop
	if s.Peer != "" {
		peer, ok := b.Built(s.Peer).(transportPeer)
		if !ok {
			return nil, fmt.Errorf("peer %q was not built before this initiator", s.Peer)
		}
		mac, ip, region := peer.peer()
		o.Peer = rt.PeerAddr{MAC: [6]byte(mac), IP: ip}
		o.RegionKey, o.RegionLen = region.Key, region.Len
	}
	if len(s.Lcores) > 1 {
		return s.buildSharded(b, o)
	}
	if s.Targets > 0 {
		return s.buildMCSQ(b, o)
	}
	t, err := b.Pipeline.AddTransport(o)
	if err != nil {
		return nil, err
	}
	return &transportRun{t: t, o: o, mac: b.Pipeline.Port(o.Port).Info().MAC, ip: o.LocalIP}, nil
}

// peer implements transportPeer.
func (r *transportRun) peer() (net.HardwareAddr, netip.Addr, txn.Region) {
	return r.mac, r.ip, r.t.Region
}

type transportRun struct {
	t    *app.Transport
	o    app.TransportOptions
	mac  net.HardwareAddr
	ip   netip.Addr
	last txnload.Stats
	// drained is false when Drain gave up with operations outstanding.
	drained bool
}

// Ready is the line a target prints once its region is registered, for
// an initiator in another process.
func (r *transportRun) Ready() string {
	if r.t.Load != nil {
		return ""
	}
	return fmt.Sprintf("READY key=%#x len=%d mac=%s ip=%s", r.t.Region.Key, r.t.Region.Len, r.mac, r.ip)
}

func (r *transportRun) Live(dt float64) string {
	retx := r.t.Endpoint.Transport().Stats().TxRetransmit
	if r.t.Load == nil {
		st := r.t.Endpoint.Stats()
		return fmt.Sprintf("requests %d, placed %d B, served %d B | retransmits %d", st.RequestsDelivered, st.BytesPlaced, st.BytesServed, retx)
	}
	s := r.t.Load.Stats()
	srtt, cwnd, _ := r.t.Sampler.Sample()
	line := fmt.Sprintf("%.0f ops/s %.3f Gbit/s goodput | retransmits %d | srtt %s cwnd %d", float64(s.Completed-r.last.Completed)/dt, float64(s.Bytes-r.last.Bytes)*8/dt/1e9, retx,
		units.FormatDuration(srtt), cwnd)
	r.last = s
	return line
}

func (r *transportRun) Finite() bool { return r.t.Load != nil && r.o.Count > 0 }

func (r *transportRun) Done() bool {
	if !r.Finite() {
		return true
	}
	s := r.t.Load.Stats()
	return s.Completed+s.Failed >= r.o.Count
}

// Drain stops posting, waits for every outstanding operation, then for the
// connections to close (the target frees its side at once).
func (r *transportRun) Drain(ctx context.Context) string {
	r.drained = true
	if r.t.Load == nil {
		return ""
	}
	r.t.Load.Stop()
	if r.t.Sends != nil {
		r.t.Sends.Stop()
	}
	if !waitCtx(ctx, func() bool { return r.t.Load.Idle() && (r.t.Sends == nil || r.t.Sends.Idle()) }) {
		r.drained = false
		s := r.t.Load.Stats()
		return fmt.Sprintf("%d transport operation(s) still outstanding", s.Posted-s.Completed-s.Failed)
	}
	closeBy, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	waitCtx(closeBy, r.t.Load.Closed)
	return ""
}

func (r *transportRun) Report() ([]string, []Check) {
	ts := r.t.Endpoint.Transport().Stats()
	lines := []string{fmt.Sprintf("transport sent %d data + %d retransmitted (%d early; %d timeouts found spurious), received %d frames (bad checksum %d, duplicate %d, stale %d)",
		ts.TxData, ts.TxRetransmit, ts.TxEarlyRetransmit, ts.SpuriousRTO, ts.RxFrames, ts.RxBadChecksum, ts.RxDuplicate, ts.RxStalePSN)}
	checks := []Check{{ts.Internal == 0, "no internal transport errors"}}
	if r.t.Load == nil {
		st := r.t.Endpoint.Stats()
		pushes, bad := r.t.Pushes()
		lines = append(lines, fmt.Sprintf("target: %d requests delivered, %d B placed, %d B served; %d pushes checked, %d with wrong bytes",
			st.RequestsDelivered, st.BytesPlaced, st.BytesServed, pushes, bad))
		checks = append(checks, Check{bad == 0, fmt.Sprintf("every push's bytes are right (%d wrong)", bad)})
		l, c := r.mechanismReport()
		return append(lines, l...), append(checks, c...)
	}
	ls := r.t.Load.Stats()
	lat := &r.t.Load.Latency
	lines = append(lines,
		fmt.Sprintf("operations: %d posted, %d completed ok, %d failed, %d B", ls.Posted, ls.Completed, ls.Failed, ls.Bytes),
		fmt.Sprintf("latency post→completion: p50 %s p99 %s p999 %s", units.FormatLatency(lat.Quantile(0.5), lat.Count()),
			units.FormatLatency(lat.Quantile(0.99), lat.Count()), units.FormatLatency(lat.Quantile(0.999), lat.Count())))
	checks = append(checks,
		Check{ls.Completed > 0, "operations completed"},
		Check{ls.Failed == 0, fmt.Sprintf("no operation failed (%d%s)", ls.Failed, failureCauses(ls))},
		Check{ls.BadData == 0, fmt.Sprintf("pulled bytes are right (%d wrong)", ls.BadData)},
		Check{ls.OutOfOrder == 0, fmt.Sprintf("ordered connections completed in posting order (%d out of order)", ls.OutOfOrder)},
		Check{r.drained && ls.Posted == ls.Completed+ls.Failed, fmt.Sprintf("every operation completed exactly once (%d posted, %d completed)", ls.Posted, ls.Completed+ls.Failed)},
	)
	l, c := r.mechanismReport()
	return append(lines, l...), append(checks, c...)
}

// mechanismReport is what the seed mechanisms a stage turned on did:
// IOI's messages and packets by phase, the initiator's Sends (delivery
// index), the target's receive WQEs. Nothing when none is on.
func (r *transportRun) mechanismReport() ([]string, []Check) {
	var lines []string
	var checks []Check
	if r.o.IOI.Mode != ioi.ModeOff {
		i := r.t.Endpoint.IOIStats()
		lines = append(lines, fmt.Sprintf("IOI (%v): messages %d wholly in order, %d with IOI, %d sprayed; packets head %d, middle %d, tail %d, in order %d; received in sequence %d, out of sequence %d",
			r.o.IOI.Mode, i.MsgInOrder, i.MsgIOI, i.MsgSprayed, i.PktHead, i.PktMiddle, i.PktTail, i.PktInOrder, i.InSequence, i.OutOfSequence))
	}
	if r.t.Sends != nil {
		ss, is := r.t.Sends.Stats(), r.t.Endpoint.SendStats()
		lines = append(lines, fmt.Sprintf("sends: %d posted, %d completed ok, %d failed; RNR NACKs received %d, index omitted in %d packets",
			ss.Posted, ss.Completed, ss.Failed, is.RNRReceived, is.IndexOmitted))
		checks = append(checks, Check{ss.Completed > 0 && ss.Failed == 0, fmt.Sprintf("Sends completed without error (%d ok, %d failed)", ss.Completed, ss.Failed)})
	}
	if r.t.Recv != nil {
		rs, ts := r.t.Recv.Stats(), r.t.Endpoint.SendStats()
		lines = append(lines, fmt.Sprintf("receives: %d WQEs received ok (%d B), %d in error, %d flushed at close, %d with wrong bytes; placed %d packets direct, %d through an element; RNR NACKs sent %d",
			rs.Received, rs.Bytes, rs.RecvFailed, rs.Flushed, rs.BadData, ts.PlacedDirect, ts.PlacedElement, ts.RNRSent))
		checks = append(checks, Check{rs.BadData == 0 && rs.RecvFailed == 0, fmt.Sprintf("every received WQE holds its Send's bytes (%d wrong, %d in error)", rs.BadData, rs.RecvFailed)})
	}
	return lines, checks
}

func (r *transportRun) Counters() map[string]float64 {
	ts := r.t.Endpoint.Transport().Stats()
	out := map[string]float64{
		"tx_data": float64(ts.TxData), "retransmits": float64(ts.TxRetransmit), "early_retransmits": float64(ts.TxEarlyRetransmit),
		"rx_frames": float64(ts.RxFrames), "rtt_samples": float64(ts.RTTSamples),
	}
	if r.t.Load != nil {
		ls := r.t.Load.Stats()
		out["ops_posted"], out["ops_completed"], out["ops_failed"], out["bytes"] = float64(ls.Posted), float64(ls.Completed), float64(ls.Failed), float64(ls.Bytes)
	}
	srtt, cwnd, _ := r.t.Sampler.Sample() // initiator and target
	out["srtt_seconds"], out["cwnd_packets"] = srtt.Seconds(), float64(cwnd)
	return out
}

// Endpoint returns the built endpoint (metrics).
func (r *transportRun) Endpoint() *app.Transport { return r.t }

// failureCauses names why operations failed: ": N refused: no region
// under the key; ..." ("" when none did).
func failureCauses(ls txnload.Stats) string {
	var why []string
	for _, c := range []struct {
		n    uint64
		what string
	}{
		{ls.RefusedUnregistered, "refused: no region under the key (region_key must be the target's READY key)"},
		{ls.RefusedAccess, "refused: the region does not allow the access"},
		{ls.RefusedTooSmall, "refused: the region is too small (give the target the initiator's window and sizes, or a larger region_size)"},
		{ls.RefusedOther, "refused by the target without a reason"},
		{ls.Abandoned, "a packet ran out of retries"},
		{ls.ConnFailed, "the connection failed or closed"},
	} {
		if c.n > 0 {
			why = append(why, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(why) == 0 {
		return ""
	}
	return ": " + strings.Join(why, "; ")
}

// sizeList is the message sizes as given: msg_size, or sizes (default
// [64KiB]), whether or not Check ran.
func (s *Transport) sizeList() []string {
	if s.MsgSize != "" {
		return []string{s.MsgSize}
	}
	return orDefault(s.Sizes)
}

// orDefault returns sizes, or the default [64KiB] when none are given.
func orDefault(sizes []string) []string {
	if len(sizes) == 0 {
		return []string{"64KiB"}
	}
	return sizes
}
