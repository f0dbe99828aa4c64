package app

import (
	"fmt"

	"github.com/peregrine-net/peregrine/core/rt"
)

// demoQPN is the transport option the demo's endpoints get: global QP
// numbers (SEEDS §S4) when TransportDemoOptions.GlobalQPNs asks for them.
func (o *TransportDemoOptions) demoQPN() rt.QPNOptions {
	return rt.QPNOptions{Enabled: o.GlobalQPNs}
}

// QPNStats returns both endpoints' global-QPN counters (zero when the
// demo runs without global QPNs).
func (d *TransportDemo) QPNStats() (initiator, target rt.QPNStats) {
	return d.Initiator.QPNStats(), d.Target.QPNStats()
}

// QPNSummary describes the demo's QP translation on one line: how many
// global QPNs each side opened and retired, how many packets each side
// translated through its CAM, and the drops by reason.
func (d *TransportDemo) QPNSummary() string {
	i, t := d.QPNStats()
	if i.CAM.Slots == 0 {
		return "global QPNs: off"
	}
	return fmt.Sprintf("global QPNs: initiator opened %d (live %d of %d contexts), target opened %d (live %d); translated %d packets through the CAMs; dropped: retired %d, unknown %d, misrouted %d, wrong source %d, missing %d",
		i.CAM.Opened, i.CAM.Live, i.CAM.Slots, t.CAM.Opened, t.CAM.Live,
		i.CAM.Translated+t.CAM.Translated,
		i.DropRetired+t.DropRetired, i.DropUnknown+t.DropUnknown, i.DropMisrouted+t.DropMisrouted,
		i.DropSource+t.DropSource, i.DropMissing+t.DropMissing)
}
