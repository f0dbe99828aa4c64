package mcsq

import "sync/atomic"

const (
	// Queue counters.
	cPosted = iota
	cCompleted
	cCompletedErr
	cCQEs
	cCoalesced
	cBlacklistedWRs
	cLocalOps
	cHOLNoSQ
	cHOLSQFull
	cHOLFence
	cHOLWaitNs
	cOvertook
	cLookScans
	// Pool counters.
	cBinds
	cBoundHits
	cDCConnects
	cDCDisconnects
	cDCRetarget
	cConnectWaits
	cSQFailures
	cBlacklistAdds
	cBlacklistRemoves
	cIdleCloses
	cFailBase
	numCounters = cFailBase + int(numCauses)
)

// Stats are a queue's or a pool's counters (each fills its own part). They
// only grow.
type Stats struct {
	// Queue.
	Posted       uint64 // WRs the distributor took from the post ring
	Busy         uint64 // posts refused for now (ErrBusy)
	Completed    uint64 // WRs completed with StatusOK
	CompletedErr uint64 // WRs completed with another status
	CQEs         uint64 // CQEs posted
	Coalesced    uint64 // WRs covered by a CQE that names a later WR (ordered mode)
	Blacklisted  uint64 // WRs refused by the blacklist (never executed)
	LocalOps     uint64 // local operations run
	// Head-of-line: polls in which the WR at the head of the queue could
	// not be distributed, and why: no free SQ in its pool, its SQ already
	// holds SQDepth WRs, or it is a local operation waiting for every
	// earlier WR to complete (the fence). Nothing behind the head moves
	// meanwhile. HOLWaitNs sums how long heads waited.
	HOLNoSQ   uint64
	HOLSQFull uint64
	HOLFence  uint64
	HOLWaitNs uint64
	// Overtook counts WRs the lookahead placed past a waiting head (their
	// identifier bound, blacklisted, or given a free SQ); LookScans the
	// scans it made.
	Overtook  uint64
	LookScans uint64

	// Pool.
	Binds            uint64 // identifiers bound to an SQ
	BoundHits        uint64 // WRs whose identifier was already bound
	DCConnects       uint64 // DC connections opened (each 0-RTT: data follows at once)
	DCDisconnects    uint64 // DC connections closed (last WR acknowledged, idle, or retargeted)
	DCRetarget       uint64 // a DC SQ reconnected because its next WR goes to another peer
	ConnectWaits     uint64 // connects refused for now (connection table full): retried next poll
	SQFailures       uint64 // SQs that failed (each blacklists its identifier)
	BlacklistAdds    uint64
	BlacklistRemoves uint64
	IdleCloses       uint64 // DC connections closed by the idle timeout
	// Failures counts SQ failures by cause (index with a Cause).
	Failures [numCauses]uint64
}

type counters struct {
	own [numCounters]uint64
	pub [numCounters]atomic.Uint64
}

func (c *counters) publish() {
	for i := range c.own {
		if c.pub[i].Load() != c.own[i] {
			c.pub[i].Store(c.own[i])
		}
	}
}

func (c *counters) snapshot() Stats {
	v := func(i int) uint64 { return c.pub[i].Load() }
	s := Stats{
		Posted: v(cPosted), Completed: v(cCompleted), CompletedErr: v(cCompletedErr), CQEs: v(cCQEs),
		Coalesced: v(cCoalesced), Blacklisted: v(cBlacklistedWRs), LocalOps: v(cLocalOps),
		HOLNoSQ: v(cHOLNoSQ), HOLSQFull: v(cHOLSQFull), HOLFence: v(cHOLFence), HOLWaitNs: v(cHOLWaitNs),
		Overtook: v(cOvertook), LookScans: v(cLookScans),
		Binds: v(cBinds), BoundHits: v(cBoundHits), DCConnects: v(cDCConnects), DCDisconnects: v(cDCDisconnects),
		DCRetarget: v(cDCRetarget), ConnectWaits: v(cConnectWaits), SQFailures: v(cSQFailures),
		BlacklistAdds: v(cBlacklistAdds), BlacklistRemoves: v(cBlacklistRemoves), IdleCloses: v(cIdleCloses),
	}
	for k := range s.Failures {
		s.Failures[k] = v(cFailBase + k)
	}
	return s
}
