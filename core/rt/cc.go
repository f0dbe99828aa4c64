package rt

import (
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
)

// CongestionControl decides how many packets a connection may have
// unacknowledged in each window. The transport calls it on the polling
// goroutine with the poll's time. FixedWindow is the default; the
// delay-based controller of core/rt/swift plugs in through
// Options.Congestion.
type CongestionControl interface {
	// OnAck reports packets newly acknowledged by one ACK and, when the ACK
	// carried a clean sample, the fabric RTT (0 otherwise).
	OnAck(now clock.Time, rtt time.Duration, acked int)
	// OnRetransmit reports a resend: timeout true for a retransmit timer,
	// false for an early retransmit of a hole.
	OnRetransmit(now clock.Time, timeout bool)
	// Window returns the current cap on unacknowledged packets per window
	// (at least 1; values past WindowSize are capped by the window).
	Window() int
}

// FixedWindow is a congestion controller that does not control: its window
// is always N packets.
type FixedWindow struct{ N int }

func (f *FixedWindow) OnAck(clock.Time, time.Duration, int) {}
func (f *FixedWindow) OnRetransmit(clock.Time, bool)        {}
func (f *FixedWindow) Window() int                          { return f.N }

var _ CongestionControl = (*FixedWindow)(nil)

// HopSetter is a CongestionControl whose target depends on the path's
// length, such as Swift's per-hop target (swift.Controller). With each ACK
// that carries an RTT sample the transport passes it the hops that ACK's
// echoed packet crossed (wire.Header.HopEcho, which the peer inferred from
// the IP TTL), before OnAck.
type HopSetter interface {
	SetHops(hops int)
}

// TimeoutUndoer is a CongestionControl that can take back its response
// to a retransmit timeout the ACKs then showed spurious: the packets were
// waiting (the peer's loop descheduled), not lost, so the path gave no
// sign of congestion. The transport calls UndoTimeout once per timeout
// it found spurious, before the OnAck of the ACK that showed it, and the
// controller restores the window it had before the timeouts it was told
// of (OnRetransmit with timeout true) since the last ACK that
// acknowledged anything: RFC 4015's Eifel response.
type TimeoutUndoer interface {
	UndoTimeout(now clock.Time)
}
