package txn

import "sync/atomic"

const (
	cPosted = iota
	cBusy
	cCompleted
	cCompletedErr
	cPushes
	cPulls
	cSolicited
	cUnsolicited
	cGrantsIssued
	cGrantsReceived
	cGrantedMax
	cRequestsDelivered
	cRefusedUnregistered
	cRefusedAccess
	cRefusedTooSmall
	cMalformed
	cUnmatched
	cStaleCookie
	cBytesCompleted
	cBytesPlaced
	cBytesServed
	cPaced
	cConnRefused
	cTimedOut
	cGrantsResent
	cCancelled
	cNoticesSent
	cNoticesAcked
	cNoticesReceived
	cHeldAtEnd
	cCompletionsHeld
	cNoticeGiveUps
	cIllegalMoves
	numCounters
)

// Stats are an endpoint's counters; they only grow, except GrantedMax, the
// largest granted-and-not-received byte count seen.
type Stats struct {
	Posted       uint64 // operations accepted
	Busy         uint64 // posts refused for now (ErrBusy)
	Completed    uint64 // completions with StatusOK
	CompletedErr uint64 // completions with an error status
	Pushes       uint64
	Pulls        uint64
	Solicited    uint64 // pushes that asked for a grant
	Unsolicited  uint64 // pushes that sent their data at once

	GrantsIssued   uint64 // target: grants sent
	GrantsReceived uint64 // initiator: grants that released data
	GrantsResent   uint64 // target: grants sent again after the transport abandoned them
	GrantedMax     uint64 // target: most bytes granted and not yet received

	RequestsDelivered uint64 // target: requests handed to the ULP
	// Request packets refused (ULP-error NACK), by reason: the named
	// region is not registered, lacks the access, or is too small. A
	// refused packet that comes again (its NACK was lost or queued behind
	// another) is counted again.
	RefusedUnregistered uint64
	RefusedAccess       uint64
	RefusedTooSmall     uint64
	Malformed           uint64 // a segment outside its message, a request without a region
	// Unmatched: a grant, pull data or solicited data matching no
	// registered transaction (counted and dropped).
	Unmatched   uint64
	StaleCookie uint64 // transport resolutions for transactions already gone

	BytesCompleted uint64 // initiator: bytes of operations completed OK
	BytesPlaced    uint64 // bytes written into registered regions (pushes here, pulls' data here)
	BytesServed    uint64 // target: pull data bytes sent
	Paced          uint64 // sends after which the connection was paced (cwnd < 1)
	ConnRefused    uint64 // connections dropped for want of a slot

	TimedOut  uint64 // operations ended by their timeout
	Cancelled uint64 // operations ended by Cancel
	// Abort notices: sent to peers (this side gave up on a transaction),
	// acknowledged by them, and received from them.
	NoticesSent     uint64
	NoticesAcked    uint64
	NoticesReceived uint64
	// NoticeGiveUps: connections failed (rt.ErrRetryExhausted) because
	// the peer did not acknowledge an abort notice sent RetryLimit+1
	// times.
	NoticeGiveUps uint64
	// HeldAtEnd: target: peer requests held (waiting for their turn or
	// their data, or given up by their initiator) when their connection
	// ended; each was told to OnAborted. CompletionsHeld: initiator, ordered
	// connections: completions that waited for an earlier operation's
	// abort notice to be acknowledged.
	HeldAtEnd       uint64
	CompletionsHeld uint64
	// IllegalMoves: transaction state moves outside the legal ones (a bug
	// of this package, never the peer's doing; zero in a sound run).
	IllegalMoves uint64

	// From the reorder engine: arrivals that waited for an earlier
	// sequence number, and the entries released in order.
	ReorderWaits    uint64
	ReorderReleased uint64
}

type counters struct {
	own [numCounters]uint64
	pub [numCounters]atomic.Uint64
	ro  [2]atomic.Uint64
}

func (c *counters) publish() {
	for i := range c.own {
		if c.pub[i].Load() != c.own[i] {
			c.pub[i].Store(c.own[i])
		}
	}
}

// Stats returns the counters as of the end of the latest Poll that did
// work, or that followed a call that counted (an idle Poll publishes
// nothing).
func (e *Endpoint) Stats() Stats {
	v := func(i int) uint64 { return e.cnt.pub[i].Load() }
	return Stats{
		Posted: v(cPosted), Busy: v(cBusy), Completed: v(cCompleted), CompletedErr: v(cCompletedErr),
		Pushes: v(cPushes), Pulls: v(cPulls), Solicited: v(cSolicited), Unsolicited: v(cUnsolicited),
		GrantsIssued: v(cGrantsIssued), GrantsReceived: v(cGrantsReceived), GrantedMax: v(cGrantedMax),
		RequestsDelivered: v(cRequestsDelivered), RefusedUnregistered: v(cRefusedUnregistered),
		RefusedAccess: v(cRefusedAccess), RefusedTooSmall: v(cRefusedTooSmall), Malformed: v(cMalformed),
		Unmatched: v(cUnmatched), StaleCookie: v(cStaleCookie), BytesCompleted: v(cBytesCompleted),
		BytesPlaced: v(cBytesPlaced), BytesServed: v(cBytesServed), Paced: v(cPaced), ConnRefused: v(cConnRefused),
		TimedOut: v(cTimedOut), GrantsResent: v(cGrantsResent), Cancelled: v(cCancelled), NoticesSent: v(cNoticesSent), NoticesAcked: v(cNoticesAcked),
		NoticeGiveUps: v(cNoticeGiveUps), IllegalMoves: v(cIllegalMoves),
		NoticesReceived: v(cNoticesReceived), HeldAtEnd: v(cHeldAtEnd), CompletionsHeld: v(cCompletionsHeld),
		ReorderWaits: e.cnt.ro[0].Load(), ReorderReleased: e.cnt.ro[1].Load(),
	}
}
