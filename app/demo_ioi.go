package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// DemoProfile is the transport demo's default fabric: four paths, frames
// IOI sprays dealt round robin, IOI's in-order ones on their flow's path,
// with a little loss and reordering. The paths share one delay and have no
// capacity of their own here: with unequal delays or per-path rate limits
// the demo's poll loops, on a shared machine, left operations undone at
// the end of the 5 s drain (retransmissions of pull data multiplied), a
// transport matter this change leaves alone; `peregrine bench ioi` and
// the veth test run IOI over paths with their own capacity and delays.
const DemoProfile = "loss=0.5%,reorder=1%/50us,delay=20us,paths=4"

// demoIOI is the IOI configuration of the demo's endpoints.
func demoIOI(o *TransportDemoOptions) ioi.Config {
	if o.IOI != nil {
		return *o.IOI
	}
	return ioi.Config{Mode: ioi.ModeIOI}
}

// IOILines describes what IOI did in the demo, for its summary: the
// messages each side sent by mode, their packets by phase, the counters'
// peaks, the waits for UPC == 0 and the threshold, what the receivers
// made of the in-order packets, and each fabric path's load.
func (d *TransportDemo) IOILines() []string {
	i, t := d.Initiator.IOIStats(), d.Target.IOIStats()
	fs := d.Fabric.Stats()
	lines := []string{
		fmt.Sprintf("IOI: messages %d wholly in order, %d with IOI (%d stayed in order at their first response), %d sprayed; packets head %d, middle (sprayed) %d, tail %d, in order %d",
			i.MsgInOrder+t.MsgInOrder, i.MsgIOI+t.MsgIOI, i.MsgIOIStayed+t.MsgIOIStayed, i.MsgSprayed+t.MsgSprayed,
			i.PktHead+t.PktHead, i.PktMiddle+t.PktMiddle, i.PktTail+t.PktTail, i.PktInOrder+t.PktInOrder),
		fmt.Sprintf("IOI: peak OPC %d, peak UPC %d; last packets held for UPC == 0: %d; threshold now %d B (RTT %v, %.2f Gbit/s effective)",
			max(i.PeakOPC, t.PeakOPC), max(i.PeakUPC, t.PeakUPC), i.UPCWaits+t.UPCWaits, i.Threshold,
			time.Duration(i.RTT).Round(time.Microsecond), float64(i.Bandwidth)*8/1e9),
		fmt.Sprintf("IOI receive: in-order packets handed over in sequence %d, out of sequence %d (placed, handed over in their turn; %d too far ahead, refused and resent), forged %d, stale %d, unknown message %d",
			i.InSequence+t.InSequence, i.OutOfSequence+t.OutOfSequence, i.Refused+t.Refused, i.Forged+t.Forged, i.Stale+t.Stale, i.Unknown+t.Unknown),
	}
	var paths []string
	for k, p := range fs.AtoB.PathDetail {
		paths = append(paths, fmt.Sprintf("#%d %d frames %.1f MB peak queue %d drops %d", k, p.Frames, float64(p.Bytes)/1e6, p.QueuePeak, p.Drops))
	}
	if len(paths) > 0 {
		lines = append(lines, "fabric paths initiator→target: "+strings.Join(paths, "; "))
	}
	return lines
}

// IOIStats sums both endpoints' IOI counters.
func (d *TransportDemo) IOIStats() (initiator, target txn.IOIStats) {
	return d.Initiator.IOIStats(), d.Target.IOIStats()
}
