package ioi

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Mode chooses how a connection's data packets travel.
type Mode uint8

const (
	// ModeOff marks nothing: every packet unflagged, Phase None, the
	// connection's source port (the wire before IOI).
	ModeOff Mode = iota
	// ModeInOrder sends every data packet in order: flagged, with its
	// in-order sequence number, on the ordered path.
	ModeInOrder
	// ModeSprayed sends every data packet unflagged with per-packet
	// entropy, so the fabric sprays them all.
	ModeSprayed
	// ModeIOI runs IOI's procedure (docs/ioi.md): head in order, middle sprayed,
	// tail in order.
	ModeIOI
)

func (m Mode) String() string {
	switch m {
	case ModeOff:
		return "off"
	case ModeInOrder:
		return "inorder"
	case ModeSprayed:
		return "sprayed"
	case ModeIOI:
		return "ioi"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode reads a mode as the command line spells it: on|ioi, off,
// inorder, sprayed.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "on", "ioi":
		return ModeIOI, nil
	case "off":
		return ModeOff, nil
	case "inorder", "in-order":
		return ModeInOrder, nil
	case "sprayed":
		return ModeSprayed, nil
	}
	return 0, fmt.Errorf("ioi: unknown mode %q (use on, off, inorder or sprayed)", s)
}

// MaxDSCP is the largest DSCP value (6 bits).
const MaxDSCP = 63

// Config configures IOI on an endpoint or a connection.
type Config struct {
	Mode Mode
	// DSCP, 1..63, marks every in-order packet's IP header (0: none), for
	// fabrics that tell ordered traffic by its DSCP rather than by the
	// transport's flag (fabric.TransportClassifierDSCP).
	DSCP uint8
	// Threshold, when positive, replaces the adaptive threshold: messages
	// of more bytes use IOI. 0 measures it from each message's first
	// response.
	Threshold int
}

// ErrConfig is wrapped by Config.Validate's errors.
var ErrConfig = errors.New("ioi: invalid config")

// Validate checks c; errors name the field and the fix.
func (c Config) Validate() error {
	if c.Mode > ModeIOI {
		return fmt.Errorf("%w: Mode %d is unknown (use ModeOff, ModeInOrder, ModeSprayed or ModeIOI)", ErrConfig, c.Mode)
	}
	if c.DSCP > MaxDSCP {
		return fmt.Errorf("%w: DSCP %d is out of range (use 1..%d, or 0 for no marking)", ErrConfig, c.DSCP, MaxDSCP)
	}
	if c.Threshold < 0 {
		return fmt.Errorf("%w: Threshold %d is negative (use 0 for the adaptive threshold, or a size in bytes)", ErrConfig, c.Threshold)
	}
	return nil
}

// Estimator is a connection's threshold: 2 × RTT × effective bandwidth.
// The RTT is the one the first response of the latest IOI message
// measured (from that message's first send). The effective bandwidth is
// what the connection's responses achieved: the rate at which its data
// was acknowledged while it had data outstanding (the "bandwidth
// of the responses achieved by the concurrent messages"); before any was
// measured, the in-order bytes outstanding at the first response over
// that RTT. So the threshold follows the fabric: a longer round trip or a
// faster path raises it.
type Estimator struct {
	// Override, when positive, is the threshold whatever is measured.
	Override uint64
	rtt      time.Duration
	bw       uint64 // bytes per second
	thresh   uint64
	samples  uint64
	// The delivery rate: bytes acknowledged since start (0: no sample
	// running), and its running average.
	start clock.Time
	bytes uint64
	rate  float64
}

// minRateSample is the shortest interval a delivery-rate sample spans.
const minRateSample = 20 * time.Microsecond

// Acked feeds the delivery rate: n bytes of data acknowledged at now.
func (e *Estimator) Acked(n uint64, now clock.Time) {
	if e.start == 0 {
		e.start, e.bytes = now, 0
		return
	}
	e.bytes += n
	el := now.Sub(e.start)
	if el < max(e.rtt, minRateSample) {
		return
	}
	r := float64(e.bytes) / el.Seconds()
	if e.rate == 0 {
		e.rate = r
	} else {
		e.rate = (3*e.rate + r) / 4
	}
	e.start, e.bytes = now, 0
}

// Idle ends the running delivery-rate sample: the connection has nothing
// outstanding, and a gap is no measure of the path.
func (e *Estimator) Idle() { e.start = 0 }

// Update records one first response: rtt since the message's first send,
// and the in-order bytes outstanding when it came.
func (e *Estimator) Update(rtt time.Duration, outstanding uint64) {
	if rtt <= 0 {
		rtt = 1
	}
	e.rtt = rtt
	bw := e.rate
	if bw == 0 {
		bw = float64(outstanding) / rtt.Seconds()
	}
	e.bw = uint64(math.Round(bw))
	e.thresh = uint64(math.Round(2 * rtt.Seconds() * bw))
	e.samples++
}

// Threshold returns the threshold in bytes, and whether it is known (an
// override, or at least one measurement).
func (e *Estimator) Threshold() (uint64, bool) {
	if e.Override > 0 {
		return e.Override, true
	}
	return e.thresh, e.samples > 0
}

// RTT and Bandwidth return the last measurement (0 before the first).
func (e *Estimator) RTT() time.Duration { return e.rtt }
func (e *Estimator) Bandwidth() uint64  { return e.bw }
func (e *Estimator) Samples() uint64    { return e.samples }

// kind is how one message travels.
type kind uint8

const (
	kindPlain kind = iota
	kindInOrder
	kindSprayed
	kindIOI
)

// Mark is the sender's decision for one packet.
type Mark struct {
	// Flagged: set IOIInOrder, send on the ordered path with Ordinal as
	// the in-order sequence number (and the DSCP, if any).
	Flagged bool
	Phase   wire.Phase
	Ordinal uint32
	// Entropy is the UDP source port of a sprayed packet (0: the
	// connection's own).
	Entropy uint16
}

// Sender is one message's IOI state, from its first packet to its last
// acknowledgement. The zero Sender is ready for Begin.
type Sender struct {
	kind      kind
	phase     wire.Phase
	begun     bool
	responded bool
	holding   bool
	opc, upc  int32
	peakOPC   int32
	peakUPC   int32
	ordinal   uint32
	total     uint32 // packets
	sent      uint32
	size      uint64 // bytes
	bytesSent uint64
	start     clock.Time
	salt      uint32
}

// Begun reports whether Begin ran.
func (s *Sender) Begun() bool { return s.begun }

// Begin starts a message of size bytes in total packets, at now (its first
// send). idempotent false keeps it wholly in order; est is its
// connection's threshold; salt varies the entropy between messages.
// It returns true when the message uses IOI (it may still stay in order
// if its first response finds it small).
func (s *Sender) Begin(m Mode, total uint32, size uint64, idempotent bool, est *Estimator, now clock.Time, salt uint32) bool {
	// Zeroed in place and filled field by field (once per message): a
	// composite literal stored through a pointer is built in a temporary
	// and copied, and the copy's wide loads stall on the narrow stores
	// that built it.
	*s = Sender{}
	s.begun, s.total, s.size, s.start, s.salt = true, total, size, now, salt
	switch {
	case m == ModeOff:
		s.kind = kindPlain
	case m == ModeSprayed && idempotent:
		s.kind = kindSprayed
	case m == ModeInOrder || !idempotent:
		s.kind = kindInOrder
	default:
		// Every message starts in order and is measured: the
		// threshold is decided at its first response. Only a message no
		// larger than an override, or of fewer than three packets (no
		// middle possible), is known to stay in order from the start.
		if est.Override > 0 && size <= est.Override || total < 3 {
			s.kind = kindInOrder
			return false
		}
		s.kind = kindIOI
		s.phase = wire.PhaseHead
		return true
	}
	return false
}

// IOI reports whether the message runs the IOI procedure.
func (s *Sender) IOI() bool { return s.kind == kindIOI }

// InOrder reports whether the message goes wholly in order.
func (s *Sender) InOrder() bool { return s.kind == kindInOrder }

// Sprayed reports whether every packet of the message is sprayed.
func (s *Sender) Sprayed() bool { return s.kind == kindSprayed }

// Next decides the next packet (the sent-th, from 0). It may move the
// message from the middle to the tail: when the packets left are fewer
// than OPC + UPC, and always for the last one.
func (s *Sender) Next() Mark {
	switch s.kind {
	case kindPlain:
		return Mark{}
	case kindSprayed:
		return Mark{Entropy: s.entropy()}
	case kindInOrder:
		return Mark{Flagged: true, Ordinal: s.ordinal}
	}
	if s.phase == wire.PhaseMiddle {
		left := s.total - s.sent
		if left <= 1 || left < uint32(s.opc+s.upc) {
			s.phase = wire.PhaseTail
		} else {
			return Mark{Phase: wire.PhaseMiddle, Entropy: s.entropy()}
		}
	}
	return Mark{Flagged: true, Phase: s.phase, Ordinal: s.ordinal}
}

// entropy is a sprayed packet's UDP source port: in the dynamic range
// 49152..65535, varying with every packet of every message.
func (s *Sender) entropy() uint16 {
	x := uint64(s.salt)<<32 | uint64(s.sent)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return 0xc000 | uint16(x&0x3fff)
}

// Sent commits m, the mark of the packet just handed to the transport, of
// n payload bytes: OPC or UPC grows.
func (s *Sender) Sent(m Mark, n int) {
	s.sent++
	s.bytesSent += uint64(n)
	switch {
	case s.kind == kindPlain || s.kind == kindSprayed:
		return
	case m.Flagged:
		s.ordinal++
		s.opc++
		s.peakOPC = max(s.peakOPC, s.opc)
	default:
		s.upc++
		s.peakUPC = max(s.peakUPC, s.upc)
	}
}

// MustHold reports whether the next packet is the last of an IOI message
// and must wait for UPC == 0; it then holds (Holding) until Resolved
// releases it.
func (s *Sender) MustHold() bool {
	if s.kind != kindIOI || s.sent+1 != s.total || s.upc == 0 {
		return false
	}
	s.holding = true
	return true
}

// Holding reports whether the last packet waits for UPC == 0.
func (s *Sender) Holding() bool { return s.holding }

// Resolution is what Resolved decided.
type Resolution uint8

const (
	// Nothing changed the message's course.
	ResolvedNothing Resolution = iota
	// ResolvedFirst: the first response came; the message switched to the
	// middle (Phase() is PhaseMiddle) or stays in order.
	ResolvedFirst
	// ResolvedRelease: UPC reached 0 while the last packet was held: send
	// it now.
	ResolvedRelease
)

// Resolved records that one packet of the message resolved (acknowledged
// when ok, else refused or abandoned): flagged says which counter it was
// in. The first acknowledgement of a head packet is the first response:
// it updates est and decides the switch to the middle.
func (s *Sender) Resolved(flagged, ok bool, now clock.Time, est *Estimator) Resolution {
	switch {
	case s.kind != kindIOI && s.kind != kindInOrder:
		return ResolvedNothing
	case flagged:
		s.opc--
	default:
		s.upc--
	}
	if s.kind != kindIOI {
		return ResolvedNothing
	}
	if flagged && ok && !s.responded && s.phase == wire.PhaseHead {
		s.responded = true
		est.Update(now.Sub(s.start), s.bytesSent)
		t, _ := est.Threshold()
		if s.size-min(s.bytesSent, s.size) > t && s.total-s.sent > 1 {
			s.phase = wire.PhaseMiddle
		}
		return ResolvedFirst
	}
	if s.holding && s.upc == 0 {
		s.holding = false
		return ResolvedRelease
	}
	return ResolvedNothing
}

// Phase returns the phase the next packet would take (PhaseNone outside
// IOI).
func (s *Sender) Phase() wire.Phase { return s.phase }

// OPC and UPC return the outstanding in-order and sprayed packets.
func (s *Sender) OPC() int32 { return s.opc }
func (s *Sender) UPC() int32 { return s.upc }

// Peaks returns the most OPC and UPC the message reached.
func (s *Sender) Peaks() (opc, upc int32) { return s.peakOPC, s.peakUPC }

// CheckCombo reports whether a packet's phase and flag are a combination
// a sender makes: Phase None with or without the flag, Head and Tail
// flagged, Middle unflagged — and a phase only on data packets.
func CheckCombo(data bool, flagged bool, p wire.Phase) bool {
	switch p {
	case wire.PhaseNone:
		return true
	case wire.PhaseHead, wire.PhaseTail:
		return data && flagged
	case wire.PhaseMiddle:
		return data && !flagged
	}
	return false
}

// Admission is the receiver's verdict on one data packet.
type Admission uint8

const (
	// Place: unflagged, place it as it arrives.
	Place Admission = iota
	// InSequence: flagged and next in sequence; place it and hand it
	// over, then the buffered ones that follow it (Release).
	InSequence
	// Buffered: flagged, but an earlier in-order packet has not arrived
	// (the ordered path lost it): place it, and hand it over only when its
	// turn comes (Release).
	Buffered
	// OutOfSequence: flagged and too far ahead to buffer (past the
	// receiver's window): refuse it for retransmission. A window that
	// covers the transport's receive window never gives it for a packet
	// the transport accepted from an honest sender.
	OutOfSequence
	// Stale: flagged with a sequence number already taken (a forgery: the
	// transport never delivers a packet twice): drop it.
	Stale
)

// Receiver is one message's in-sequence state at the receiver. It buffers
// flagged packets up to Window() sequence numbers past the next expected,
// in the bitmap Init gives it; the zero Receiver expects sequence number 0
// and buffers nothing (every packet out of sequence is OutOfSequence).
//
// The window must cover the transport's receive window (WindowSize PSNs):
// a message's in-order packets take increasing PSNs in one window, so the
// one the receiver waits for is at least as many PSNs behind a later one
// as it is sequence numbers behind, and a packet the transport accepted
// (less than WindowSize PSNs past its window's base, which the missing
// one holds back) is less than WindowSize sequence numbers ahead. A
// narrower window refuses packets the ordered path did deliver, and their
// sender resends them for nothing.
type Receiver struct {
	next uint32
	held []uint64 // bit o%Window(): sequence number o arrived and waits
}

// Init resets r to expect sequence number 0, buffering in held (cleared
// here): a window of 64×len(held) sequence numbers. The caller owns held
// and gives each message its own.
func (r *Receiver) Init(held []uint64) {
	clear(held)
	*r = Receiver{held: held}
}

// Ready reports whether Init gave r its bitmap.
func (r *Receiver) Ready() bool { return r.held != nil }

// Window is how far past the next expected sequence number a flagged
// packet may arrive and be buffered.
func (r *Receiver) Window() uint32 { return uint32(len(r.held)) * 64 }

// Slot returns where sequence number o, buffered, is kept: o mod Window.
func (r *Receiver) Slot(o uint32) uint32 { return o % r.Window() }

func (r *Receiver) bit(o uint32) (w int, m uint64) {
	s := r.Slot(o)
	return int(s / 64), 1 << (s % 64)
}

// Admit checks one data packet of the message.
func (r *Receiver) Admit(flagged bool, ordinal uint32) Admission {
	switch {
	case !flagged:
		return Place
	case ordinal == r.next:
		r.next++
		return InSequence
	case ordinal < r.next:
		return Stale
	case ordinal-r.next >= r.Window():
		return OutOfSequence
	}
	w, m := r.bit(ordinal)
	if r.held[w]&m != 0 {
		return Stale
	}
	r.held[w] |= m
	return Buffered
}

// Release returns the next buffered sequence number whose turn has come,
// after an InSequence admission; call it until ok is false.
func (r *Receiver) Release() (ordinal uint32, ok bool) {
	if len(r.held) == 0 {
		return 0, false
	}
	w, m := r.bit(r.next)
	if r.held[w]&m == 0 {
		return 0, false
	}
	r.held[w] &^= m
	ordinal = r.next
	r.next++
	return ordinal, true
}

// Next returns the sequence number the receiver expects next.
func (r *Receiver) Next() uint32 { return r.next }
