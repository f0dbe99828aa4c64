package mcsq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/core/wire"
)

// IDKind says what an identifier names, and so which pool serves it.
type IDKind uint8

const (
	// KindQPN: a global QP number (24 bits); served by an RC pool, whose SQ
	// for that QPN is persistently connected to one target.
	KindQPN IDKind = iota + 1
	// KindFlow: a flow ID; served by a DC pool, bound to a DC SQ on demand.
	KindFlow
	// KindTuple: a 5-tuple, the identifier of TCP-like transports; served
	// by a DC pool like a flow ID.
	KindTuple
)

func (k IDKind) String() string {
	switch k {
	case KindQPN:
		return "qpn"
	case KindFlow:
		return "flow"
	case KindTuple:
		return "5-tuple"
	}
	return "kind?"
}

// FiveTuple is the identifier of a TCP-like connection.
type FiveTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
}

// ID is a WR's identifier: WRs with equal IDs go to the same SQ, in
// posting order. Build one with QPN, Flow or Tuple.
type ID struct {
	Kind  IDKind
	N     uint64    // the QPN or the flow ID
	Tuple FiveTuple // KindTuple only
}

// QPN names an RC identifier: a global QP number.
func QPN(n uint32) ID { return ID{Kind: KindQPN, N: uint64(n)} }

// Flow names a DC identifier: a flow ID.
func Flow(f uint64) ID { return ID{Kind: KindFlow, N: f} }

// Tuple names a DC identifier by its 5-tuple.
func Tuple(t FiveTuple) ID { return ID{Kind: KindTuple, Tuple: t} }

func (id ID) String() string {
	switch id.Kind {
	case KindQPN:
		return fmt.Sprintf("qpn %#x", id.N)
	case KindFlow:
		return fmt.Sprintf("flow %d", id.N)
	case KindTuple:
		t := id.Tuple
		return fmt.Sprintf("5-tuple %v:%d→%v:%d/%d", t.Src, t.SrcPort, t.Dst, t.DstPort, t.Proto)
	}
	return "id?"
}

// idKey is an ID as the binding and blacklist CAMs key it: 16 bytes. A
// 5-tuple is keyed by a 64-bit hash of it; two tuples whose hashes collide
// (about 2^-64 per pair) share one binding and one blacklist entry.
type idKey struct{ kind, val uint64 }

const tupleSeed = 0x6d637371_5475706c

func (id *ID) key() idKey {
	if id.Kind != KindTuple {
		return idKey{uint64(id.Kind), id.N}
	}
	t := &id.Tuple
	s, d := t.Src.As16(), t.Dst.As16()
	h := cam.HashWords(binary.LittleEndian.Uint64(s[:8]), binary.LittleEndian.Uint64(s[8:]), tupleSeed)
	h = cam.HashWords(binary.LittleEndian.Uint64(d[:8]), binary.LittleEndian.Uint64(d[8:])^uint64(t.SrcPort)<<24^uint64(t.DstPort)<<8^uint64(t.Proto), h)
	return idKey{uint64(KindTuple), h}
}

// Op is what a WR does.
type Op uint8

const (
	// OpPush writes Len bytes of Local at LocalAddr into the target's
	// Remote region (a txn push).
	OpPush Op = iota + 1
	// OpPull reads Len bytes of the target's Remote region into Local at
	// LocalAddr (a txn pull).
	OpPull
	// OpRegister registers Mem with Access on the engine's endpoint; the
	// CQE carries the region (CQE.Region). A local operation.
	OpRegister
	// OpDeregister deregisters Local. A local operation.
	OpDeregister
	// OpCopy copies Len bytes from Local at LocalAddr to Dst at DstAddr,
	// both registered here. A local operation.
	OpCopy
	// OpSend sends Len bytes of Local at LocalAddr two-sided (txn
	// Conn.Send): the target places them in the next receive WQE it posted
	// on the SQ's connection; Remote is ignored. Sends need a pool with
	// PoolOptions.Unordered (delivery-index placement keeps their order).
	// A target that has no WQE posted through every retry fails the SQ
	// (CauseRetryExhausted).
	OpSend
)

func (o Op) String() string {
	switch o {
	case OpPush:
		return "push"
	case OpPull:
		return "pull"
	case OpRegister:
		return "register"
	case OpDeregister:
		return "deregister"
	case OpCopy:
		return "copy"
	case OpSend:
		return "send"
	}
	return "op?"
}

// remote reports whether the op travels over an SQ to a target.
func (o Op) remote() bool { return o == OpPush || o == OpPull || o == OpSend }

// local reports whether the op runs on this side, in stream order.
func (o Op) local() bool { return o == OpRegister || o == OpDeregister || o == OpCopy }

// Target names a remote peer a DC WR goes to (Engine.AddTarget).
type Target uint32

// WR is a work request. Post copies the WR into the queue's preallocated
// table; the buffers it names are referenced, never copied: Local (and
// Mem, Dst) must stay as they are until the WR's CQE is polled.
type WR struct {
	// ID picks the pool and the SQ: a QPN goes to the queue's RC pool, a
	// flow ID or a 5-tuple to its DC pool. Local operations ignore it.
	ID ID
	// Target is where a DC WR goes (Engine.AddTarget). An RC WR's target is
	// its QPN's (Pool.AddRC).
	Target Target
	Op     Op
	// Local and LocalAddr name the local bytes: a push's source, a pull's
	// destination, a copy's source, the region a deregister drops.
	Local     txn.Region
	LocalAddr uint64
	Len       int
	// Remote names the target's region (push, pull).
	Remote wire.RegionRef
	// Dst and DstAddr name a copy's destination.
	Dst     txn.Region
	DstAddr uint64
	// Mem and Access are what OpRegister registers.
	Mem    []byte
	Access txn.Access
	// Cookie is the host's own word, returned in the CQE.
	Cookie uint64
}

// Status is how a WR (or the run of WRs a CQE covers) ended.
type Status uint8

const (
	// StatusOK: executed; a push placed, a pull's data here, a local
	// operation done.
	StatusOK Status = iota
	// StatusBlacklisted: the identifier was on the blacklist when the
	// distributor reached the WR, or its SQ failed before the WR was
	// handed to the transport: the WR was not executed at all.
	StatusBlacklisted
	// StatusSQFailed: the WR was in the transport when its SQ failed (or
	// made it fail): it may have been executed in part or in whole.
	// CQE.Cause says why, CQE.TxnStatus what the transport reported.
	StatusSQFailed
	// StatusLocalError: a local region the WR names is not registered (or
	// too small), a register failed, or the transport refused the WR's
	// shape (too long). Not executed; the SQ and the identifier are fine.
	StatusLocalError
	// StatusUnknownID: a QPN no SQ of the RC pool serves, or a DC target
	// the engine does not know. Not executed.
	StatusUnknownID
	// StatusFlushed: the engine stopped before the WR completed.
	StatusFlushed
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusBlacklisted:
		return "blacklisted"
	case StatusSQFailed:
		return "sq-failed"
	case StatusLocalError:
		return "local-error"
	case StatusUnknownID:
		return "unknown-id"
	case StatusFlushed:
		return "flushed"
	}
	return "status?"
}

// Cause is why an SQ failed and its identifier was blacklisted.
type Cause uint8

const (
	CauseNone Cause = iota
	// CauseRetryExhausted: a packet ran out of retries (txn
	// StatusAbandoned, rt.ErrRetryExhausted).
	CauseRetryExhausted
	// CauseRemoteError: the target refused a region (txn
	// StatusRemoteAccess) or its ULP failed (rt.ErrPeerFatal).
	CauseRemoteError
	// CauseRefused: the target refused the connection (rt.ErrRefused).
	CauseRefused
	// CauseUnreachable: the connection setup timed out (rt.ErrOpenTimeout).
	CauseUnreachable
	// CausePeerGone: the target forgot the connection (rt.ErrPeerReset) or
	// fell silent (rt.ErrIdleTimeout).
	CausePeerGone
	// CauseTimeout: an operation timed out (txn StatusTimeout).
	CauseTimeout
	// CauseOther: anything else that ended the connection.
	CauseOther
	// CauseUnknownQPN: on an endpoint with global QP numbers, an RC WR
	// named a QPN the transport's CAM does not know (never opened, or
	// retired with its connection). No SQ failed; the QPN is blacklisted.
	CauseUnknownQPN
	numCauses
)

var causeNames = [numCauses]string{"none", "retry-exhausted", "remote-error", "refused", "unreachable", "peer-gone", "timeout", "other", "unknown-qpn"}

func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "cause?"
}

// CQE is a completion queue entry. In ordered mode one CQE may cover a run
// of Count successful WRs, those posted with sequence numbers Seq-Count+1
// to Seq, of which it names the last (Cookie, ID, Op); an error always has
// a CQE of its own (Count 1).
type CQE struct {
	Seq    uint64 // posting sequence number of the last WR covered (from 1, per queue)
	Count  int    // WRs covered
	Cookie uint64
	ID     ID
	Op     Op
	Status Status
	// Cause says why the SQ failed (StatusBlacklisted, StatusSQFailed).
	Cause Cause
	// TxnStatus is what the transport reported for a WR it executed.
	TxnStatus txn.Status
	// Err explains a status other than StatusOK: what failed and the fix.
	Err error
	// Region is what OpRegister registered.
	Region txn.Region
	// Bytes moved by the last WR covered.
	Bytes int
}

// Errors of Post and the setup calls.
var (
	// ErrBusy: the queue's WR table is full: poll completions and post
	// again (or use PostWait). Nothing changed.
	ErrBusy = errors.New("mcsq: queue full, drain completions (Queue.Completions) and post again")
	// ErrClosed: the queue was closed; nothing is accepted after Close.
	ErrClosed = errors.New("mcsq: queue closed")
	// ErrWrongKind: the WR's identifier kind has no pool in this queue (a
	// QPN on a queue without an RC pool, a flow ID without a DC pool).
	ErrWrongKind = errors.New("mcsq: identifier kind has no pool in this queue")
	// ErrBadWR: the WR is malformed (see the wrapped message).
	ErrBadWR = errors.New("mcsq: bad work request")
	// ErrUnknownTarget: a DC WR names a Target the engine never added.
	ErrUnknownTarget = errors.New("mcsq: unknown target (add it with Engine.AddTarget first)")
	// ErrInvalidOptions is wrapped by every error of bad options.
	ErrInvalidOptions = errors.New("mcsq: invalid options")
)

// Errors a CQE carries in Err; match with errors.Is.
var (
	ErrBlacklisted = errors.New("mcsq: identifier is blacklisted (its SQ failed; Pool.Unblacklist it once fixed), WR not executed")
	ErrSQFailed    = errors.New("mcsq: the SQ failed while the WR was in flight; the remote span is undefined")
	ErrLocalRegion = errors.New("mcsq: local region refused (not registered, deregistered, or too small for the span)")
	ErrUnknownQPN  = errors.New("mcsq: no SQ of the RC pool serves this QPN (add it with Pool.AddRC)")
	// ErrQPNNotInCAM: on an endpoint with global QP numbers, the QPN names
	// no live connection (open one with Pool.OpenRC, or on the endpoint,
	// and post the QPN it returns).
	ErrQPNNotInCAM = errors.New("mcsq: the transport's QPN CAM has no live connection for this QPN (open it with Pool.OpenRC and post the QPN it returns; a closed connection's QPN is retired)")
	// ErrRCPoolFull: an RC pool on global QPNs has no SQ left to bind a
	// connection's QPN to.
	ErrRCPoolFull    = errors.New("mcsq: every SQ of the RC pool is bound (raise PoolOptions.SQs)")
	ErrFlushed       = errors.New("mcsq: engine stopped before the WR completed")
	ErrRegisterLocal = errors.New("mcsq: register failed (region table full or empty memory)")
	ErrRefusedWR     = errors.New("mcsq: the transport refused the WR's shape (see the wrapped error: too long, or a Send on an ordered pool — give Sends a pool with PoolOptions.Unordered)")
)
