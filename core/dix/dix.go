package dix

import (
	"errors"
	"fmt"
)

// Kind is how a Send's delivery index counts. The values of Absolute,
// Relative and FreeRunning equal wire.PlacementMode's.
type Kind uint8

const (
	// None: no index (the baseline). The packet carries the Send's
	// number only so that the receiver knows the order; the receiver
	// binds WQEs strictly in order and holds what arrives early.
	None Kind = 0
	// Absolute: the WQE's slot in the receive ring, k mod Config.Depth.
	Absolute Kind = 1
	// Relative: k minus the sender's acknowledged base, with the base's
	// low 8 bits as a tag.
	Relative Kind = 2
	// FreeRunning: k mod 2^Width.
	FreeRunning Kind = 3
)

func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case Absolute:
		return "absolute"
	case Relative:
		return "relative"
	case FreeRunning:
		return "free-running"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Carry says which packets of a Send carry its index.
type Carry uint8

const (
	// CarryEvery: every packet (and every retransmission).
	CarryEvery Carry = 0
	// CarryUntilAcked: packets built before any packet of the Send was
	// acknowledged; later ones omit it, and the receiver finds their
	// transaction by its request sequence number.
	CarryUntilAcked Carry = 1
)

// Where says which part of the packet holds the index.
type Where uint8

const (
	// InHeader: the dedicated field (the Send's SSN field).
	InHeader Where = 0
	// InExtension: the Placement extension (wire.ExtPlacement).
	InExtension Where = 1
)

// MaxOutstanding bounds Config.Outstanding for every kind: the sender's
// window of Sends not yet acknowledged.
const MaxOutstanding = 1 << 16

// DefaultOutstanding is Config.Outstanding's default (capped by the
// kind's own window).
const DefaultOutstanding = 256

// MaxDepth is the largest Config.Depth: an absolute index fits in 24
// bits, so the top byte of the header field is free for the depth tag.
const MaxDepth = 1 << 24

// ErrConfig is wrapped by every error Config.Validate returns.
var ErrConfig = errors.New("dix: invalid delivery-index configuration")

// Config is one connection's delivery index, chosen by the sender. The
// receiver learns it from each packet's descriptor, except Depth, which
// both ends must configure alike for Absolute.
type Config struct {
	Kind  Kind
	Width int // 8, 16, 24 or 32 bits (default 32; ignored for None)
	Carry Carry
	Where Where
	// Depth is the receive queue's ring size, a power of two of at most
	// 2^Width and MaxDepth (Absolute only). It must equal the receiver's
	// depth: every packet carrying an absolute index also carries
	// log2(Depth) (DepthTag), and a receiver whose queue has another depth
	// refuses the packet rather than place it in the wrong WQE.
	Depth int
	// Outstanding is the most Sends the sender has unacknowledged on the
	// connection (default DefaultOutstanding, at most the kind's window:
	// Absolute Depth/2, Relative 128 and 2^(Width-1), FreeRunning
	// 2^(Width-1)). A Send past it waits (the post is refused for now).
	Outstanding int
}

func cfgErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// WithDefaults returns c with its zero fields defaulted, or why it is
// invalid.
func (c Config) WithDefaults() (Config, error) {
	if c.Kind > FreeRunning {
		return c, cfgErr("Kind %d is not defined (use dix.None, Absolute, Relative or FreeRunning)", c.Kind)
	}
	if c.Width == 0 {
		c.Width = 32
	}
	switch c.Width {
	case 8, 16, 24, 32:
	default:
		return c, cfgErr("Width %d is not 8, 16, 24 or 32 bits", c.Width)
	}
	if c.Carry > CarryUntilAcked || c.Where > InExtension {
		return c, cfgErr("Carry %d or Where %d is not defined", c.Carry, c.Where)
	}
	if c.Kind == None && (c.Carry != CarryEvery || c.Where != InHeader) {
		return c, cfgErr("Kind None carries no index: leave Carry and Where zero")
	}
	if c.Kind == Relative && c.Where == InHeader && c.Width > 24 {
		return c, cfgErr("a relative index in the header field shares it with its 8-bit base tag: Width %d must be at most 24 (or set Where = dix.InExtension)", c.Width)
	}
	if c.Kind == Absolute {
		if c.Depth < 2 || c.Depth&(c.Depth-1) != 0 || uint64(c.Depth) > 1<<uint(c.Width) || c.Depth > MaxDepth {
			return c, cfgErr("Depth %d must be a power of two from 2 to 2^Width and at most 2^24 (the receive queue's ring size, the same at both ends: the target's txn.Options.RecvDepth)", c.Depth)
		}
	}
	w := c.kindWindow()
	if c.Outstanding == 0 {
		c.Outstanding = min(DefaultOutstanding, w)
	}
	if c.Outstanding < 1 || c.Outstanding > w {
		return c, cfgErr("Outstanding %d must be 1..%d for a %d-bit %v index", c.Outstanding, w, c.Width, c.Kind)
	}
	return c, nil
}

// Validate reports why c is invalid (after defaults), or nil.
func (c Config) Validate() error { _, err := c.WithDefaults(); return err }

// kindWindow is the most Sends a sender may have outstanding for the
// receiver's decoding to stay unambiguous.
func (c Config) kindWindow() int {
	switch c.Kind {
	case Absolute:
		return min(c.Depth/2, MaxOutstanding)
	case Relative:
		return min(1<<(c.Width-1), 128)
	case FreeRunning:
		return min(1<<(c.Width-1), MaxOutstanding)
	}
	return MaxOutstanding
}

func mask(width int) uint32 { return uint32(uint64(1)<<uint(width) - 1) }

// Encode returns the index of Send k given the sender's base (the oldest
// Send it has not seen acknowledged), and the tag that travels with it:
// the base's low 8 bits (Relative), or DepthTag(Depth) (Absolute), so
// that the receiver checks the depth the index counts modulo.
func (c *Config) Encode(k, base uint32) (index uint32, tag uint8) {
	switch c.Kind {
	case Absolute:
		return k & uint32(c.Depth-1), DepthTag(uint32(c.Depth))
	case Relative:
		return (k - base) & mask(c.Width), uint8(base)
	case FreeRunning:
		return k & mask(c.Width), 0
	}
	return k, 0
}

// DepthTag is the tag an absolute index travels with: log2(depth), for
// a power of two depth.
func DepthTag(depth uint32) uint8 {
	t := uint8(0)
	for depth > 1 {
		depth >>= 1
		t++
	}
	return t
}

// DepthMismatch reports whether a packet whose absolute index came with
// tag was built for a receive queue of another depth than depth (a
// power of two), and that depth (0 when the tag names none: 2^tag beyond
// MaxDepth, or under 2).
func DepthMismatch(tag uint8, depth uint32) (sent uint32, mismatch bool) {
	if tag == DepthTag(depth) {
		return depth, false
	}
	if tag < 1 || tag > 24 {
		return 0, true
	}
	return 1 << tag, true
}

// Decode recovers a Send's number from its index, against the receiver's
// head (the oldest WQE neither completed nor aborted) and, for Absolute,
// the receiver's ring depth (a power of two), which the tag must name
// (DepthMismatch). ok is false for an index the kind and width cannot
// have produced, or an absolute index counted modulo another depth.
func Decode(kind Kind, width int, depth uint32, index uint32, tag uint8, head uint32) (k uint32, ok bool) {
	switch kind {
	case None:
		return index, true
	case Absolute:
		if depth < 2 || depth&(depth-1) != 0 || index >= depth || uint64(depth) > uint64(1)<<uint(width) || tag != DepthTag(depth) {
			return 0, false
		}
		return nearest(head, index, depth-1), true
	case FreeRunning:
		m := mask(width)
		if index > m {
			return 0, false
		}
		return nearest(head, index, m), true
	case Relative:
		if index > mask(width) {
			return 0, false
		}
		base := head - uint32(uint8(head)-tag)
		return base + index, true
	}
	return 0, false
}

// nearest returns the number congruent to index modulo m+1 (a power of
// two) in [head-(m+1)/2, head+(m+1)/2).
func nearest(head, index, m uint32) uint32 {
	d := (index - head) & m
	if uint64(d) >= (uint64(m)+1)/2 {
		return head + d - m - 1 // head - ((m+1) - d), in uint32 arithmetic
	}
	return head + d
}

// Desc is the descriptor byte every Send packet carries (wire.Header.Desc):
// bits 0–1 the Kind, 2–3 the width ((Width/8)-1), 4 the index is in the
// Placement extension, 5 this packet omits the index. Zero is the
// baseline: no index.
type Desc uint8

const (
	descExt     Desc = 1 << 4
	descOmitted Desc = 1 << 5
	descKnown   Desc = 0x3f
)

// Desc returns the descriptor of a packet that carries the index, or
// omits it.
func (c *Config) Desc(omitted bool) Desc {
	if c.Kind == None {
		return 0
	}
	d := Desc(c.Kind) | Desc(c.Width/8-1)<<2
	if c.Where == InExtension {
		d |= descExt
	}
	if omitted {
		d |= descOmitted
	}
	return d
}

// Kind returns the descriptor's kind.
func (d Desc) Kind() Kind { return Kind(d & 3) }

// Width returns the descriptor's width in bits.
func (d Desc) Width() int { return (int(d>>2)&3 + 1) * 8 }

// InExt reports whether the index is in the Placement extension.
func (d Desc) InExt() bool { return d&descExt != 0 }

// Omitted reports whether the packet omits the index.
func (d Desc) Omitted() bool { return d&descOmitted != 0 }

// Valid reports whether d is a descriptor a sender can produce.
func (d Desc) Valid() bool {
	if d&^descKnown != 0 {
		return false
	}
	if d.Kind() == None {
		return d == 0
	}
	return true
}

func (d Desc) String() string {
	if d == 0 {
		return "none"
	}
	s := fmt.Sprintf("%v/%d", d.Kind(), d.Width())
	if d.InExt() {
		s += "/ext"
	}
	if d.Omitted() {
		s += "/omitted"
	}
	return s
}

func seqLT(a, b uint32) bool { return int32(a-b) < 0 }
