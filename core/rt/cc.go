package rt

import "time"

// CongestionControl decides how many packets a connection may have
// unacknowledged in each window. The transport calls it on the polling
// goroutine. Part 1 ships FixedWindow; a delay-based controller (issue 5)
// plugs in through Options.Congestion.
type CongestionControl interface {
	// OnAck reports packets newly acknowledged by one ACK and, when the ACK
	// carried a clean sample, the fabric RTT (0 otherwise).
	OnAck(rtt time.Duration, acked int)
	// OnRetransmit reports a resend: timeout true for a retransmit timer,
	// false for an early retransmit of a hole.
	OnRetransmit(timeout bool)
	// Window returns the current cap on unacknowledged packets per window
	// (at least 1; values past WindowSize are capped by the window).
	Window() int
}

// FixedWindow is a congestion controller that does not control: its window
// is always N packets.
type FixedWindow struct{ N int }

func (f *FixedWindow) OnAck(time.Duration, int) {}
func (f *FixedWindow) OnRetransmit(bool)        {}
func (f *FixedWindow) Window() int              { return f.N }

var _ CongestionControl = (*FixedWindow)(nil)
