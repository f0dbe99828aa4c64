package wire

import (
	"strconv"
	"strings"
)

// Type is the transport packet type (byte 4 of the header).
type Type uint8

// Packet types. The values are part of the wire format.
const (
	TypeInvalid             Type = 0
	TypeConnOpen            Type = 1  // initiator → target: open a connection; carries the initiator's source CID
	TypeConnAccept          Type = 2  // target → initiator: accept; carries the target's source CID
	TypeConnClose           Type = 3  // either side: close after every earlier request
	TypePullRequest         Type = 4  // initiator asks the target for ReqLen bytes
	TypePullData            Type = 5  // target's reply to a pull request
	TypePushRequest         Type = 6  // initiator asks to push ReqLen bytes (solicited push)
	TypePushGrant           Type = 7  // target grants a solicited push
	TypePushSolicitedData   Type = 8  // initiator's data after a grant
	TypePushUnsolicitedData Type = 9  // initiator's data sent without asking
	TypeResync              Type = 10 // fills the PSN of a packet that will never be sent
	TypeAck                 Type = 11 // cumulative ACK (BSNs in the eBSN fields)
	TypeExtendedAck         Type = 12 // ACK plus both receive bitmaps
	TypeNack                Type = 13 // negative ACK for one PSN
	// TypeSend is a two-sided send (docs/sends.md): its data goes into the target's
	// next posted receive buffer, not into a region the initiator names.
	TypeSend = Type(14)
	numTypes = 15
)

var typeNames = [numTypes]string{
	"Invalid", "ConnOpen", "ConnAccept", "ConnClose", "PullRequest", "PullData",
	"PushRequest", "PushGrant", "PushSolicitedData", "PushUnsolicitedData",
	"Resync", "Ack", "ExtendedAck", "Nack", "Send",
}

// Valid reports whether t is a defined packet type other than TypeInvalid.
func (t Type) Valid() bool { return t > TypeInvalid && t < numTypes }

func (t Type) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Window reports the sliding window a packet of this type takes its PSN
// from. Requests (pull and push requests, unsolicited push data, resync,
// connection close) ride the sender's request window; grants, pull data and
// solicited push data ride its data window, so data can never be starved
// behind requests that wait for it. ACK, extended ACK and NACK are
// unreliable and have no PSN. ConnOpen and ConnAccept have no window either:
// no window exists before they are exchanged, so the connection manager
// resends them on its own timer and the target answers a repeated ConnOpen
// with the same ConnAccept.
//
// A resync takes the PSN of the packet it stands in for; Type.Window gives
// its usual window (the request window) and Header.Window the exact one.
func (t Type) Window() Window {
	switch t {
	case TypeConnClose, TypePullRequest, TypePushRequest, TypePushUnsolicitedData, TypeResync, TypeSend:
		return WindowRequest
	case TypePullData, TypePushGrant, TypePushSolicitedData:
		return WindowData
	}
	return WindowNone
}

// Window names one of a connection's two sliding windows.
type Window uint8

// Windows. WindowRequest and WindowData are wire values (NACK body).
const (
	WindowNone    Window = 0
	WindowRequest Window = 1
	WindowData    Window = 2
)

func (w Window) String() string {
	switch w {
	case WindowNone:
		return "none"
	case WindowRequest:
		return "request"
	case WindowData:
		return "data"
	}
	return "Window(" + strconv.Itoa(int(w)) + ")"
}

// Flags is the header's flag byte (byte 5).
type Flags uint8

// Header flags. Bit 7 is reserved: sent as 0, ignored on receipt.
const (
	// FlagAckRequested asks the receiver to ACK at once instead of
	// coalescing.
	FlagAckRequested Flags = 1 << 0
	// FlagRetransmission marks a resend (same PSN); Retry counts them.
	FlagRetransmission Flags = 1 << 1
	// FlagOrdered marks a packet of an ordered connection: the target hands
	// requests to its ULP in RSN order.
	FlagOrdered Flags = 1 << 2
	// FlagIOIInOrder is IOI's in-order flag (docs/ioi.md): the receiver processes flagged
	// packets in sequence; unflagged ones are placed as they arrive.
	FlagIOIInOrder Flags = 1 << 3
	// FlagLastOfMessage marks the last packet of a message.
	FlagLastOfMessage Flags = 1 << 4
	// FlagECNEcho reports that the receiver saw a CE mark.
	FlagECNEcho Flags = 1 << 5
	// FlagHasExtension says an extension chain follows the body. Encode sets
	// or clears it from Ext.Present; after Decode it is set exactly when
	// Ext.Present is not 0 (a chain of unknown extensions reads as none).
	FlagHasExtension Flags = 1 << 6

	flagsReserved Flags = 1 << 7
)

var flagNames = [...]string{"ack-req", "retrans", "ordered", "ioi-in-order", "last", "ecn-echo", "ext"}

// Has reports whether every flag in x is set.
func (f Flags) Has(x Flags) bool { return f&x == x }

func (f Flags) String() string {
	if f == 0 {
		return "[]"
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, name := range flagNames {
		if f&(1<<i) != 0 {
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			b.WriteString(name)
		}
	}
	if f&flagsReserved != 0 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString("bit7")
	}
	b.WriteByte(']')
	return b.String()
}

// Phase is the IOI phase of a packet in a large message (docs/ioi.md): sent in order
// at the head, out of order in the middle, in order again at the tail.
type Phase uint8

// Phases (2 bits of byte 6).
const (
	PhaseNone   Phase = 0 // message below the IOI threshold, or not IOI
	PhaseHead   Phase = 1
	PhaseMiddle Phase = 2
	PhaseTail   Phase = 3
)

func (p Phase) String() string {
	switch p {
	case PhaseNone:
		return "none"
	case PhaseHead:
		return "head"
	case PhaseMiddle:
		return "middle"
	case PhaseTail:
		return "tail"
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// NackCode says why a packet was refused.
type NackCode uint8

// NACK codes. The values are part of the wire format.
const (
	// NackResourceExhausted: the receiver had no buffer for the packet;
	// resend after backing off.
	NackResourceExhausted NackCode = 1
	// NackReceiverNotReady: the target ULP cannot take the request yet;
	// resend after NackBody.RNRTimeoutMicros.
	NackReceiverNotReady NackCode = 2
	// NackBadCID: the destination CID names no connection.
	NackBadCID NackCode = 3
	// NackOutOfWindow: the PSN lies beyond the receive window.
	NackOutOfWindow NackCode = 4
	// NackULPError: the target ULP completed the request in error
	// (NackBody.ULPCode says how).
	NackULPError NackCode = 5
	// NackULPFatal: the target ULP hit an error it cannot recover from; the
	// connection should be closed.
	NackULPFatal NackCode = 6
	// NackUnexpected: the packet matches no outstanding transaction (a grant
	// or pull data for an unknown RSN/SSN).
	NackUnexpected NackCode = 7
	numNackCodes            = 8
)

var nackNames = [numNackCodes]string{
	"invalid", "resource-exhausted", "receiver-not-ready", "bad-cid",
	"out-of-window", "ulp-error", "ulp-fatal", "unexpected",
}

// Valid reports whether c is a defined NACK code.
func (c NackCode) Valid() bool { return c > 0 && c < numNackCodes }

func (c NackCode) String() string {
	if c < numNackCodes {
		return nackNames[c]
	}
	return "NackCode(" + strconv.Itoa(int(c)) + ")"
}

// ResyncCode says why a resync stands in for a packet.
type ResyncCode uint8

// Resync codes. The values are part of the wire format.
const (
	// ResyncULPError: the local ULP failed the transaction before its
	// packet could be built.
	ResyncULPError ResyncCode = 1
	// ResyncTimeout: the transaction timed out and was abandoned.
	ResyncTimeout ResyncCode = 2
	// ResyncAborted: the ULP cancelled the transaction.
	ResyncAborted ResyncCode = 3
	// ResyncRetryExhausted: an earlier packet of the transaction ran out of
	// retries.
	ResyncRetryExhausted ResyncCode = 4
	numResyncCodes                  = 5
)

var resyncNames = [numResyncCodes]string{"invalid", "ulp-error", "timeout", "aborted", "retry-exhausted"}

// Valid reports whether c is a defined resync code.
func (c ResyncCode) Valid() bool { return c > 0 && c < numResyncCodes }

func (c ResyncCode) String() string {
	if c < numResyncCodes {
		return resyncNames[c]
	}
	return "ResyncCode(" + strconv.Itoa(int(c)) + ")"
}

// PlacementMode says how a delivery index (docs/sends.md) counts.
type PlacementMode uint8

// Placement modes. The values are part of the wire format.
const (
	// PlacementAbsolute: the index names a host queue slot directly (for
	// example the receive WQE index).
	PlacementAbsolute PlacementMode = 1
	// PlacementRelative: the index counts from the last acknowledged
	// transaction of the same kind, so it stays small.
	PlacementRelative PlacementMode = 2
	// PlacementFreeRunning: a per-transaction-type counter that wraps at
	// 2^32.
	PlacementFreeRunning PlacementMode = 3
	numPlacementModes                  = 4
)

var placementNames = [numPlacementModes]string{"invalid", "absolute", "relative", "free-running"}

// Valid reports whether m is a defined placement mode.
func (m PlacementMode) Valid() bool { return m > 0 && m < numPlacementModes }

func (m PlacementMode) String() string {
	if m < numPlacementModes {
		return placementNames[m]
	}
	return "PlacementMode(" + strconv.Itoa(int(m)) + ")"
}

// OOWFlags are an ACK's out-of-window bits: since the previous ACK the
// receiver dropped at least one packet beyond that window. A sender that
// sees one should hold off (stop growing, and shrink, that window) until the
// receiver catches up.
type OOWFlags uint8

// Out-of-window bits. Bits 2–3 of the byte carry AckBody.Dup (the
// window of a duplicate report); bits 4–7 are reserved: sent as 0,
// ignored on receipt.
const (
	OOWRequest OOWFlags = 1 << 0
	OOWData    OOWFlags = 1 << 1
	oowKnown            = OOWRequest | OOWData

	ackDupShift = 2
)

func (o OOWFlags) String() string {
	switch o & oowKnown {
	case 0:
		return "[]"
	case OOWRequest:
		return "[request]"
	case OOWData:
		return "[data]"
	}
	return "[request,data]"
}
