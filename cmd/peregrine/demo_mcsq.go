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
	fmt.Fprintf(out, "  mcsq: %d WRs posted by client goroutines through a DC MCSQ (%d DC SQs, ordered CQ) and an RC MCSQ (%d QPs, unordered CQ) to %d hosts on a switch: %d ok, %d failed\n",
		s.Posted, d.DC.SQs(), d.RC.SQs(), len(d.Hosts), s.OK, s.Failed)
	fmt.Fprintf(out, "  mcsq SQs: %d binds (%d WRs found theirs bound), DC connects %d / disconnects %d (0-RTT: data right behind the connect), head-of-line waits: no free SQ %d, SQ full %d (%.1f ms)\n",
		dp.Binds+rp.Binds, dp.BoundHits+rp.BoundHits, dp.DCConnects, dp.DCDisconnects, dq.HOLNoSQ+rq.HOLNoSQ, dq.HOLSQFull+rq.HOLSQFull,
		float64(dq.HOLWaitNs+rq.HOLWaitNs)/1e6)
	fmt.Fprintf(out, "  mcsq blacklist: %d identifiers added (refused %d, unreachable %d, retries exhausted %d, remote error %d, peer gone %d), %d WRs completed as blacklisted without executing\n",
		dp.BlacklistAdds+rp.BlacklistAdds, dp.Failures[mcsq.CauseRefused]+rp.Failures[mcsq.CauseRefused],
		dp.Failures[mcsq.CauseUnreachable]+rp.Failures[mcsq.CauseUnreachable], dp.Failures[mcsq.CauseRetryExhausted]+rp.Failures[mcsq.CauseRetryExhausted],
		dp.Failures[mcsq.CauseRemoteError]+rp.Failures[mcsq.CauseRemoteError], dp.Failures[mcsq.CausePeerGone]+rp.Failures[mcsq.CausePeerGone],
		dq.Blacklisted+rq.Blacklisted)
	fmt.Fprintf(out, "  mcsq CQEs: %d for %d WRs (ordered DC CQ: %d CQEs, %d WRs folded into a later CQE)\n",
		s.CQEs, s.Covered, dq.CQEs, dq.Coalesced)
	return []check{
		{drained && s.Posted == s.Covered, fmt.Sprintf("mcsq: every posted WR covered by exactly one CQE (%d posted, %d covered)", s.Posted, s.Covered)},
		{s.OutOfOrder == 0, fmt.Sprintf("mcsq: the ordered CQ released CQEs in posting order (%d out of order)", s.OutOfOrder)},
		{s.WrongFailures == 0, fmt.Sprintf("mcsq: only the refusing host's identifiers failed (%d others)", s.WrongFailures)},
		{dp.BlacklistAdds > 0, "mcsq: the refusing host's flows were blacklisted"},
	}
}
