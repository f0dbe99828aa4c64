package app

import (
	"fmt"
	"strings"
	"sync"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
)

// demoQPNs records the global QP numbers (the target's and the
// initiator's) of the connections the target's ULP saw requests on: the
// names the host uses. A fixed table, no allocation per request; note
// runs on the target's loop, String after the loops stopped.
type demoQPNs struct {
	mu    sync.Mutex
	pairs [16][2]uint32
	n     int
}

func (q *demoQPNs) note(r *txn.Request) {
	local, peer := r.Conn.QPN(), r.Conn.PeerQPN()
	if local == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.n {
		if q.pairs[i][0] == local {
			return
		}
	}
	if q.n < len(q.pairs) {
		q.pairs[q.n] = [2]uint32{local, peer}
		q.n++
	}
}

func (q *demoQPNs) String() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var b strings.Builder
	for i := range q.n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%#06x<-%#06x", q.pairs[i][0], q.pairs[i][1])
	}
	return b.String()
}

// demoQPN is the transport option the demo's endpoint called name gets:
// global QP numbers (SEEDS §S4) when TransportDemoOptions.GlobalQPNs asks
// for them. The target's rotation starts elsewhere, so that the two ends'
// numbers are told apart in the summary: each side names its QPs itself.
func (o *TransportDemoOptions) demoQPN(name string) rt.QPNOptions {
	q := rt.QPNOptions{Enabled: o.GlobalQPNs}
	if name == "target" {
		q.Start = 0x10000
	}
	return q
}

// QPNStats returns both endpoints' global-QPN counters (zero when the
// demo runs without global QPNs).
func (d *TransportDemo) QPNStats() (initiator, target rt.QPNStats) {
	return d.Initiator.QPNStats(), d.Target.QPNStats()
}

// QPNCheck is the demo's verdict on QP translation: ok when every packet's
// global QPNs translated to its own connection (nothing dropped for a
// retired, unknown, misrouted, wrong-source or missing number), with what
// to print.
func (d *TransportDemo) QPNCheck() (ok bool, what string) {
	i, t := d.QPNStats()
	n := i.Dropped() + t.Dropped()
	return n == 0, fmt.Sprintf("every packet's global QPNs translated to its own connection (%d dropped)", n)
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
		i.DropSource+t.DropSource, i.DropMissing+t.DropMissing) +
		fmt.Sprintf("\n  the target's ULP saw requests on QPNs (target<-initiator): %s", d.qpns.String())
}
