package config

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
	"github.com/peregrine-net/peregrine/internal/units"
)

// Forwarder is testpmd's forwarding modes between one or two ports
// (app.AddForwarders): a stage per queue, all on the pipeline's lcore.
type Forwarder struct {
	// Ports are one port (frames go back out the way they came) or two
	// (each one's frames leave on the other).
	Ports []string `yaml:"ports"`
	// Mode is io (default), mac, macswap, rxonly or txonly.
	Mode string `yaml:"mode"`
	// Burst is frames per burst (default 32).
	Burst int `yaml:"burst" default:"32"`
	// PeerMAC is the destination MAC written in mac mode.
	PeerMAC string `yaml:"peer_mac"`
	// Size, Rate and Flows shape txonly's frames (as fwd --size, --rate,
	// --flows).
	Size  string `yaml:"size"`
	Rate  string `yaml:"rate"`
	Flows int    `yaml:"flows" default:"1"`

	opts app.ForwarderOptions
}

// Check implements Stage.
func (s *Forwarder) Check(c *Checker) {
	if n := len(s.Ports); n < 1 || n > 2 {
		c.Errorf("ports", "give one or two ports (got %d), e.g. ports: [p0, p1]", n)
	}
	for i, p := range s.Ports {
		c.Polls(fmt.Sprintf("ports[%d]", i), p)
	}
	if len(s.Ports) == 2 && s.Ports[0] == s.Ports[1] {
		c.Errorf("ports", "%q is given twice: give two different ports, or one to send frames back out the way they came", s.Ports[0])
	}
	defaults(&s.Mode, "io", &s.Burst, &s.Flows)
	c.Err("burst", CheckRange(s.Burst, 1, MaxBurst))
	c.Err("flows", CheckRange(s.Flows, 1, MaxFlows))
	s.opts = app.ForwarderOptions{Mode: s.Mode, Burst: s.Burst, Flows: s.Flows}
	if err := app.ValidateForwarders(s.opts); err != nil {
		c.Err("mode", fmt.Errorf("%q: %w", s.Mode, unwrapField(err)))
	}
	if s.PeerMAC != "" {
		mac, err := net.ParseMAC(s.PeerMAC)
		if err != nil {
			c.Errorf("peer_mac", "%q: %v (e.g. 02:70:67:00:01:06)", s.PeerMAC, err)
		}
		s.opts.PeerMAC = mac
	} else if s.Mode == "mac" {
		c.Errorf("peer_mac", "missing: mac mode writes it as each frame's destination, e.g. peer_mac: 02:70:67:00:01:06")
	}
	if s.Mode == "txonly" {
		s.opts.Sizes, s.opts.Rate = checkTraffic(c, s.Size, s.Rate)
	}
}

// Build implements Stage.
func (s *Forwarder) Build(b *Builder) (Running, error) {
	o := s.opts
	o.Loops = []int{b.Loop}
	for _, p := range s.Ports {
		o.Ports = append(o.Ports, b.Port(p))
	}
	f, err := b.Pipeline.AddForwarders(o)
	if err != nil {
		return nil, err
	}
	return &forwarderRun{f: f, txonly: s.Mode == "txonly"}, nil
}

type forwarderRun struct {
	base
	f      *app.Forwarders
	txonly bool
	last   uint64
}

func (r *forwarderRun) moved() uint64 {
	var n uint64
	for _, st := range r.f.Stages {
		switch x := st.(type) {
		case *fwd.Forwarder:
			n += x.Stats().Tx
		case *traffic.Generator:
			n += x.Stats().Sent
		}
	}
	return n
}

func (r *forwarderRun) Live(dt float64) string {
	n := r.moved()
	line := fmt.Sprintf("%.3f Mpps, dropped %d", float64(n-r.last)/dt/1e6, r.f.Dropped())
	r.last = n
	return line
}

func (r *forwarderRun) Drain(context.Context) string {
	for _, st := range r.f.Stages {
		if g, ok := st.(*traffic.Generator); ok {
			g.StopSending()
		}
	}
	return ""
}

func (r *forwarderRun) Report() ([]string, []Check) {
	return []string{fmt.Sprintf("%d stage(s) sent %d frames, dropped %d (output refused)", len(r.f.Stages), r.moved(), r.f.Dropped())}, nil
}

func (r *forwarderRun) Counters() map[string]float64 {
	return map[string]float64{"frames": float64(r.moved()), "dropped": float64(r.f.Dropped())}
}

// Generator sends stamped traffic on every queue of a port
// (app.AddGenerators), all on the pipeline's lcore.
type Generator struct {
	Port  string `yaml:"port"`
	Burst int    `yaml:"burst" default:"32"`
	// Size is N, MIN-MAX or imix (default 64); Rate per queue, e.g.
	// 1mpps, 10gbit or max (default).
	Size  string `yaml:"size"`
	Rate  string `yaml:"rate"`
	Flows int    `yaml:"flows" default:"1"`
	// Count ends each queue's generator after this many frames (0: no
	// end).
	Count uint64 `yaml:"count"`
	// SrcMAC, DstMAC, SrcIP and DstIP (IPv4 or IPv6, or a range
	// LOW-HIGH walked one address per frame), SrcPort (flow 0's UDP
	// source port, default 10000; flow i sends from it + i), DstPort (a
	// port or a range, default 9) and VLAN (an 802.1Q ID; 0, the
	// default, sends untagged frames) set the frames' headers, as gen's
	// --src-mac … --vlan do (CheckAddresses).
	SrcMAC  string `yaml:"src_mac"`
	DstMAC  string `yaml:"dst_mac"`
	SrcIP   string `yaml:"src_ip"`
	DstIP   string `yaml:"dst_ip"`
	SrcPort int    `yaml:"src_port" default:"10000"`
	DstPort string `yaml:"dst_port"`
	VLAN    int    `yaml:"vlan"`

	opts app.GeneratorsOptions
}

// Check implements Stage.
func (s *Generator) Check(c *Checker) {
	c.Port("port", s.Port)
	var mode string
	defaults(&mode, "", &s.Burst, &s.Flows)
	c.Err("burst", CheckRange(s.Burst, 1, MaxBurst))
	c.Err("flows", CheckRange(s.Flows, 1, MaxFlows))
	sizes, rate := checkTraffic(c, s.Size, s.Rate)
	addr, srcMAC, dstMAC := CheckAddresses(Addresses{SrcMAC: s.SrcMAC, DstMAC: s.DstMAC, SrcIP: s.SrcIP, DstIP: s.DstIP,
		SrcPort: s.SrcPort, DstPort: s.DstPort, VLAN: s.VLAN}, s.Flows, func(key string) string { return key }, c.Err)
	if sizes.Max() > 0 {
		c.Err("size", CheckFrameFits(orSize(s.Size), sizes, addr))
	}
	s.opts = app.GeneratorsOptions{Burst: s.Burst, Sizes: sizes, Flows: s.Flows, Rate: rate, Count: s.Count,
		SrcMAC: srcMAC, DstMAC: dstMAC, Addressing: addr}
}

// Build implements Stage.
func (s *Generator) Build(b *Builder) (Running, error) {
	o := s.opts
	o.Port, o.Loops = b.Port(s.Port), []int{b.Loop}
	g, err := b.Pipeline.AddGenerators(o)
	if err != nil {
		return nil, err
	}
	return &generatorRun{g: g, finite: s.Count > 0}, nil
}

type generatorRun struct {
	base
	g      *app.Generators
	finite bool
	last   traffic.GeneratorStats
}

func (r *generatorRun) Live(dt float64) string {
	st := r.g.Stats()
	line := fmt.Sprintf("%.3f Mpps %.3f Gbit/s", float64(st.Sent-r.last.Sent)/dt/1e6, float64(st.Bytes-r.last.Bytes)*8/dt/1e9)
	r.last = st
	return line
}

func (r *generatorRun) Finite() bool { return r.finite }
func (r *generatorRun) Done() bool   { return r.g.Done() }

func (r *generatorRun) Drain(ctx context.Context) string {
	for _, g := range r.g.Gens {
		g.StopSending()
	}
	if !waitCtx(ctx, r.g.Done) {
		return "generator frames not yet handed to the port"
	}
	return ""
}

func (r *generatorRun) Report() ([]string, []Check) {
	st := r.g.Stats()
	return []string{fmt.Sprintf("generated %d frames, %d bytes", st.Sent, st.Bytes)}, nil
}

func (r *generatorRun) Counters() map[string]float64 {
	st := r.g.Stats()
	return map[string]float64{"frames": float64(st.Sent), "bytes": float64(st.Bytes), "no_buffer": float64(st.NoBuf)}
}

// Sink receives and measures stamped traffic on every queue of a port
// (app.AddSinks), all on the pipeline's lcore.
type Sink struct {
	Port  string `yaml:"port"`
	Burst int    `yaml:"burst" default:"32"`
	// Flows is the sender's flow count (default 1).
	Flows int `yaml:"flows" default:"1"`
	// Expect is how many frames must arrive: the run ends once they have
	// and fails if they do not (0: no expectation).
	Expect uint64 `yaml:"expect"`
	// SrcPort is the sender's flow 0 UDP source port (its src_port,
	// default 10000), as gen --rx --src-port.
	SrcPort int `yaml:"src_port" default:"10000"`
}

// Check implements Stage.
func (s *Sink) Check(c *Checker) {
	c.Polls("port", s.Port)
	var mode string
	defaults(&mode, "", &s.Burst, &s.Flows)
	c.Err("burst", CheckRange(s.Burst, 1, MaxBurst))
	c.Err("flows", CheckRange(s.Flows, 1, MaxFlows))
	CheckAddresses(Addresses{SrcPort: s.SrcPort}, s.Flows, func(key string) string { return key }, c.Err)
}

// Build implements Stage.
func (s *Sink) Build(b *Builder) (Running, error) {
	sk, err := b.Pipeline.AddSinks(app.SinksOptions{Port: b.Port(s.Port), Burst: s.Burst, Flows: s.Flows, Latency: true, Loops: []int{b.Loop},
		SrcPort: uint16(s.SrcPort)})
	if err != nil {
		return nil, err
	}
	return &sinkRun{s: sk, expect: s.Expect}, nil
}

type sinkRun struct {
	base
	s      *app.Sinks
	expect uint64
	last   uint64
}

func (r *sinkRun) Live(dt float64) string {
	n := r.s.Frames()
	line := fmt.Sprintf("%.3f Mpps", float64(n-r.last)/dt/1e6)
	r.last = n
	return line
}

func (r *sinkRun) Finite() bool { return r.expect > 0 }
func (r *sinkRun) Done() bool   { return r.s.Frames() >= r.expect }

func (r *sinkRun) Drain(ctx context.Context) string {
	if r.expect == 0 {
		return ""
	}
	if !waitCtx(ctx, r.Done) {
		return fmt.Sprintf("%d of %d expected frames had not arrived", r.expect-min(r.expect, r.s.Frames()), r.expect)
	}
	return ""
}

func (r *sinkRun) Report() ([]string, []Check) {
	st, lat := r.s.Stats()
	lines := []string{
		fmt.Sprintf("received %d stamped frames, in order %d, gaps %d, late %d, foreign %d", st.Received, st.InOrder, st.Gaps, st.Late, st.Foreign),
		fmt.Sprintf("one-way latency p50 %s p99 %s p999 %s", units.FormatLatency(lat.Quantile(0.5), lat.Count()),
			units.FormatLatency(lat.Quantile(0.99), lat.Count()), units.FormatLatency(lat.Quantile(0.999), lat.Count())),
	}
	var checks []Check
	if r.expect > 0 {
		checks = append(checks, Check{st.Received == r.expect, fmt.Sprintf("every expected frame arrived (%d of %d)", st.Received, r.expect)})
	}
	return lines, checks
}

func (r *sinkRun) Counters() map[string]float64 {
	st, _ := r.s.Stats()
	return map[string]float64{"frames": float64(r.s.Frames()), "bytes": float64(st.Bytes), "gaps": float64(st.Gaps), "late": float64(st.Late), "foreign": float64(st.Foreign)}
}

// Fabric is the impairment and multipath middlebox between two ports
// (app.AddFabric).
type Fabric struct {
	A string `yaml:"a"`
	B string `yaml:"b"`
	// Profile applies to both directions unless AtoB or BtoA says
	// otherwise (syntax: fabric.ProfileSyntax).
	Profile string `yaml:"profile"`
	AtoB    string `yaml:"a_to_b"`
	BtoA    string `yaml:"b_to_a"`
	Seed    uint64 `yaml:"seed"`
	// UDPPort is the transport's UDP port, for the in-order flag (default
	// 5140; 0 in the file means the default).
	UDPPort int `yaml:"udp_port" default:"5140"`

	ab, ba fabric.Profile
}

// Check implements Stage.
func (s *Fabric) Check(c *Checker) {
	c.Polls("a", s.A)
	c.Polls("b", s.B)
	if s.A != "" && s.A == s.B {
		c.Errorf("b", "%q is port a too: the fabric joins two different ports", s.B)
	}
	prof := func(field, v string) fabric.Profile {
		p, err := fabric.ParseProfile(v)
		if err != nil {
			c.Errorf(field, "%q: %w", v, err)
		}
		return p
	}
	both := prof("profile", s.Profile)
	s.ab, s.ba = both, both
	if s.AtoB != "" {
		s.ab = prof("a_to_b", s.AtoB)
	}
	if s.BtoA != "" {
		s.ba = prof("b_to_a", s.BtoA)
	}
	if s.UDPPort == 0 {
		s.UDPPort = wire.DefaultPort
	}
	c.Err("udp_port", CheckRange(s.UDPPort, 1, 65535))
	c.KeepFrames(TransportFrames)
}

// Build implements Stage.
func (s *Fabric) Build(b *Builder) (Running, error) {
	fab, err := b.Pipeline.AddFabric(app.FabricOptions{A: b.Port(s.A), B: b.Port(s.B), AtoB: s.ab, BtoA: s.ba, Seed: s.Seed, TransportPort: uint16(s.UDPPort), Loop: b.Loop})
	if err != nil {
		return nil, err
	}
	return &fabricRun{f: fab}, nil
}

type fabricRun struct {
	base
	f    *fabric.Fabric
	last fabric.Stats
}

func (r *fabricRun) Live(dt float64) string {
	st := r.f.Stats()
	line := fmt.Sprintf("A→B %d/s lost %d | B→A %d/s lost %d",
		int(float64(st.AtoB.Sent-r.last.AtoB.Sent)/dt), st.AtoB.LossRandom+st.AtoB.LossBurst,
		int(float64(st.BtoA.Sent-r.last.BtoA.Sent)/dt), st.BtoA.LossRandom+st.BtoA.LossBurst)
	r.last = st
	return line
}

func (r *fabricRun) Report() ([]string, []Check) {
	st := r.f.Stats()
	dir := func(d fabric.DirStats) string {
		return fmt.Sprintf("received %d sent %d | lost random %d burst %d | queue full %d limit full %d ttl expired %d | duplicated %d corrupted %d reordered %d",
			d.Received, d.Sent, d.LossRandom, d.LossBurst, d.QueueFull, d.LimitFull, d.TTLExpired, d.Duplicated, d.Corrupted, d.Reordered)
	}
	return []string{"A→B " + dir(st.AtoB), "B→A " + dir(st.BtoA)}, nil
}

func (r *fabricRun) Counters() map[string]float64 {
	st := r.f.Stats()
	out := map[string]float64{}
	for name, d := range map[string]fabric.DirStats{"a_to_b": st.AtoB, "b_to_a": st.BtoA} {
		out[name+"_received"] = float64(d.Received)
		out[name+"_sent"] = float64(d.Sent)
		for reason, n := range FabricDrops(d) {
			out[name+"_drop_"+reason] = float64(n)
		}
	}
	return out
}

// FabricDrops returns a direction's drops by reason.
func FabricDrops(d fabric.DirStats) map[string]uint64 {
	return map[string]uint64{
		"loss_random": d.LossRandom, "loss_burst": d.LossBurst, "queue_full": d.QueueFull,
		"limit_full": d.LimitFull, "ttl_expired": d.TTLExpired, "link_down": d.LinkDown, "link_cut": d.LinkCut,
		"path_queue_full": d.PathQueueFull, "path_loss": d.PathLossDrops, "path_down": d.PathDownDrops,
	}
}

// base gives a Running the methods most stages do not need.
type base struct{}

func (base) Finite() bool                 { return false }
func (base) Done() bool                   { return true }
func (base) Drain(context.Context) string { return "" }

// defaults fills a mode, burst and flow count left out.
func defaults(mode *string, def string, burst, flows *int) {
	if *mode == "" {
		*mode = def
	}
	if *burst == 0 {
		*burst = 32
	}
	if *flows == 0 {
		*flows = 1
	}
}

// orSize is a generator's size as used: 64 when left out.
func orSize(size string) string {
	if size == "" {
		return "64"
	}
	return size
}

// checkTraffic reads a generator's size and rate.
func checkTraffic(c *Checker, size, rate string) (traffic.Sizes, float64) {
	size = orSize(size)
	sizes, err := traffic.ParseSizes(size, traffic.MaxFrame)
	if err != nil {
		c.Errorf("size", "%q: %w", size, err)
		return sizes, 0
	}
	r, err := ParseRate(rate, sizes.Mean())
	if err != nil {
		c.Errorf("rate", "%q: %w (or max)", rate, err)
	}
	return sizes, r
}

// unwrapField returns an app.FieldError's cause.
func unwrapField(err error) error {
	if fe, ok := err.(*app.FieldError); ok {
		return fe.Err
	}
	return err
}

// waitCtx polls cond every millisecond until it holds (true) or ctx ends
// (false).
func waitCtx(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return cond()
		case <-t.C:
		}
	}
	return true
}
