package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/internal/units"
)

// DemoProfile is the transport demo's default fabric, each direction: four
// paths, each a link of its own (1 Gbit/s, its own queue) with its own
// extra delay (0, 2, 5 and 10 µs on top of the 20 µs every frame gets),
// IOI's sprayed frames dealt round robin and its in-order ones on their
// flow's path, with a little loss and reordering on the way in.
const DemoProfile = "loss=0.5%,reorder=1%/50us,delay=20us,paths=4,path-rate=1gbit,path-delay=0/2us/5us/10us"

// DemoSizes is the transport demo's message mix: unsolicited pushes of
// 512 B and 4 KiB, solicited ones (and pulls) of 64 KiB, 256 KiB and 1 MiB,
// large enough that IOI sprays their middles over the paths. Five sizes
// over four connections, every fourth operation a pull: every size meets
// every connection and both kinds.
var DemoSizes = []int{512, 4 << 10, 64 << 10, 256 << 10, 1 << 20}

// demoMinCwnd is the least congestion window of the demo's connections, in
// packets. Swift's default, 0.01 (one packet per 100 round trips, for
// incasts of thousands of flows), stalled the demo on a starved machine:
// the loops' scheduling delays read as fabric delay far above the target,
// the delay cuts took every window to the floor (Swift's Decreases 13–35
// per connection, Resets 0), and the pacing gap, SRTT/cwnd, grew to 100
// round trips: under -race on a loaded machine (SRTT 7–17 ms) 0.7–1.7 s per
// packet, and 1 MiB messages of 256 packets outlived the demo test's
// minute of drain. A floor of 1 (no pacing) still left a 1 MiB message
// 256 round trips of 70 ms there (the demo test took 67–97 s, failing
// half the time); 8 took it to 23 s. With the demo's five connections
// over four 1 Gbit/s paths, 40 packets in flight are a queue of about
// 10 packets per path: no loss, and Swift still steers above it.
const demoMinCwnd = DefaultMinCwnd

// demoIOI is the IOI configuration of the demo's endpoints.
func demoIOI(o *TransportDemoOptions) ioi.Config {
	if o.IOI != nil {
		return *o.IOI
	}
	return ioi.Config{Mode: ioi.ModeIOI}
}

func demoSizes(o *TransportDemoOptions) []int {
	if len(o.Sizes) > 0 {
		return o.Sizes
	}
	return DemoSizes
}

// IOILines describes what IOI did in the demo, for its summary: the
// messages each side sent by mode, their packets by phase, the counters'
// peaks, the waits for UPC == 0 and the threshold, what the receivers
// made of the in-order packets, how the senders steered around failing
// paths, and each fabric path's link and load.
func (d *TransportDemo) IOILines() []string {
	i, t := d.Initiator.IOIStats(), d.Target.IOIStats()
	fs := d.Fabric.Stats()
	lines := []string{
		fmt.Sprintf("IOI: messages %d wholly in order, %d with IOI (%d stayed in order at their first response), %d sprayed; packets head %d, middle (sprayed) %d, tail %d, in order %d",
			i.MsgInOrder+t.MsgInOrder, i.MsgIOI+t.MsgIOI, i.MsgIOIStayed+t.MsgIOIStayed, i.MsgSprayed+t.MsgSprayed,
			i.PktHead+t.PktHead, i.PktMiddle+t.PktMiddle, i.PktTail+t.PktTail, i.PktInOrder+t.PktInOrder),
		fmt.Sprintf("IOI: peak OPC %d, peak UPC %d; last packets held for UPC == 0: %d; threshold now %d B (RTT %v, %.2f Gbit/s effective)",
			max(i.PeakOPC, t.PeakOPC), max(i.PeakUPC, t.PeakUPC), i.UPCWaits+t.UPCWaits, i.Threshold,
			units.FormatDuration(time.Duration(i.RTT)), float64(i.Bandwidth)*8/1e9),
		fmt.Sprintf("IOI receive: in-order packets handed over in sequence %d, out of sequence %d (placed, handed over in their turn; %d too far ahead, refused and resent), forged %d, stale %d, unknown message %d",
			i.InSequence+t.InSequence, i.OutOfSequence+t.OutOfSequence, i.Refused+t.Refused, i.Forged+t.Forged, i.Stale+t.Stale, i.Unknown+t.Unknown),
	}
	pi, pt := d.Initiator.Transport().PathStats(), d.Target.Transport().PathStats()
	lines = append(lines, fmt.Sprintf("paths: sprayed resends moved off the path they were lost on %d, entropy values found failing %d, probes %d (values restored %d), ordered-path moves %d, ACK-path moves %d",
		pi.Reroutes+pt.Reroutes, pi.Suspects+pt.Suspects, pi.Probes+pt.Probes, pi.Restored+pt.Restored, pi.OrderedMoves+pt.OrderedMoves, pi.AckMoves+pt.AckMoves))
	var paths []string
	for k, p := range fs.AtoB.PathDetail {
		paths = append(paths, fmt.Sprintf("#%d %s: %d frames %.1f MB peak queue %d drops %d", k, d.pathLink(k), p.Frames, float64(p.Bytes)/1e6, p.QueuePeak, p.Drops))
	}
	if len(paths) > 0 {
		lines = append(lines, "fabric paths initiator→target: "+strings.Join(paths, "; "))
	}
	return lines
}

// pathLink describes fabric path k's own link: its rate and its delay.
func (d *TransportDemo) pathLink(k int) string {
	p := d.profile
	at := func(n int) int { return min(k, n-1) }
	rate := "no link of its own"
	if n := len(p.PathRate); n > 0 {
		rate = fmt.Sprintf("%g Gbit/s", float64(p.PathRate[at(n)])/1e9)
	}
	delay := p.Delay + time.Duration(k)*p.Spread
	if n := len(p.PathDelay); n > 0 {
		delay = p.Delay + p.PathDelay[at(n)]
	}
	return fmt.Sprintf("%s, %v", rate, delay)
}

// IOICheck is the demo's check that IOI was at work: with more than one
// fabric path and messages above the threshold, some message sprayed its
// middle, and every path carried frames. ok is true, with nothing to
// check, on a single path.
func (d *TransportDemo) IOICheck() (ok bool, what string) {
	if d.profile.Paths < 2 {
		return true, "IOI: one fabric path, nothing to spray (give the profile paths=4 to see it)"
	}
	i, t := d.Initiator.IOIStats(), d.Target.IOIStats()
	sprayed := i.MsgIOI + t.MsgIOI - i.MsgIOIStayed - t.MsgIOIStayed
	idle := 0
	fs := d.Fabric.Stats()
	for _, p := range fs.AtoB.PathDetail {
		if p.Frames == 0 {
			idle++
		}
	}
	idle += d.profile.Paths - len(fs.AtoB.PathDetail)
	largest := 0
	for _, s := range d.Sizes {
		largest = max(largest, s)
	}
	return sprayed > 0 && i.PktMiddle+t.PktMiddle > 0 && idle == 0,
		fmt.Sprintf("IOI sprayed the middles of large messages (up to %s) over all %d paths (%d messages sprayed, %d middle packets, %d paths idle)",
			demoSize(largest), d.profile.Paths, sprayed, i.PktMiddle+t.PktMiddle, idle)
}

// IOIStats sums both endpoints' IOI counters.
func (d *TransportDemo) IOIStats() (initiator, target txn.IOIStats) {
	return d.Initiator.IOIStats(), d.Target.IOIStats()
}

// demoSize writes n bytes as the demo's sizes are said: 1 MiB, 64 KiB, 512 B.
func demoSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// waitDrained waits until the load and the Sends are idle, for as long as
// operations keep completing: it gives up, false, when stall passes with
// none completing. A fixed deadline judged the machine, not the transport:
// with 1 MiB messages in the mix, a -race build on a loaded machine
// (round trips of 70 ms, loops starved) completed the window it held at
// the stop steadily but in more than 10 s, while a stall (an operation
// that never ends) still fails within stall.
func (d *TransportDemo) waitDrained(stall time.Duration) bool {
	done := func() uint64 {
		ls, ss := d.Load.Stats(), d.Sends.Stats()
		return ls.Completed + ls.Failed + ss.Completed + ss.Failed + ss.Received + ss.RecvFailed
	}
	for last := done(); ; {
		if WaitFor(func() bool { return d.Load.Idle() && d.Sends.Idle() || done() != last }, stall) && d.Load.Idle() && d.Sends.Idle() {
			return true
		}
		now := done()
		if now == last {
			return false
		}
		last = now
	}
}
