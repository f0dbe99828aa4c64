package rfc2544

import (
	"context"
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/core/hist"
)

// FrameSize is a frame length on the wire as RFC 2544 counts it: with the
// 4-byte FCS (64 means 60 bytes of header and payload). IMIX is the
// mixture 7:4:1 of 64, 594 and 1518 bytes.
type FrameSize int

// IMIX is the frame-size mixture, not a length.
const IMIX FrameSize = 0

// StandardSizes are RFC 2544's Ethernet frame sizes (section 9.1) and the
// IMIX the field adds to them.
var StandardSizes = []FrameSize{64, 128, 256, 512, 1024, 1280, 1518, IMIX}

func (s FrameSize) String() string {
	if s == IMIX {
		return "imix"
	}
	return fmt.Sprintf("%dB", int(s))
}

// MeanBytes is the mean on-wire frame length.
func (s FrameSize) MeanBytes() float64 {
	if s == IMIX {
		return (7*64 + 4*594 + 1518) / 12.0
	}
	return float64(s)
}

// TrialSpec is one trial: offer Rate frames per second of Size for
// Duration, or, when Frames is set, exactly Frames frames at Rate (a
// back-to-back burst).
type TrialSpec struct {
	Size     FrameSize
	Rate     float64
	Duration time.Duration
	Frames   uint64
	// Latency asks for the frames' latency (TrialResult.Latency).
	Latency bool
}

// Count is the number of frames the trial offers.
func (t TrialSpec) Count() uint64 {
	if t.Frames > 0 {
		return t.Frames
	}
	return uint64(t.Rate*t.Duration.Seconds() + 0.5)
}

// TrialResult is what a trial measured. Latency is nil unless the spec
// asked for it.
type TrialResult struct {
	Sent, Received uint64
	Latency        *hist.HDR
	// SendTime, when the Trialer measures it, is how long sending took: a
	// generator that could not keep the rate took longer than asked.
	SendTime time.Duration
	// Refused counts the frames the generator's port turned away for a
	// while (its transmit ring full): the DUT's side did not take them as
	// fast as offered — backpressure, which a veth exerts where a wire
	// would drop — so a trial slowed by it is the DUT's failure, not the
	// generator's.
	Refused uint64
}

// LossRatio is the fraction of sent frames that did not arrive; more
// arrivals than sends (duplicates) count as no loss.
func (r TrialResult) LossRatio() float64 {
	if r.Sent == 0 || r.Received >= r.Sent {
		return 0
	}
	return float64(r.Sent-r.Received) / float64(r.Sent)
}

// Trialer runs trials against one device under test. Implementations:
// Simulated (a DUT of known capacity on a virtual clock) and the veth
// harness of `peregrine bench rfc2544`.
type Trialer interface {
	Trial(ctx context.Context, spec TrialSpec) (TrialResult, error)
}
