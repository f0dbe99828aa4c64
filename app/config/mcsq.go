package config

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/metrics"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// The multi-channel send queue's keys of a transport initiator (transport
// initiator --targets N --dc-sqs M): with targets set the initiator is
// app.AddMCSQInitiator's — Posters goroutines post bursts of Burst pushes
// of the one message size to targets DC targets (slices of the peer's
// region) through one ordered MCSQ over dc_sqs DC send queues — instead
// of the conns workload.

// MaxMCSQTargets is the most DC targets one initiator addresses.
const MaxMCSQTargets = 1 << 20

// MaxDCSQs is the largest DC pool: a target accepts 64 connections.
const MaxDCSQs = 60

// checkMCSQ checks the MCSQ keys (targets, dc_sqs, posters, burst) and
// what they exclude; sizes are the parsed message sizes (nil when they
// did not parse). It reports whether the stage is an MCSQ initiator.
func (s *Transport) checkMCSQ(c *Checker, sizes []int, sizesField string) bool {
	if s.Targets == 0 {
		for _, f := range []struct {
			field string
			v     int
		}{{"dc_sqs", s.DCSQs}, {"posters", s.Posters}, {"burst", s.Burst}} {
			if f.v != 0 {
				c.Errorf(f.field, "only an initiator with targets posts through a multi-channel send queue: give targets (e.g. 300), or remove %s", f.field)
			}
		}
		return false
	}
	if s.Role != "initiator" {
		c.Errorf("targets", "only an initiator posts through a multi-channel send queue: remove it from the target (its peer's targets are slices of this target's region)")
		return false
	}
	c.Err("targets", CheckRange(s.Targets, 1, MaxMCSQTargets))
	if s.DCSQs == 0 {
		s.DCSQs = 16
	}
	if err := CheckRange(s.DCSQs, 1, MaxDCSQs); err != nil {
		c.Errorf("dc_sqs", "%v (a target accepts 64 connections)", err)
	}
	if s.Posters == 0 {
		s.Posters = 4
	}
	c.Err("posters", CheckRange(s.Posters, 1, 256))
	if s.Burst == 0 {
		s.Burst = 8
	}
	c.Err("burst", CheckRange(s.Burst, 1, 4096))
	if len(sizes) > 1 {
		c.Errorf(sizesField, "%v: an initiator with targets pushes one message size: give msg_size (e.g. 512)", s.sizeList())
	}
	// What the MCSQ initiator does not do: each key would be silently
	// ignored, so each is an error naming the choice.
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"sends", s.Sends != 0}, {"pull_every", s.PullEvery != 0}, {"op_timeout", s.OpTimeout != 0},
		{"ioi", s.IOI != "" && s.IOI != "off"}, {"global_qpns", s.GlobalQPNs},
		// Set to other than their defaults (Check filled those in):
		// the MCSQ's pool and queue decide what is in flight, and its
		// endpoint keeps the transport's own settings.
		{"window", s.Window != 32}, {"conns", s.Conns != 2}, {"psn_window", s.PSNWindow != 512},
		{"target_delay", s.TargetDelay != Duration(200*time.Microsecond)},
	} {
		if f.set {
			c.Errorf(f.field, "an initiator with targets does not use %s (it posts pushes through the multi-channel send queue): remove it, or remove targets for the conns workload", f.field)
		}
	}
	if s.Peer == "" {
		if s.RegionSize == 0 {
			c.Errorf("region_size", "an initiator with targets needs the target's region length: give region_size (the len= of its READY line)")
		} else if len(sizes) == 1 && sizes[0] > s.RegionSize {
			c.Errorf(sizesField, "%d B is larger than region_size %d: use a message size within the target's region", sizes[0], s.RegionSize)
		}
		return true
	}
	t, ok := stageSpec[*Transport](c.Stage(s.Peer))
	if !ok || t.Role != "target" {
		return true // the peer check reports it
	}
	if t.GlobalQPNs {
		c.Errorf("targets", "target %q runs on global QP numbers and the MCSQ initiator on local ones: remove global_qpns from the target", s.Peer)
	}
	tsizes, err := ParseByteSizes(t.sizeList(), 16, txn.MaxMessage)
	tw := t.Window
	if tw == 0 {
		tw = 32
	}
	if err == nil && tw <= 4096 && len(sizes) == 1 {
		if have := max(txnload.TargetMemoryLen(tw, tsizes), t.RegionSize); sizes[0] > have {
			c.Errorf(sizesField, "%d B is larger than target %q's region (%d B): use a smaller message size, or give the target a region_size of %d", sizes[0], s.Peer, have, sizes[0])
		}
	}
	return true
}

// buildMCSQ adds the MCSQ initiator (app.AddMCSQInitiator) with o's
// endpoint settings; o.Peer and the region are the target's.
func (s *Transport) buildMCSQ(b *Builder, o app.TransportOptions) (Running, error) {
	m, err := b.Pipeline.AddMCSQInitiator(app.MCSQInitiatorOptions{
		Port: o.Port, Loop: o.Loop, LocalIP: o.LocalIP, Peer: o.Peer, RegionKey: o.RegionKey, RegionLen: o.RegionLen,
		Targets: s.Targets, DCSQs: s.DCSQs, Posters: s.Posters, Burst: s.Burst, Size: o.Sizes[0], Count: s.Count,
		MinRTO: o.MinRTO, Seed: o.Seed,
	})
	if err != nil {
		return nil, mcsqField(err)
	}
	return &mcsqRun{m: m, s: s, size: o.Sizes[0]}, nil
}

// mcsqField names the key behind an option AddMCSQInitiator refused.
func mcsqField(err error) error {
	if fe, ok := err.(*app.FieldError); ok {
		key := map[string]string{"Targets": "targets", "DCSQs": "dc_sqs", "Size": "msg_size", "Port": "port"}[fe.Option]
		if key != "" {
			return fmt.Errorf("%s: %w", key, fe.Err)
		}
	}
	return err
}

// CoverCheck is the MCSQ check that every posted WR was covered by
// exactly one CQE. When it fails its text says why — WRs without a CQE, or
// a drain that ended before the queues were seen empty — and what to do:
// more drain names the setting that gives the drain more time (a file's
// run.drain, a flag), and one signal, not two, lets it run to its end.
func CoverCheck(drained bool, posted, covered uint64, moreDrain string) Check {
	what := fmt.Sprintf("every posted WR covered by exactly one CQE (%d posted, %d covered)", posted, covered)
	const signal = "; a second signal (Ctrl-C twice) also cuts the drain short"
	switch {
	case covered > posted:
		what += fmt.Sprintf(": %d CQEs covered WRs never posted, an error of the send queue's accounting (report it with this output)", covered-posted)
	case covered < posted:
		what += fmt.Sprintf(": %d WR(s) had no CQE when the drain ended (the target stopped answering, or the drain was too short): %s%s", posted-covered, moreDrain, signal)
	case !drained:
		what += fmt.Sprintf(": every WR has its CQE, but the drain ended before the send queues were seen empty, so a late CQE could not be ruled out: %s%s", moreDrain, signal)
	}
	return Check{OK: drained && covered == posted, What: what}
}

// mcsqRun is a running MCSQ initiator.
type mcsqRun struct {
	m       *app.MCSQInitiator
	s       *Transport
	size    int
	last    app.MCSQInitiatorStats
	drained bool
}

// Start implements starter: the posters and the CQ reader run once the
// loops do.
func (r *mcsqRun) Start(ctx context.Context) { r.m.Start(ctx) }

func (r *mcsqRun) Live(dt float64) string {
	s, ps := r.m.Stats(), r.m.Pool.Stats()
	line := fmt.Sprintf("%.0f WRs/s | DC connects %d, disconnects %d | retransmits %d", float64(s.Covered-r.last.Covered)/dt,
		ps.DCConnects, ps.DCDisconnects, r.m.Endpoint.Transport().Stats().TxRetransmit)
	r.last = s
	return line
}

func (r *mcsqRun) Finite() bool { return r.s.Count > 0 }

func (r *mcsqRun) Done() bool { return !r.Finite() || r.m.Done() }

// Drain stops the posters and waits for every posted WR's CQE.
func (r *mcsqRun) Drain(ctx context.Context) string {
	timeout := time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), 0)
	}
	r.drained = r.m.Drain(timeout)
	if !r.drained {
		s := r.m.Stats()
		return fmt.Sprintf("%d MCSQ WR(s) without a CQE", s.Posted-min(s.Posted, s.Covered))
	}
	return ""
}

func (r *mcsqRun) Report() ([]string, []Check) {
	s, ps, qs := r.m.Stats(), r.m.Pool.Stats(), r.m.Queue.Stats()
	ts := r.m.Endpoint.Transport().Stats()
	lines := []string{
		fmt.Sprintf("MCSQ: %d WRs to %d targets over %d DC SQs: %d ok, %d failed; CQEs %d (ordered CQ, %d WRs folded into a later CQE)",
			s.Posted, r.s.Targets, r.s.DCSQs, s.OK, s.Failed, s.CQEs, qs.Coalesced),
		fmt.Sprintf("  SQ binds %d (%d WRs found theirs bound), DC connects %d / disconnects %d, head-of-line waits %d; blacklist adds %d",
			ps.Binds, ps.BoundHits, ps.DCConnects, ps.DCDisconnects, qs.HOLNoSQ+qs.HOLSQFull, ps.BlacklistAdds),
		fmt.Sprintf("transport sent %d data + %d retransmitted, received %d frames", ts.TxData, ts.TxRetransmit, ts.RxFrames),
	}
	return lines, []Check{
		{ts.Internal == 0, "no internal transport errors"},
		CoverCheck(r.drained, s.Posted, s.Covered, "give run.drain more time (e.g. drain: 10s)"),
		{s.OK > 0 && s.Failed == 0, fmt.Sprintf("WRs completed, none failed (%d failed)", s.Failed)},
		{s.OutOfOrder == 0, fmt.Sprintf("CQEs in posting order (%d out of order)", s.OutOfOrder)},
	}
}

func (r *mcsqRun) Counters() map[string]float64 {
	s, ps := r.m.Stats(), r.m.Pool.Stats()
	ts := r.m.Endpoint.Transport().Stats()
	return map[string]float64{
		"wrs_posted": float64(s.Posted), "wrs_ok": float64(s.OK), "wrs_failed": float64(s.Failed), "cqes": float64(s.CQEs),
		"dc_connects": float64(ps.DCConnects), "dc_disconnects": float64(ps.DCDisconnects),
		"tx_data": float64(ts.TxData), "retransmits": float64(ts.TxRetransmit), "rx_frames": float64(ts.RxFrames),
		"srtt_seconds": r.srtt().Seconds(), "cwnd_packets": float64(r.cwnd()),
	}
}

func (r *mcsqRun) srtt() time.Duration { s, _, _ := r.m.Sampler.Sample(); return s }
func (r *mcsqRun) cwnd() int           { _, w, _ := r.m.Sampler.Sample(); return w }

// Export implements exporter.
func (r *mcsqRun) Export(name string, reg *metrics.Registry) error {
	return ExportMCSQ(reg, name, r.m, r.size)
}

// ExportMCSQ registers an MCSQ initiator's collectors (run -c and
// transport initiator --targets): its endpoint's transport counters (its
// WRs of size bytes as operations), its connections' RTT and windows, and
// the MCSQ's counters as peregrine_mcsq_*_total{stage=NAME}.
func ExportMCSQ(reg *metrics.Registry, name string, m *app.MCSQInitiator, size int) error {
	return errors.Join(
		reg.Transport(name, func() rt.Stats { return m.Endpoint.Transport().Stats() }, func() (uint64, uint64, uint64) {
			s := m.Stats()
			return s.OK, s.Failed, s.OK * uint64(size)
		}),
		reg.Conns(name, m.Sampler.Sample),
		reg.Stage("mcsq", name, func() map[string]uint64 {
			s, ps := m.Stats(), m.Pool.Stats()
			return map[string]uint64{"wrs_posted": s.Posted, "wrs_ok": s.OK, "wrs_failed": s.Failed, "cqes": s.CQEs,
				"sq_binds": ps.Binds, "dc_connects": ps.DCConnects, "dc_disconnects": ps.DCDisconnects, "blacklist_adds": ps.BlacklistAdds}
		}, nil))
}
