package config

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/shard"
)

// transportPeer is a built transport target an initiator of the same
// file connects to: its address and region.
type transportPeer interface {
	peer() (net.HardwareAddr, netip.Addr, txn.Region)
}

// checkShards checks Lcores: lcores of the file, none twice, the first
// the stage's own, and nothing a sharded endpoint does not run.
func (s *Transport) checkShards(c *Checker) {
	if len(s.Lcores) == 0 {
		return
	}
	if len(s.Lcores) > shard.MaxShards {
		c.Errorf("lcores", "%d lcores: a transport runs at most %d shards", len(s.Lcores), shard.MaxShards)
		return
	}
	seen := map[string]bool{}
	for i, name := range s.Lcores {
		field := fmt.Sprintf("lcores[%d]", i)
		switch {
		case c.cfg.lcoreIndex(name) < 0:
			c.Errorf(field, "%q is not an lcore of the file (use one of: %s)", name, c.cfg.lcoreNames())
		case seen[name]:
			c.Errorf(field, "%q is named twice: each shard needs a loop of its own", name)
		case i == 0 && c.lcore >= 0 && c.cfg.File.Lcores[c.lcore].Name != name:
			c.Errorf(field, "%q is not the lcore of the pipeline holding the stage (%q): list that one first", name, c.cfg.File.Lcores[c.lcore].Name)
		}
		seen[name] = true
	}
	if len(s.Lcores) > 1 {
		if s.Targets > 0 {
			c.Errorf("lcores", "a sharded initiator posts its own workload: drop targets, or give one lcore")
		}
		if s.GlobalQPNs {
			c.Errorf("lcores", "global_qpns runs on one endpoint: drop it, or give one lcore")
		}
		if s.Role == "initiator" && s.Conns < len(s.Lcores) {
			c.Errorf("conns", "%d for %d shards: give each shard a connection (use %d or more)", s.Conns, len(s.Lcores), len(s.Lcores))
		}
		if s.Count > 0 && s.Count < uint64(len(s.Lcores)) {
			c.Errorf("count", "%d for %d shards: give each shard an operation (use %d or more, or 0)", s.Count, len(s.Lcores), len(s.Lcores))
		}
	}
}

// lcoreIndex is the index of the named lcore, -1 for none.
func (c *Config) lcoreIndex(name string) int {
	for i, l := range c.File.Lcores {
		if l.Name == name {
			return i
		}
	}
	return -1
}

// buildSharded builds the stage's shards, shard i on Lcores[i].
func (s *Transport) buildSharded(b *Builder, o app.TransportOptions) (Running, error) {
	loops := make([]int, len(s.Lcores))
	for i, name := range s.Lcores {
		loops[i] = b.cfg.lcoreIndex(name)
	}
	st, err := b.Pipeline.AddShardedTransport(o, loops)
	if err != nil {
		return nil, err
	}
	r := &shardedRun{st: st, o: o, mac: b.Pipeline.Port(o.Port).Info().MAC, ip: o.LocalIP}
	n := uint64(len(st.Shards))
	for i, sh := range st.Shards {
		so := o // Count is the shard's share, as AddShardedTransport dealt it
		if so.Count = o.Count / n; uint64(i) < o.Count%n {
			so.Count++
		}
		r.shards = append(r.shards, &transportRun{t: sh, o: so, drained: true})
	}
	return r, nil
}

// shardedRun is a sharded transport stage: its shards' figures and their
// sum.
type shardedRun struct {
	st     *app.ShardedTransport
	o      app.TransportOptions
	shards []*transportRun
	mac    net.HardwareAddr
	ip     netip.Addr
}

func (r *shardedRun) peer() (net.HardwareAddr, netip.Addr, txn.Region) {
	return r.mac, r.ip, r.st.Shards[0].Region
}

// Ready is a target's READY line: every shard serves the same key.
func (r *shardedRun) Ready() string {
	if r.o.Role != "target" {
		return ""
	}
	reg := r.st.Shards[0].Region
	return fmt.Sprintf("READY key=%#x len=%d mac=%s ip=%s shards=%d", reg.Key, reg.Len, r.mac, r.ip, len(r.shards))
}

func (r *shardedRun) Live(dt float64) string {
	line := ""
	for i, sh := range r.shards {
		line += fmt.Sprintf("[shard %d] %s ", i, sh.Live(dt))
	}
	return line
}

func (r *shardedRun) Finite() bool { return r.o.Role == "initiator" && r.o.Count > 0 }

func (r *shardedRun) Done() bool {
	for _, sh := range r.shards {
		if !sh.Done() {
			return false
		}
	}
	return true
}

// Drain drains the shards one after another: a shard's drain waits only
// for its own operations, which the others' do not delay.
func (r *shardedRun) Drain(ctx context.Context) string {
	left := ""
	for i, sh := range r.shards {
		if m := sh.Drain(ctx); m != "" {
			left += fmt.Sprintf("shard %d: %s; ", i, m)
		}
	}
	return left
}

// Report gives each shard's lines and checks, prefixed with its number,
// then the sum and what was steered between shards.
func (r *shardedRun) Report() ([]string, []Check) {
	var lines []string
	var checks []Check
	for i, sh := range r.shards {
		l, c := sh.Report()
		for _, x := range l {
			lines = append(lines, fmt.Sprintf("shard %d: %s", i, x))
		}
		for _, x := range c {
			checks = append(checks, Check{x.OK, fmt.Sprintf("shard %d: %s", i, x.What)})
		}
	}
	ts, steer := r.st.TransportStats(), r.st.Steer.Total()
	sum := fmt.Sprintf("sum of %d shards: transport sent %d data + %d retransmitted, received %d frames; steered in software %d of %d (%.4f)",
		len(r.shards), ts.TxData, ts.TxRetransmit, ts.RxFrames, steer.SteeredOut, steer.Received, steer.SteeredFraction())
	if m := r.st.Steer.Missteered(); m != nil {
		sum += fmt.Sprintf("; mis-steered on arrival (XDP, per queue) %v", m)
	}
	if r.o.Role == "initiator" {
		ls := r.st.LoadStats()
		sum += fmt.Sprintf("; operations %d completed ok, %d failed, %d B", ls.Completed, ls.Failed, ls.Bytes)
	} else {
		es := r.st.EndpointStats()
		sum += fmt.Sprintf("; %d requests delivered, %d B placed", es.RequestsDelivered, es.BytesPlaced)
	}
	return append(lines, sum), checks
}

// Counters sums the shards' counters (srtt and cwnd: shard 0's).
func (r *shardedRun) Counters() map[string]float64 {
	out := map[string]float64{}
	for i, sh := range r.shards {
		for k, v := range sh.Counters() {
			if k == "srtt_seconds" || k == "cwnd_packets" {
				if i == 0 {
					out[k] = v
				}
				continue
			}
			out[k] += v
		}
	}
	out["steered_in_software"] = float64(r.st.Steer.Total().SteeredOut)
	for q, v := range r.st.Steer.Missteered() {
		out[fmt.Sprintf("xdp_missteered_queue_%d", q)] = float64(v)
	}
	return out
}
