package txn

import (
	"fmt"
	"strings"
)

// dump describes every live transaction, for failure messages.
func (e *Endpoint) dump() string {
	var b strings.Builder
	for ci := range e.conns {
		c := &e.conns[ci]
		if !c.live {
			continue
		}
		fmt.Fprintf(&b, "conn %d cid %#x ordered=%v peerOrdered=%v nextRSN %d nextSSN %d doneBase %d grantBase %d reqBase %d ssnBase %d blocked %v\n",
			ci, c.cid, c.ordered, c.peerOrdered, c.nextRSN, c.nextSSN, c.doneBase, c.grantBase, c.reqBase, c.ssnBase, c.blocked)
		for i := c.head; i >= 0; i = e.xacts[i].next {
			x := &e.xacts[i]
			fmt.Fprintf(&b, "  x%d role %d %v sol=%v rsn %d ssn %d len %d pkts %d/%d req=%v unres %d recv %d granted %v %v inSched %v rsnHeld %v ssnHeld %v status %v\n",
				i, x.role, x.kind, x.solicited, x.rsn, x.ssn, x.length, x.sentPkts, x.pkts, x.reqSent, x.unresolved, x.received, x.granted, x.state, x.inSched, x.rsnHeld, x.ssnHeld, x.status)
		}
	}
	fmt.Fprintf(&b, "grants queued %d, granted %d\n", e.grants.size, e.granted)
	return b.String()
}

// Every test runs with illegal state moves turned into panics: a move
// outside legalMoves fails the test that made it.
func init() { panicOnIllegalMove = true }
