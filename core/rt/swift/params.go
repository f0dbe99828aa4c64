package swift

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidParams is matched (errors.Is) by every error Validate and Init
// return.
var ErrInvalidParams = errors.New("swift: invalid params")

// MaxCwndLimit is the largest MaxCwnd Validate accepts, in packets. It keeps
// Window within an int and far beyond any window a transport can track.
const MaxCwndLimit = 1 << 20

// MaxHops is the largest Hops Validate accepts (an IP TTL's range).
const MaxHops = 255

// maxTarget bounds each time parameter so that their sum, and the pacing
// arithmetic built on it, stays far from overflowing time.Duration.
// MaxBaseTarget bounds BaseTarget (and PerHopTarget × MaxHops,
// FlowScalingRange): a target delay of a second is far beyond a fabric.
const MaxBaseTarget = time.Second

const maxTarget = MaxBaseTarget

// Params configures a Controller. Start from DefaultParams and change what
// the fabric needs; a zero field is not replaced by its default (several
// fields have a meaningful zero), so Validate rejects the zero Params.
//
// Times are fabric delays as the transport measures them: the round trip
// from sending a packet to receiving its ACK minus the receiver's
// turnaround.
type Params struct {
	// BaseTarget is the fabric delay the controller aims for on an idle
	// path with no hops counted and a large window (Google: 25µs).
	BaseTarget time.Duration
	// PerHopTarget is added to the target for each switch hop on the path,
	// because every hop adds serialisation and queueing (Google: 1µs).
	PerHopTarget time.Duration
	// Hops is the connection's number of switch hops until the transport
	// measures it (SetHops); 0 when unknown.
	Hops int

	// FlowScalingRange is the most flow scaling can add to the target: a
	// connection with a window of FlowScalingMinCwnd or less gets all of
	// it, one at FlowScalingMaxCwnd or more none, and in between it falls
	// as 1/sqrt(cwnd) (Google: 100µs over windows 0.1 to 256). With many
	// flows sharing a bottleneck each window is small, the targets rise
	// and the queue they agree on is long enough for every flow to keep a
	// packet in it, while each flow's share still converges. 0 disables
	// flow scaling.
	FlowScalingRange                       time.Duration
	FlowScalingMinCwnd, FlowScalingMaxCwnd float64

	// AI is the additive increase, in packets per window of ACKs (per
	// round trip) while the delay is below target (Google: 1).
	AI float64
	// Beta scales the multiplicative decrease with how far the delay is
	// above target: cwnd *= 1 - Beta*(delay-target)/delay (Google: 0.8).
	Beta float64
	// MaxMDF caps one decrease: cwnd never falls below (1-MaxMDF)*cwnd in
	// one step; a retransmit cut is exactly that much (Google: 0.5).
	MaxMDF float64

	// MinCwnd and MaxCwnd bound the window, in packets. A window below 1
	// means pacing: one packet per SRTT/cwnd (Google: 0.01 and 256).
	MinCwnd, MaxCwnd float64
	// InitialCwnd is the window of a new connection (Google: 32).
	InitialCwnd float64

	// RetxResetThreshold is the number of consecutive retransmit-timeout
	// episodes (with no ACK in between) after which the window drops to
	// MinCwnd instead of being halved (Google: 3).
	RetxResetThreshold int

	// CutOnEarlyRetransmit makes an early retransmission (a hole revealed
	// by an extended ACK) cut the window by MaxMDF, at most once per round
	// trip: the paper's fast-recovery rule. Google's Falcon default
	// (max_decrease_on_eack_nack_drop) is false: the delay signal alone
	// steers the window and a lone loss costs no throughput.
	CutOnEarlyRetransmit bool
}

// Software endpoints' defaults: a poll loop on a shared core is descheduled
// for longer than a hardware transport's round trip, so its target holds
// that delay and its window keeps a floor. SoftwareBaseTarget: Swift's 25
// µs held `bench smallops`'s lossless in-memory push row at 18 packets
// (srtt 34 µs). SoftwareMinCwnd (packets): at Swift's 0.01 the shipped
// config trio moved 0.0065 Gbit/s with a p50 of 1.2–1.8 s on a quiet
// machine (bench/trio.sh); at 8, 0.31–0.34 Gbit/s and a p50 of 6 ms.
const (
	SoftwareBaseTarget = 200 * time.Microsecond
	SoftwareMinCwnd    = 8.0
)

// SoftwareParams returns DefaultParams with the software endpoints' base
// target and least window: the appliance's transport stages' and the
// public package's endpoints' congestion control.
func SoftwareParams() Params {
	p := DefaultParams()
	p.BaseTarget = SoftwareBaseTarget
	p.MinCwnd = SoftwareMinCwnd
	return p
}

// DefaultParams returns the defaults Google published with its Falcon
// simulator (isekai, rue/algorithm/swift.cc DefaultConfiguration, and
// common/default_config_generator.cc for the initial window), converted
// from Falcon time units (131.072ns) to durations.
func DefaultParams() Params {
	return Params{
		BaseTarget:         25 * time.Microsecond,
		PerHopTarget:       1 * time.Microsecond,
		Hops:               0,
		FlowScalingRange:   100 * time.Microsecond,
		FlowScalingMinCwnd: 0.1,
		FlowScalingMaxCwnd: 256,
		AI:                 1.0,
		Beta:               0.8,
		MaxMDF:             0.5,
		MinCwnd:            0.01,
		MaxCwnd:            256,
		InitialCwnd:        32,
		RetxResetThreshold: 3,
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidParams, fmt.Sprintf(format, args...))
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate reports the first parameter that is out of range, naming the
// field and the fix. The error matches ErrInvalidParams.
func (p Params) Validate() error {
	d := DefaultParams()
	switch {
	case p.BaseTarget <= 0 || p.BaseTarget > maxTarget:
		return invalid("BaseTarget %v must be in (0, %v] (set Params.BaseTarget; default %v)", p.BaseTarget, maxTarget, d.BaseTarget)
	case p.PerHopTarget < 0 || p.PerHopTarget > maxTarget/MaxHops:
		return invalid("PerHopTarget %v must be in [0, %v] (set Params.PerHopTarget; default %v)", p.PerHopTarget, maxTarget/MaxHops, d.PerHopTarget)
	case p.Hops < 0 || p.Hops > MaxHops:
		return invalid("Hops %d must be in [0, %d] (set Params.Hops to the path's switch hops, or 0)", p.Hops, MaxHops)
	case p.FlowScalingRange < 0 || p.FlowScalingRange > maxTarget:
		return invalid("FlowScalingRange %v must be in [0, %v] (set Params.FlowScalingRange; default %v, 0 disables)", p.FlowScalingRange, maxTarget, d.FlowScalingRange)
	case !(p.FlowScalingMinCwnd > 0) || !finite(p.FlowScalingMinCwnd):
		return invalid("FlowScalingMinCwnd %v must be positive (set Params.FlowScalingMinCwnd; default %v)", p.FlowScalingMinCwnd, d.FlowScalingMinCwnd)
	case !(p.FlowScalingMaxCwnd > p.FlowScalingMinCwnd) || !finite(p.FlowScalingMaxCwnd):
		return invalid("FlowScalingMaxCwnd %v must be above FlowScalingMinCwnd %v (set Params.FlowScalingMaxCwnd; default %v)", p.FlowScalingMaxCwnd, p.FlowScalingMinCwnd, d.FlowScalingMaxCwnd)
	case !(p.AI > 0) || !finite(p.AI):
		return invalid("AI %v must be positive (set Params.AI; default %v)", p.AI, d.AI)
	case !(p.Beta > 0 && p.Beta < 1):
		return invalid("Beta %v must be in (0, 1) (set Params.Beta; default %v)", p.Beta, d.Beta)
	case !(p.MaxMDF > 0 && p.MaxMDF < 1):
		return invalid("MaxMDF %v must be in (0, 1) (set Params.MaxMDF; default %v)", p.MaxMDF, d.MaxMDF)
	case !(p.MinCwnd > 0) || !finite(p.MinCwnd):
		return invalid("MinCwnd %v must be positive (set Params.MinCwnd; default %v)", p.MinCwnd, d.MinCwnd)
	case !(p.MaxCwnd >= p.MinCwnd && p.MaxCwnd <= MaxCwndLimit):
		return invalid("MaxCwnd %v must be in [MinCwnd %v, %d] (set Params.MaxCwnd; default %v)", p.MaxCwnd, p.MinCwnd, MaxCwndLimit, d.MaxCwnd)
	case !(p.InitialCwnd >= p.MinCwnd && p.InitialCwnd <= p.MaxCwnd):
		return invalid("InitialCwnd %v must be in [MinCwnd %v, MaxCwnd %v] (set Params.InitialCwnd; default %v)", p.InitialCwnd, p.MinCwnd, p.MaxCwnd, d.InitialCwnd)
	case p.RetxResetThreshold < 1:
		return invalid("RetxResetThreshold %d must be at least 1 (set Params.RetxResetThreshold; default %d)", p.RetxResetThreshold, d.RetxResetThreshold)
	}
	return nil
}
