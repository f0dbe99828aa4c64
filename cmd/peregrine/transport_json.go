package main

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/txnload"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// transport --json: the target's READY line as a "ready" object, one
// "interval" object per second with the endpoint's cumulative counters,
// and the "summary" object with the totals and every check.

// ready writes the target's READY line as JSON (nothing without --json).
func (j *jsonRun) ready(key uint32, length int, mac net.HardwareAddr, ip netip.Addr) {
	if j == nil {
		return
	}
	jsonEncode(j.w, map[string]any{"type": "ready", "key": key, "len": length, "mac": mac.String(), "ip": ip.String()})
}

// readyRecord is a READY line of run's transport target (app/config's
// text, the same as transport target prints) as transport target --json's
// "ready" object.
func readyRecord(line string) map[string]any {
	var (
		key     uint32
		length  int
		mac, ip string
	)
	if n, _ := fmt.Sscanf(line, "READY key=%v len=%d mac=%s ip=%s", &key, &length, &mac, &ip); n != 4 {
		return map[string]any{"type": "ready", "line": line}
	}
	return map[string]any{"type": "ready", "key": key, "len": length, "mac": mac, "ip": ip}
}

// jsonChecks are checks as the summary object lists them.
func jsonChecks(checks []check) []map[string]any {
	cs := []map[string]any{}
	for _, c := range checks {
		cs = append(cs, map[string]any{"ok": c.ok, "what": c.what})
	}
	return cs
}

// transportCounters are an endpoint's cumulative figures: the transport's
// packets, its workload's operations (an initiator) and its connections'
// RTT and window (s nil: none).
func transportCounters(ep *txn.Endpoint, load *txnload.Load, s *app.ConnSampler) map[string]float64 {
	ts := ep.Transport().Stats()
	c := map[string]float64{
		"tx_data": float64(ts.TxData), "retransmits": float64(ts.TxRetransmit), "early_retransmits": float64(ts.TxEarlyRetransmit),
		"rx_frames": float64(ts.RxFrames), "rtt_samples": float64(ts.RTTSamples),
	}
	if load != nil {
		ls := load.Stats()
		c["ops_posted"], c["ops_completed"], c["ops_failed"], c["bytes"] = float64(ls.Posted), float64(ls.Completed), float64(ls.Failed), float64(ls.Bytes)
	} else {
		st := ep.Stats()
		c["requests_delivered"], c["bytes_placed"], c["bytes_served"] = float64(st.RequestsDelivered), float64(st.BytesPlaced), float64(st.BytesServed)
	}
	if s != nil {
		srtt, cwnd, conns := s.Sample()
		c["srtt_seconds"], c["cwnd_packets"], c["connections"] = srtt.Seconds(), float64(cwnd), float64(conns)
	}
	return c
}

// mcsqCounters are an MCSQ initiator's cumulative figures.
func mcsqCounters(m *app.MCSQInitiator) map[string]float64 {
	c := transportCounters(m.Endpoint, nil, m.Sampler)
	delete(c, "requests_delivered")
	delete(c, "bytes_placed")
	delete(c, "bytes_served")
	s, ps := m.Stats(), m.Pool.Stats()
	c["wrs_posted"], c["wrs_ok"], c["wrs_failed"], c["cqes"] = float64(s.Posted), float64(s.OK), float64(s.Failed), float64(s.CQEs)
	c["dc_connects"], c["dc_disconnects"] = float64(ps.DCConnects), float64(ps.DCDisconnects)
	return c
}
