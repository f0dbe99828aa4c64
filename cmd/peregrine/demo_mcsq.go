package main

import (
	"fmt"
	"io"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/sched/mcsq"
)

// mcsqDemoSummary prints the MCSQ part of the transport demo and returns
// its checks.
func mcsqDemoSummary(out io.Writer, d *app.MCSQDemo, drained bool) []check {
	s := d.Stats()
	dq, rq := d.DCQ.Stats(), d.RCQ.Stats()
	dp, rp := d.DC.Stats(), d.RC.Stats()
	where := "in memory"
	if d.OverVeth() {
		in, back, drops := d.Bridged()
		where = fmt.Sprintf("across a veth pair (gen namespace to sink namespace: %d frames in, %d back, %d dropped)", in, back, drops)
	}
	fmt.Fprintf(out, "  mcsq: %d WRs posted by client goroutines through a DC MCSQ (%d DC SQs, ordered CQ) and an RC MCSQ (%d QPs, unordered CQ) to %d hosts on a switch %s: %d ok, %d failed\n",
		s.Posted, d.DC.SQs(), d.RC.SQs(), len(d.Hosts), where, s.OK, s.Failed)
	fmt.Fprintf(out, "  mcsq SQs: %d binds (%d WRs found theirs bound), DC connects %d / disconnects %d (0-RTT: data right behind the connect), head-of-line waits: no free SQ %d, SQ full %d (%.1f ms), %d WRs placed past a waiting head\n",
		dp.Binds+rp.Binds, dp.BoundHits+rp.BoundHits, dp.DCConnects, dp.DCDisconnects, dq.HOLNoSQ+rq.HOLNoSQ, dq.HOLSQFull+rq.HOLSQFull,
		float64(dq.HOLWaitNs+rq.HOLWaitNs)/1e6, dq.Overtook+rq.Overtook)
	fmt.Fprintf(out, "  mcsq blacklist: %d identifiers added (refused %d, unreachable %d, retries exhausted %d, remote error %d, peer gone %d), %d WRs completed as blacklisted without executing\n",
		dp.BlacklistAdds+rp.BlacklistAdds, dp.Failures[mcsq.CauseRefused]+rp.Failures[mcsq.CauseRefused],
		dp.Failures[mcsq.CauseUnreachable]+rp.Failures[mcsq.CauseUnreachable], dp.Failures[mcsq.CauseRetryExhausted]+rp.Failures[mcsq.CauseRetryExhausted],
		dp.Failures[mcsq.CauseRemoteError]+rp.Failures[mcsq.CauseRemoteError], dp.Failures[mcsq.CausePeerGone]+rp.Failures[mcsq.CausePeerGone],
		dq.Blacklisted+rq.Blacklisted)
	fmt.Fprintf(out, "  mcsq CQEs: %d for %d WRs (ordered DC CQ: %d CQEs, %d WRs folded into a later CQE)\n",
		s.CQEs, s.Covered, dq.CQEs, dq.Coalesced)
	checks := []check{
		coverCheck("mcsq: ", drained, s.Posted, s.Covered, "give --drain more time (e.g. --drain 10s)"),
		{s.OutOfOrder == 0, fmt.Sprintf("mcsq: the ordered CQ released CQEs in posting order (%d out of order)", s.OutOfOrder)},
		{s.WrongFailures == 0, fmt.Sprintf("mcsq: only the refusing host's identifiers failed (%d others)", s.WrongFailures)},
		progress(dp.BlacklistAdds > 0, "mcsq: the refusing host's flows were blacklisted"),
	}
	if d.OverVeth() {
		in, back, _ := d.Bridged()
		checks = append(checks, progress(in > 0 && back > 0 && s.OK > 0, fmt.Sprintf("mcsq: WRs completed over the veth pair (%d frames each way at least)", min(in, back))))
	}
	return checks
}

// mcsqDemoVeth adds the MCSQ part's veth pair to a --veth topology and its
// two ends to the pipeline's ports.
func mcsqDemoVeth(topo *app.VethTopology, opts *app.Options) (*app.MCSQDemoVeth, error) {
	pair, err := topo.AddMCSQPair()
	if err != nil {
		return nil, fmt.Errorf("--veth: the MCSQ's veth pair: %w", err)
	}
	opts.Ports = append(opts.Ports, pair.InitiatorSpec, pair.TargetSpec)
	n := len(opts.Ports)
	return &app.MCSQDemoVeth{InitiatorPort: n - 2, TargetPort: n - 1, InitiatorIP: pair.InitiatorIP, TargetMAC: pair.TargetMAC}, nil
}
