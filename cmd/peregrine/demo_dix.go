package main

import (
	"fmt"
	"io"

	"github.com/peregrine-net/peregrine/app"
)

// sendSummary prints the demo's two-sided part: Sends placed by delivery
// index into the target's posted WQEs, and returns its checks.
func sendSummary(out io.Writer, d *app.TransportDemo) []check {
	if d.Sends == nil {
		return nil
	}
	ss := d.Sends.Stats()
	is, ts := d.Initiator.SendStats(), d.Target.SendStats()
	fmt.Fprintf(out, "  sends (unordered, 16-bit delivery index): %d posted, %d completed ok, %d failed; target: %d WQEs received ok (%d MiB), %d in error, %d flushed at close\n",
		ss.Posted, ss.Completed, ss.Failed, ss.Received, ss.Bytes>>20, ss.RecvFailed, ss.Flushed)
	fmt.Fprintf(out, "  placement: %d packets direct, %d through an element (%d Sends bound out of order, peak %d elements); RNR NACKs %d sent, %d received; %d held, %d stale, %d forged\n",
		ts.PlacedDirect, ts.PlacedElement, ts.BindsElement, ts.PeakElements, ts.RNRSent, is.RNRReceived, ts.Held, ts.Stale, ts.Forged)
	return []check{
		progress(ss.Completed > 0, fmt.Sprintf("Sends completed (%d)", ss.Completed)),
		{ss.Failed == 0 && ss.RecvFailed == 0, fmt.Sprintf("Sends completed without error at both ends (%d ok, %d failed, %d receive errors)", ss.Completed, ss.Failed, ss.RecvFailed)},
		{ss.BadData == 0 && ss.Received >= ss.Completed, fmt.Sprintf("every Send landed byte-exact in the WQE its order names (%d wrong, %d received for %d completed)", ss.BadData, ss.Received, ss.Completed)},
		{ts.BytesCopied == ts.BytesPlaced, fmt.Sprintf("one copy per byte placed (%d copied, %d placed)", ts.BytesCopied, ts.BytesPlaced)},
	}
}
