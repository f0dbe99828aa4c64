package swift

import (
	"math"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
)

// never is the instant of an event that has not happened: far enough in the
// past that every "at most once per RTT" test passes, near enough that
// now-never does not overflow.
const never clock.Time = math.MinInt64 / 4

// Stats counts what a Controller did. All counters only grow (until Init).
type Stats struct {
	RTTSamples uint64 // OnAck calls that carried an RTT sample
	Increases  uint64 // additive increases (delay below target)
	Decreases  uint64 // delay-driven multiplicative decreases that lowered cwnd
	// RetransmitCuts counts cuts by MaxMDF on a retransmit timeout (or an
	// early retransmit with CutOnEarlyRetransmit).
	RetransmitCuts   uint64
	Resets           uint64 // drops to MinCwnd after RetxResetThreshold timeout episodes
	Timeouts         uint64 // OnRetransmit(timeout=true) calls
	TimeoutEpisodes  uint64 // timeouts counted towards RetxResetThreshold
	TimeoutUndos     uint64 // timeout episodes taken back as spurious (UndoTimeout)
	EarlyRetransmits uint64 // OnRetransmit(timeout=false) calls
	HopChanges       uint64 // SetHops calls that changed the hop count
}

// Controller is the Swift congestion state of one connection. It is a plain
// value with no pointers: keep one per connection slot in a preallocated
// array and call Init when the slot is (re)used. It belongs to the
// connection's goroutine; it has no locks.
type Controller struct {
	p Params

	// Precomputed in nanoseconds: the target's constant part and the flow
	// scaling curve alpha/sqrt(cwnd) + beta, clamped to [0, fsRange].
	fixedTarget     float64
	fsAlpha, fsBeta float64
	fsRange         float64

	cwnd float64
	srtt time.Duration
	hops int // Params.Hops until SetHops measures the path

	lastDecrease clock.Time // last time cwnd went down (once-per-RTT guard)
	lastTimeout  clock.Time // start of the current timeout episode
	retxCount    int        // timeout episodes since the last ACK

	// undo is the state before the latest timeout episode began, for
	// UndoTimeout; undoOK while it may be restored.
	undo   undoState
	undoOK bool

	stats Stats
}

// undoState is what a timeout episode changes.
type undoState struct {
	cwnd                      float64
	lastDecrease, lastTimeout clock.Time
	retxCount                 int
}

// rttSmoothing is the weight of the old SRTT in each update (Google's
// rtt_smoothing_alpha, 0.75): SRTT = 3/4 SRTT + 1/4 sample.
const rttSmoothing = 0.75

// Init validates p and resets c to a new connection's state: cwnd
// InitialCwnd, no RTT sample, zero Stats. On error c is left unchanged.
func (c *Controller) Init(p Params) error {
	if err := p.Validate(); err != nil {
		return err
	}
	*c = Controller{
		p:            p,
		hops:         p.Hops,
		fixedTarget:  float64(p.BaseTarget + time.Duration(p.Hops)*p.PerHopTarget),
		fsRange:      float64(p.FlowScalingRange),
		cwnd:         p.InitialCwnd,
		lastDecrease: never,
		lastTimeout:  never,
	}
	// fs(cwnd) = alpha/sqrt(cwnd) + beta is FlowScalingRange at
	// FlowScalingMinCwnd and 0 at FlowScalingMaxCwnd.
	c.fsAlpha = c.fsRange / (1/math.Sqrt(p.FlowScalingMinCwnd) - 1/math.Sqrt(p.FlowScalingMaxCwnd))
	c.fsBeta = -c.fsAlpha / math.Sqrt(p.FlowScalingMaxCwnd)
	return nil
}

// targetNs is the target fabric delay for the current window, in ns.
func (c *Controller) targetNs() float64 {
	fs := c.fsAlpha/math.Sqrt(c.cwnd) + c.fsBeta
	fs = min(max(fs, 0), c.fsRange)
	return c.fixedTarget + fs
}

// clamp keeps cwnd in [MinCwnd, MaxCwnd] and, if it went down from old,
// starts a new once-per-RTT decrease interval at now. It reports whether
// the window went down.
func (c *Controller) clamp(now clock.Time, old float64) bool {
	c.cwnd = min(max(c.cwnd, c.p.MinCwnd), c.p.MaxCwnd)
	if c.cwnd < old {
		c.lastDecrease = now
		return true
	}
	return false
}

// OnAck reports one ACK that acknowledged acked packets, received at now,
// carrying the fabric delay rtt of one of them (0 when the ACK carried no
// clean sample). Below the target delay the window grows by AI/cwnd per
// packet acknowledged (AI per packet while cwnd < 1, since then each ACK is
// a whole round trip); at or above it, it shrinks by
// min(Beta*(rtt-target)/rtt, MaxMDF), at most once per rtt. An ACK with no
// sample changes no window: without a delay there is no signal either way.
// Any ACK that acknowledges something ends a timeout episode.
func (c *Controller) OnAck(now clock.Time, rtt time.Duration, acked int) {
	if acked > 0 {
		c.retxCount = 0
		c.undoOK = false // the episode is over: nothing left to take back
	}
	if rtt <= 0 {
		return
	}
	c.stats.RTTSamples++
	if c.srtt == 0 {
		c.srtt = rtt
	} else {
		c.srtt = time.Duration(rttSmoothing*float64(c.srtt) + (1-rttSmoothing)*float64(rtt))
	}

	// The target comes from the window the sample was taken under.
	target := c.targetNs()
	delay := float64(rtt)
	old := c.cwnd
	if delay < target {
		if acked <= 0 {
			return
		}
		inc := c.p.AI * float64(acked)
		if c.cwnd >= 1 {
			inc /= c.cwnd
		}
		c.cwnd += inc
		c.stats.Increases++
		c.clamp(now, old)
		return
	}
	if now.Sub(c.lastDecrease) < rtt {
		return
	}
	factor := max(1-c.p.Beta*(delay-target)/delay, 1-c.p.MaxMDF)
	c.cwnd *= factor
	if c.clamp(now, old) {
		c.stats.Decreases++
	}
}

// SetHops sets the path's hop count as the transport measured it (from the
// TTL its ACKs report, wire.Header.HopEcho), replacing Params.Hops: the
// target's per-hop part follows the path the packets actually take, which
// may change (a reroute, a sprayed path of another length). Values outside
// [0, MaxHops] are clamped.
func (c *Controller) SetHops(hops int) {
	hops = min(max(hops, 0), MaxHops)
	if hops == c.hops {
		return
	}
	c.hops = hops
	c.fixedTarget = float64(c.p.BaseTarget + time.Duration(hops)*c.p.PerHopTarget)
	c.stats.HopChanges++
}

// Hops returns the hop count in the target: Params.Hops until SetHops.
func (c *Controller) Hops() int { return c.hops }

// OnRetransmit reports a packet resent at now: timeout true for a
// retransmit timer, false for an early retransmission of a hole.
//
// A timeout belongs to the current timeout episode if one started less than
// SRTT ago (a transport with a timer per packet reports every packet of a
// lost flight at about the same time, and that is one congestion event, not
// several). A new episode counts towards RetxResetThreshold: the episode
// that reaches it sets cwnd to MinCwnd; earlier ones cut cwnd by MaxMDF, at
// most once per SRTT. An ACK ends the episodes.
//
// An early retransmission proves that the path delivers (an ACK revealed
// the hole), so it ends the timeout episodes; it cuts cwnd by MaxMDF, at
// most once per SRTT, only with Params.CutOnEarlyRetransmit.
func (c *Controller) OnRetransmit(now clock.Time, timeout bool) {
	if !timeout {
		c.stats.EarlyRetransmits++
		c.retxCount = 0
		c.undoOK = false
		if c.p.CutOnEarlyRetransmit {
			c.cut(now)
		}
		return
	}
	c.stats.Timeouts++
	// Before the first RTT sample there is no round trip to tell a lost
	// flight's timeouts (one per packet, microseconds apart) from a later
	// loss: they are one episode until an ACK ends it. (Taking SRTT 0 as
	// the episode's length made each a new episode, and one flight lost at
	// the start of a connection sent cwnd to MinCwnd.)
	if c.retxCount > 0 && (c.srtt == 0 || now.Sub(c.lastTimeout) < c.srtt) {
		return
	}
	if !c.undoOK {
		// The first episode since an ACK: what UndoTimeout goes back to,
		// past every later one (the probe's own timeouts while the peer
		// is still silent).
		c.undo = undoState{cwnd: c.cwnd, lastDecrease: c.lastDecrease, lastTimeout: c.lastTimeout, retxCount: c.retxCount}
		c.undoOK = true
	}
	c.lastTimeout = now
	c.retxCount++
	c.stats.TimeoutEpisodes++
	if c.retxCount >= c.p.RetxResetThreshold {
		old := c.cwnd
		c.cwnd = c.p.MinCwnd
		c.clamp(now, old)
		c.stats.Resets++
		return
	}
	c.cut(now)
}

// UndoTimeout takes back the timeout episodes since the last ACK that
// acknowledged anything (rt.TimeoutUndoer): the transport found them
// spurious, so the window, the decrease guard and the episode count are
// what they were before the first.
func (c *Controller) UndoTimeout(clock.Time) {
	if !c.undoOK {
		return
	}
	c.undoOK = false
	u := &c.undo
	c.cwnd, c.lastDecrease, c.lastTimeout, c.retxCount = max(c.cwnd, u.cwnd), u.lastDecrease, u.lastTimeout, u.retxCount
	c.stats.TimeoutUndos++
}

// cut shrinks cwnd by MaxMDF unless it went down less than SRTT ago.
func (c *Controller) cut(now clock.Time) {
	if now.Sub(c.lastDecrease) < c.srtt {
		return
	}
	old := c.cwnd
	c.cwnd *= 1 - c.p.MaxMDF
	if c.clamp(now, old) {
		c.stats.RetransmitCuts++
	}
}

// Window returns how many packets the connection may have unacknowledged:
// floor(cwnd), and at least 1 (below 1, PacingGap spaces the packets).
func (c *Controller) Window() int {
	if c.cwnd < 1 {
		return 1
	}
	return int(c.cwnd)
}

// Cwnd returns the congestion window in packets, in [MinCwnd, MaxCwnd].
func (c *Controller) Cwnd() float64 { return c.cwnd }

// PacingGap returns the least time between the starts of two consecutive
// packets: SRTT/cwnd while cwnd < 1, so the connection sends cwnd packets
// per round trip; 0 when cwnd >= 1 (the window alone limits it) or before
// the first RTT sample (there is no round trip to spread packets over yet,
// and Window is 1 anyway).
func (c *Controller) PacingGap() time.Duration {
	if c.cwnd >= 1 || c.srtt == 0 {
		return 0
	}
	return time.Duration(float64(c.srtt) / c.cwnd)
}

// TargetDelay returns the fabric delay the controller aims for at the
// current window: BaseTarget + Hops*PerHopTarget + flow scaling.
func (c *Controller) TargetDelay() time.Duration { return time.Duration(c.targetNs()) }

// SRTT returns the smoothed fabric delay (3/4 old + 1/4 sample), or 0
// before the first sample.
func (c *Controller) SRTT() time.Duration { return c.srtt }

// Stats returns the counters since Init.
func (c *Controller) Stats() Stats { return c.stats }

// Params returns the parameters given to Init.
func (c *Controller) Params() Params { return c.p }
