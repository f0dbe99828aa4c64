package main

import (
	"fmt"
	"io"

	"github.com/peregrine-net/peregrine/app"
)

// transportSendChecks prints an initiator's Send figures (--sends) and
// returns their checks.
func transportSendChecks(out io.Writer, tp *app.Transport) []check {
	if tp.Sends == nil {
		return nil
	}
	ss, is := tp.Sends.Stats(), tp.Endpoint.SendStats()
	fmt.Fprintf(out, "  sends: %d posted, %d completed ok, %d failed; RNR NACKs received %d, index omitted in %d packets\n",
		ss.Posted, ss.Completed, ss.Failed, is.RNRReceived, is.IndexOmitted)
	return []check{{ss.Completed > 0 && ss.Failed == 0, fmt.Sprintf("Sends completed without error (%d ok, %d failed)", ss.Completed, ss.Failed)}}
}

// transportRecvSummary prints a target's receive figures (--post-recv);
// it reports whether every received WQE held its Send's bytes.
func transportRecvSummary(out io.Writer, tp *app.Transport) bool {
	if tp.Recv == nil {
		return true
	}
	rs, ts := tp.Recv.Stats(), tp.Endpoint.SendStats()
	fmt.Fprintf(out, "  receives: %d WQEs received ok (%d B), %d in error, %d flushed at close, %d with wrong bytes; placement %d packets direct, %d through an element (peak %d elements), RNR NACKs sent %d, refused for an index of another depth %d\n",
		rs.Received, rs.Bytes, rs.RecvFailed, rs.Flushed, rs.BadData, ts.PlacedDirect, ts.PlacedElement, ts.PeakElements, ts.RNRSent, ts.IndexMismatch)
	return rs.BadData == 0 && rs.RecvFailed == 0 && ts.IndexMismatch == 0
}
