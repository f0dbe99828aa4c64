package txn

import (
	"errors"
	"fmt"

	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Defaults of Options.
const (
	DefaultMaxOps           = 4096
	DefaultMaxRegions       = 64
	DefaultSolicitThreshold = 8 << 10
	DefaultIncastCap        = 256 << 10
	MaxMessage              = 1 << 30
)

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("txn: invalid options")

// Options configure New. Transport is required (see rt.Options); the zero
// values of the others select the documented defaults.
type Options struct {
	// Transport configures the reliable transport below. Its Congestion
	// field is set from Congestion here unless already set.
	Transport rt.Options

	// MaxOps is the most transactions in progress at once on this
	// endpoint, both roles together: operations this side posted and
	// requests the peers sent it (default 4096). Each takes a context and
	// one or two reorder-engine entries; posting past it is refused with
	// ErrBusy.
	MaxOps int
	// CQSize is the completion queue's capacity (default MaxOps). An
	// operation is only accepted when its completion is sure to fit, so
	// completions are never lost: drain the queue with Completions.
	CQSize int
	// MaxRegions is how many memory regions can be registered (default 64).
	MaxRegions int
	// SolicitThreshold: pushes of more bytes than this ask the target for
	// a grant first (solicited); smaller ones send their data at once
	// (default 8 KiB). Negative: every push is unsolicited.
	SolicitThreshold int
	// IncastCap bounds, per endpoint, the bytes this side granted to
	// solicited pushes and has not yet received (default 256 KiB). A
	// single push larger than the cap is granted alone.
	IncastCap int
	// Segment is the payload bytes per packet (0: the most one frame
	// holds given the port's MTU and the pool's frames).
	Segment int
	// Quantum and RoundRobin configure the TX scheduler's arbitration
	// between connections (sched.Options).
	Quantum    int
	RoundRobin bool
	// Congestion selects Swift, delay-based congestion control, with
	// these parameters; nil keeps the transport's fixed window.
	Congestion *swift.Params
	// OnRequest is the target ULP: it sees every request a peer made of
	// this endpoint once it is complete (a push's data all placed, a pull
	// about to be served) — in request order on ordered connections. It
	// runs on the polling goroutine; r and r.Data are valid during the call
	// only. It may post operations.
	OnRequest func(r *Request)
	// OnAborted is told of a request the initiator gave up on (abandoned,
	// timed out, cancelled) after this side had begun it: a push whose
	// data may be partly placed (r.Data: the span, contents undefined), a
	// pull not yet served. It comes in the request's turn on ordered
	// connections, never after OnRequest for the same request; r is
	// valid during the call only. It is also told, when a connection
	// ends, of each request of it held here and never handed to
	// OnRequest (waiting for its turn or its data: its initiator may have
	// seen it all acknowledged, but completes it StatusConnFailed), and
	// may not post on that connection then. Nil: such requests are
	// dropped quietly.
	OnAborted func(r *Request)
	// OnConnEvent receives the connection events (ConnEvent): established,
	// failed (with the reason), closed. They are the asynchronous events
	// of this layer (as ibv_get_async_event and the rdma_cm event channel
	// are beside the completion queue in rdma-core), delivered on the
	// polling goroutine. A connection's failure or close event comes
	// after the completions of all its operations are queued. It may
	// post on other connections and Open, Close or Abort.
	OnConnEvent func(ev ConnEvent)
	// RecvDepth is each connection's receive queue size in WQEs, a power
	// of two (default 256; the peer's dix.Config.Depth for an absolute
	// index). RecvElements bounds its special receive queue, the Sends
	// bound out of order at once (default 64; a full table answers RNR).
	// HoldBytes is the hold buffer of baseline Sends (dix.None) that come
	// before their turn (0: none, such packets are refused for now).
	RecvDepth    int
	RecvElements int
	HoldBytes    int
	// InitialSeq is the first request sequence number (RSN) and solicited
	// sequence number (SSN) of every connection (and its first Send
	// number), in both directions: the
	// RSNs and SSNs this side assigns and those it expects from its peers.
	// Both endpoints of a connection must use the same value (the
	// connection setup does not carry it). Default 0; set it near 2^32 to
	// exercise the wrap.
	InitialSeq uint32
	// IOI configures IOI forwarding (docs/ioi.md, ioi.Config) for every
	// connection that does not set ConnOptions.IOI: the data of pushes
	// this side posts and of pulls it serves. Zero: off.
	IOI ioi.Config
	// OnInOrder, when set, is handed each in-order (IOI-flagged) data
	// packet of a message this side receives, in sequence, as it is
	// placed: the head's bytes in order as they arrive, then the tail's.
	// data aliases the packet and is valid during the call only. It runs on
	// the polling goroutine and must not post.
	OnInOrder func(c *Conn, rsn uint32, offset uint32, data []byte)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxOps == 0 {
		o.MaxOps = DefaultMaxOps
	}
	if o.MaxOps < 1 || o.MaxOps > 1<<20 {
		return o, invalid("Options.MaxOps %d out of range (use 1..%d)", o.MaxOps, 1<<20)
	}
	if o.CQSize == 0 {
		o.CQSize = o.MaxOps
	}
	if o.CQSize < 1 {
		return o, invalid("Options.CQSize %d must be positive", o.CQSize)
	}
	if o.MaxRegions == 0 {
		o.MaxRegions = DefaultMaxRegions
	}
	if o.MaxRegions < 1 || o.MaxRegions > 1<<16 {
		return o, invalid("Options.MaxRegions %d out of range (use 1..65536)", o.MaxRegions)
	}
	if o.SolicitThreshold == 0 {
		o.SolicitThreshold = DefaultSolicitThreshold
	}
	if o.IncastCap == 0 {
		o.IncastCap = DefaultIncastCap
	}
	if o.IncastCap < 0 {
		return o, invalid("Options.IncastCap %d must be positive (bytes granted and not yet received)", o.IncastCap)
	}
	if o.RecvDepth == 0 {
		o.RecvDepth = DefaultRecvDepth
	}
	if o.RecvDepth < 2 || o.RecvDepth&(o.RecvDepth-1) != 0 || o.RecvDepth > 1<<16 {
		return o, invalid("Options.RecvDepth %d must be a power of two from 2 to 65536", o.RecvDepth)
	}
	if o.RecvElements == 0 {
		o.RecvElements = DefaultRecvElements
	}
	if o.RecvElements < 0 || o.HoldBytes < 0 {
		return o, invalid("Options.RecvElements %d and HoldBytes %d must not be negative", o.RecvElements, o.HoldBytes)
	}
	if o.Segment < 0 {
		return o, invalid("Options.Segment %d must not be negative (0 selects the largest that fits)", o.Segment)
	}
	if err := o.IOI.Validate(); err != nil {
		return o, invalid("Options.IOI: %v", err)
	}
	if o.Congestion != nil {
		if err := o.Congestion.Validate(); err != nil {
			return o, invalid("Options.Congestion: %v", err)
		}
		if o.Transport.Congestion == nil {
			p := *o.Congestion
			o.Transport.Congestion = func() rt.CongestionControl {
				c := new(swift.Controller)
				_ = c.Init(p) // validated above
				return c
			}
		}
	}
	if o.Transport.Port == nil || o.Transport.Pool == nil {
		return o, invalid("Options.Transport.Port and .Pool are required")
	}
	return o, nil
}

// segmentFor returns the largest payload a packet of ours carries on this
// port: the frame (pool frame or MTU, whichever is smaller) minus every
// header, with the region extension present.
func segmentFor(o *Options) (int, error) {
	frame := o.Transport.Pool.FrameSize() - o.Transport.Pool.Headroom()
	if mtu := o.Transport.Port.Info().MTU; mtu > 0 {
		frame = min(frame, wire.EthHeaderLen+mtu)
	}
	a := wire.Addrs{SrcIP: o.Transport.LocalIP, DstIP: o.Transport.LocalIP}
	h := wire.Header{Version: wire.Version, Type: wire.TypePushUnsolicitedData, Ext: wire.Ext{Present: wire.ExtRegion}}
	if o.Transport.QPN.Enabled {
		h.Ext.Present |= wire.ExtQPN // global QP numbers ride in every packet
	}
	if !o.Transport.NoSeal {
		h.Ext.Present |= wire.ExtSeal // so does the integrity tag
	}
	over, err := wire.FrameOverhead(&a, &h)
	if err != nil {
		return 0, invalid("Options.Transport.LocalIP: %v", err)
	}
	most := frame - over
	if most < 64 {
		return 0, invalid("frames of %d bytes leave %d for payload (need at least 64: raise the MTU or the pool's frame size)", frame, most)
	}
	if o.Segment == 0 {
		return most, nil
	}
	if o.Segment > most {
		return 0, invalid("Options.Segment %d exceeds the %d payload bytes a frame holds (use 0 or at most %d)", o.Segment, most, most)
	}
	return o.Segment, nil
}
