package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
)

// Format constants.
const (
	// Version is the transport header version this package speaks.
	Version = 1
	// DefaultPort is the UDP destination port of the transport. 5140 is
	// unassigned in the IANA service-name and port registry (5137 and 5145
	// are the nearest assignments) and has no Wireshark dissector.
	DefaultPort = 5140

	BaseHeaderLen      = 48 // fixed part of every transport header
	AckBodyLen         = 8  // TypeAck body
	ExtendedAckBodyLen = 40 // TypeExtendedAck body: the ACK body and two bitmaps
	NackBodyLen        = 12 // TypeNack body
	ResyncBodyLen      = 4  // TypeResync body
	// MaxExtLen is the longest extension chain (ExtWords is 8 bits).
	MaxExtLen = 255 * 4
	// MaxHeaderLen bounds BaseHeaderLen + body + extensions.
	MaxHeaderLen = BaseHeaderLen + ExtendedAckBodyLen + MaxExtLen

	MaxCID   = 1<<24 - 1 // CIDs are 24 bits
	MaxQPN   = 1<<24 - 1 // global QP numbers are 24 bits (docs/qp-translation.md)
	MaxRetry = 15        // the retry counter is 4 bits
)

// Offsets in the base header.
const (
	offVerCID     = 0
	offType       = 4
	offFlags      = 5
	offRetryPhase = 6
	offExtWords   = 7
	offPSN        = 8
	offRSN        = 12
	offSSN        = 16
	offReqEBSN    = 20
	offDataEBSN   = 24
	offTxTime     = 28
	offTxEcho     = 32
	offReqLen     = 36
	offOffset     = 40
	offPayloadLen = 44
	offHopEcho    = 46
	offDesc       = 47
)

var be = binary.BigEndian

// Header is a decoded transport header: the base fields, the body of the
// types that have one, and the extensions. It holds no slices, so encoding,
// decoding and copying it never allocate.
type Header struct {
	Version uint8  // always Version
	DestCID uint32 // the receiver's CID for this connection (24 bits)
	Type    Type
	Flags   Flags
	Retry   uint8 // resends of this PSN so far (4 bits, saturate at MaxRetry)
	Phase   Phase // IOI phase (docs/ioi.md)

	PSN uint32 // sequence number in the window Window() names
	RSN uint32 // request sequence number (transaction order, visible to the ULP)
	SSN uint32 // solicitation sequence number (solicited pushes)
	// ReqEBSN and DataEBSN piggyback the sender's receive state: the next
	// PSN it expects (its BSN) in the request and data windows of the
	// opposite direction. In an ACK or NACK they are the acknowledgement.
	ReqEBSN  uint32
	DataEBSN uint32
	// TxTime is the sender's clock in nanoseconds, truncated to 32 bits
	// (wraps every 4.29 s); TxEcho returns the TxTime of the packet being
	// answered. RTT = now - TxEcho in uint32 arithmetic.
	TxTime uint32
	TxEcho uint32
	ReqLen uint32 // total bytes of the message or request
	Offset uint32 // byte offset of this packet's payload in the message
	// PayloadLen is the number of bytes after the header (and its body and
	// extensions); it must equal what the buffer holds.
	PayloadLen uint16
	// HopEcho goes with TxEcho: the number of IP hops the echoed packet
	// crossed, as its receiver inferred from the TTL it arrived with
	// (HopsFromTTL). It feeds the per-hop part of a delay-based
	// congestion controller's target (Swift); meaningless when TxEcho is 0.
	HopEcho uint8
	// Desc is a Send's delivery-index descriptor (docs/sends.md; its bits are
	// core/dix.Desc): byte 47, which other types send as 0 and receivers
	// ignore (it decodes as 0 for them).
	Desc uint8

	Ack    AckBody    // TypeAck and TypeExtendedAck
	Nack   NackBody   // TypeNack
	Resync ResyncBody // TypeResync
	Ext    Ext        // extensions; Encode sets FlagHasExtension from Ext.Present
}

// AckBody follows the base header of TypeAck (the first 8 bytes) and
// TypeExtendedAck (all 40). The receiver's BSNs travel in the base header's
// ReqEBSN and DataEBSN, its transmit time in TxTime, and the TxTime of the
// packet that triggered the ACK in TxEcho.
type AckBody struct {
	// OOW: the receiver dropped a packet beyond the named window since its
	// previous ACK; hold off.
	OOW OOWFlags
	// RxBufLevel is the receiver's buffer occupancy, quantised to 0–255.
	RxBufLevel uint8
	// OOWCount counts out-of-window drops since the previous ACK
	// (saturating).
	OOWCount uint16
	// Dup reports that a reliable packet of that window came again (the
	// receiver had it already: received, or before its window), a
	// duplicate-SACK: its PSN is the base header's PSN field, unused by
	// ACKs otherwise. WindowNone: no report. Its sender learns that a
	// resend was not needed (core/rt widens its reordering window).
	Dup Window
	// RxTime is when the receiver got the packet whose TxTime is echoed
	// (its clock, ns, 32 bits), so the sender can remove the receiver's
	// turnaround from the RTT: (now - TxEcho) - (TxTime - RxTime).
	RxTime uint32
	// ReqBitmap and DataBitmap are the receive bitmaps of the two windows
	// (bit n = PSN eBSN+n received); TypeExtendedAck only.
	ReqBitmap  Bitmap128
	DataBitmap Bitmap128
}

// NackBody follows the base header of TypeNack.
type NackBody struct {
	Code    NackCode
	Window  Window // the window of the refused packet: WindowRequest or WindowData
	ULPCode uint8  // ULP-specific detail for NackULPError and NackULPFatal
	PSN     uint32 // the refused packet's PSN
	// RNRTimeoutMicros is how long to wait before resending, for
	// NackReceiverNotReady (and a hint for NackResourceExhausted).
	RNRTimeoutMicros uint32
}

// ResyncBody follows the base header of TypeResync.
type ResyncBody struct {
	Code ResyncCode
	// OrigType is the type of the packet the resync stands in for; the
	// resync takes that packet's PSN in that packet's window.
	OrigType Type
}

// Bitmap128 is a sequence-number bitmap: bit n stands for PSN BSN+n. On the
// wire it is 16 bytes read as a bit string, first bit first: bit n is
// 0x80>>(n%8) of byte n/8. In memory word 0 holds bits 0–63, bit n at
// 1<<(63-n).
type Bitmap128 [2]uint64

// Has reports whether bit n is set; n ≥ 128 is never set.
func (m Bitmap128) Has(n uint32) bool {
	if n >= 128 {
		return false
	}
	return m[n>>6]>>(63-(n&63))&1 != 0
}

// Set sets bit n; n ≥ 128 is ignored.
func (m *Bitmap128) Set(n uint32) {
	if n < 128 {
		m[n>>6] |= 1 << (63 - (n & 63))
	}
}

// Clear clears bit n; n ≥ 128 is ignored.
func (m *Bitmap128) Clear(n uint32) {
	if n < 128 {
		m[n>>6] &^= 1 << (63 - (n & 63))
	}
}

// Count returns the number of set bits.
func (m Bitmap128) Count() int { return bits.OnesCount64(m[0]) + bits.OnesCount64(m[1]) }

func (m Bitmap128) String() string { return fmt.Sprintf("%016x%016x", m[0], m[1]) }

// bodyLen is the length of the body that type t carries after the base
// header (0 for an invalid type).
func bodyLen(t Type) int {
	switch t {
	case TypeAck:
		return AckBodyLen
	case TypeExtendedAck:
		return ExtendedAckBodyLen
	case TypeNack:
		return NackBodyLen
	case TypeResync:
		return ResyncBodyLen
	}
	return 0
}

// needsSourceCID reports whether type t must carry the source-CID
// extension: the peer learns the CID to address from it.
func needsSourceCID(t Type) bool { return t == TypeConnOpen || t == TypeConnAccept }

// Window reports the window the packet's PSN belongs to: Type.Window, except
// that a resync takes the window of the type it stands in for.
func (h *Header) Window() Window {
	if h.Type == TypeResync {
		return h.Resync.OrigType.Window()
	}
	return h.Type.Window()
}

// Len returns the encoded length of the header: base, body and extensions.
// The payload is not included.
func (h *Header) Len() int { return BaseHeaderLen + bodyLen(h.Type) + h.Ext.Len() }

// Validate reports the first field that Encode would refuse.
func (h *Header) Validate() error {
	switch {
	case h.Version != Version:
		return fmt.Errorf("%w: version %d is not %d (set Header.Version = wire.Version)", ErrVersion, h.Version, Version)
	case h.DestCID > MaxCID:
		return fmt.Errorf("%w: destination CID %#x exceeds 24 bits (max %#x)", ErrField, h.DestCID, MaxCID)
	case !h.Type.Valid():
		return fmt.Errorf("%w: %v", ErrType, h.Type)
	case h.Flags&flagsReserved != 0:
		return fmt.Errorf("%w: flags %#02x set reserved bit 7", ErrField, uint8(h.Flags))
	case h.Retry > MaxRetry:
		return fmt.Errorf("%w: retry %d exceeds %d (saturate the counter)", ErrField, h.Retry, MaxRetry)
	case h.Phase > PhaseTail:
		return fmt.Errorf("%w: phase %d exceeds %d", ErrField, h.Phase, PhaseTail)
	}
	switch h.Type {
	case TypeAck, TypeExtendedAck:
		if h.Ack.OOW&^oowKnown != 0 {
			return fmt.Errorf("%w: ack OOW flags %#02x set reserved bits", ErrField, uint8(h.Ack.OOW))
		}
		if h.Ack.Dup > WindowData {
			return fmt.Errorf("%w: ack duplicate report window %v is not none, request or data", ErrField, h.Ack.Dup)
		}
	case TypeNack:
		if !h.Nack.Code.Valid() {
			return fmt.Errorf("%w: nack code %d is not defined", ErrBody, h.Nack.Code)
		}
		if h.Nack.Window != WindowRequest && h.Nack.Window != WindowData {
			return fmt.Errorf("%w: nack window %v is not request or data", ErrBody, h.Nack.Window)
		}
	case TypeResync:
		if !h.Resync.Code.Valid() {
			return fmt.Errorf("%w: resync code %d is not defined", ErrBody, h.Resync.Code)
		}
		if !resyncOrigOK(h.Resync.OrigType) {
			return fmt.Errorf("%w: resync stands in for %v, which has no PSN", ErrBody, h.Resync.OrigType)
		}
	}
	if needsSourceCID(h.Type) && h.Ext.Present&ExtSourceCID == 0 {
		return fmt.Errorf("%w: %v needs the source-CID extension (set Ext.Present |= wire.ExtSourceCID)", ErrExtension, h.Type)
	}
	return h.Ext.Validate()
}

func resyncOrigOK(t Type) bool { return t != TypeResync && t.Window() != WindowNone }

// Encode writes the header (base, body, extensions) to b and returns its
// length; the payload of h.PayloadLen bytes goes after it, written by the
// caller. Bodies the type does not carry are ignored. b must hold Len()
// bytes, else ErrShort.
func (h *Header) Encode(b []byte) (int, error) {
	if err := h.Validate(); err != nil {
		return 0, err
	}
	n := h.Len()
	if len(b) < n {
		return 0, fmt.Errorf("%w: header needs %d bytes, buffer has %d", ErrShort, n, len(b))
	}
	h.put(b, h.PayloadLen)
	return n, nil
}

// put writes a validated header with the given payload length; b holds
// Len() bytes.
func (h *Header) put(b []byte, payloadLen uint16) {
	extLen := h.Ext.Len()
	bl := bodyLen(h.Type)
	b = b[:BaseHeaderLen+bl+extLen]
	flags := h.Flags &^ FlagHasExtension
	if extLen > 0 {
		flags |= FlagHasExtension
	}
	be.PutUint32(b[offVerCID:], uint32(h.Version)<<28|h.DestCID)
	b[offType] = byte(h.Type)
	b[offFlags] = byte(flags)
	b[offRetryPhase] = h.Retry<<4 | byte(h.Phase)<<2
	b[offExtWords] = byte(extLen / 4)
	be.PutUint32(b[offPSN:], h.PSN)
	be.PutUint32(b[offRSN:], h.RSN)
	be.PutUint32(b[offSSN:], h.SSN)
	be.PutUint32(b[offReqEBSN:], h.ReqEBSN)
	be.PutUint32(b[offDataEBSN:], h.DataEBSN)
	be.PutUint32(b[offTxTime:], h.TxTime)
	be.PutUint32(b[offTxEcho:], h.TxEcho)
	be.PutUint32(b[offReqLen:], h.ReqLen)
	be.PutUint32(b[offOffset:], h.Offset)
	be.PutUint16(b[offPayloadLen:], payloadLen)
	b[offHopEcho] = h.HopEcho
	b[offDesc] = 0
	if h.Type == TypeSend {
		b[offDesc] = h.Desc
	}
	body := b[BaseHeaderLen:]
	switch h.Type {
	case TypeAck, TypeExtendedAck:
		body[0] = byte(h.Ack.OOW) | byte(h.Ack.Dup)<<ackDupShift
		body[1] = h.Ack.RxBufLevel
		be.PutUint16(body[2:], h.Ack.OOWCount)
		be.PutUint32(body[4:], h.Ack.RxTime)
		if h.Type == TypeExtendedAck {
			be.PutUint64(body[8:], h.Ack.ReqBitmap[0])
			be.PutUint64(body[16:], h.Ack.ReqBitmap[1])
			be.PutUint64(body[24:], h.Ack.DataBitmap[0])
			be.PutUint64(body[32:], h.Ack.DataBitmap[1])
		}
	case TypeNack:
		body[0] = byte(h.Nack.Code)
		body[1] = byte(h.Nack.Window)
		body[2] = h.Nack.ULPCode
		body[3] = 0
		be.PutUint32(body[4:], h.Nack.PSN)
		be.PutUint32(body[8:], h.Nack.RNRTimeoutMicros)
	case TypeResync:
		body[0] = byte(h.Resync.Code)
		body[1] = byte(h.Resync.OrigType)
		body[2], body[3] = 0, 0
	}
	h.Ext.put(body[bl:])
}

// DecodeHeader decodes the transport header at the start of b, which must
// be exactly one UDP payload: header, then PayloadLen bytes. It returns the
// header and its length (the payload is b[n:]). It never panics; errors are
// ErrShort, ErrVersion, ErrType, ErrBody, ErrExtension and ErrLength, and the
// Header is zero on error.
func DecodeHeader(b []byte) (Header, int, error) {
	var h Header
	n, err := h.Decode(b)
	if err != nil {
		return Header{}, 0, err
	}
	return h, n, nil
}

// Decode is DecodeHeader into h, for callers that keep a Header in place.
// On error h holds garbage.
func (h *Header) Decode(b []byte) (int, error) {
	if len(b) < BaseHeaderLen {
		return 0, ErrShort
	}
	w0 := be.Uint32(b[offVerCID:])
	if w0>>28 != Version {
		return 0, ErrVersion
	}
	t := Type(b[offType])
	if !t.Valid() {
		return 0, ErrType
	}
	flags := Flags(b[offFlags]) &^ flagsReserved
	extLen := int(b[offExtWords]) * 4
	if (flags&FlagHasExtension != 0) != (extLen != 0) {
		return 0, ErrExtension
	}
	h.setBase(b, w0, t, flags, be.Uint16(b[offPayloadLen:]))
	h.clearBodies()
	bl := bodyLen(t)
	n := BaseHeaderLen + bl + extLen
	if len(b) < n {
		return 0, ErrShort
	}
	body := b[BaseHeaderLen : BaseHeaderLen+bl]
	switch t {
	case TypeAck, TypeExtendedAck:
		h.Ack.decode(body)
	case TypeNack:
		h.Nack = NackBody{
			Code:             NackCode(body[0]),
			Window:           Window(body[1]),
			ULPCode:          body[2],
			PSN:              be.Uint32(body[4:]),
			RNRTimeoutMicros: be.Uint32(body[8:]),
		}
		if !h.Nack.Code.Valid() || (h.Nack.Window != WindowRequest && h.Nack.Window != WindowData) {
			return 0, ErrBody
		}
	case TypeResync:
		h.Resync = ResyncBody{Code: ResyncCode(body[0]), OrigType: Type(body[1])}
		if !h.Resync.Code.Valid() || !resyncOrigOK(h.Resync.OrigType) {
			return 0, ErrBody
		}
	}
	if err := h.Ext.Decode(b[BaseHeaderLen+bl : n]); err != nil {
		return 0, err
	}
	if h.Ext.Present == 0 {
		// Only extensions this version does not know: as if there were
		// none, so that the flag always says whether Ext holds anything.
		h.Flags &^= FlagHasExtension
	}
	if needsSourceCID(t) && h.Ext.Present&ExtSourceCID == 0 {
		return 0, ErrExtension
	}
	if len(b)-n != int(h.PayloadLen) {
		return 0, ErrLength
	}
	return n, nil
}

// setBase fills the base header's fields from b (BaseHeaderLen bytes) given
// its first word, type, flags and payload length, which the caller read and
// checked. Field by field: a composite literal assigned through h is built
// on the stack and copied, and the copy's wide loads stall on the narrow
// stores that built it.
func (h *Header) setBase(b []byte, w0 uint32, t Type, flags Flags, payloadLen uint16) {
	b = b[:BaseHeaderLen]
	rp := b[offRetryPhase]
	h.Version = Version
	h.DestCID = w0 & MaxCID
	h.Type = t
	h.Flags = flags
	h.Retry = rp >> 4
	h.Phase = Phase(rp>>2) & 3
	h.PSN = be.Uint32(b[offPSN:])
	h.RSN = be.Uint32(b[offRSN:])
	h.SSN = be.Uint32(b[offSSN:])
	h.ReqEBSN = be.Uint32(b[offReqEBSN:])
	h.DataEBSN = be.Uint32(b[offDataEBSN:])
	h.TxTime = be.Uint32(b[offTxTime:])
	h.TxEcho = be.Uint32(b[offTxEcho:])
	h.ReqLen = be.Uint32(b[offReqLen:])
	h.Offset = be.Uint32(b[offOffset:])
	h.PayloadLen = payloadLen
	h.HopEcho = b[offHopEcho]
	h.Desc = 0
	if t == TypeSend {
		h.Desc = b[offDesc]
	}
}

// decode fills the body of an ACK (AckBodyLen bytes) or an extended ACK
// (ExtendedAckBodyLen bytes, the length of body says which) from body; a
// fresh AckBody is zero, and decode leaves the bitmaps of an ACK so.
func (a *AckBody) decode(body []byte) {
	a.OOW = OOWFlags(body[0]) & oowKnown
	if d := Window(body[0]>>ackDupShift) & 3; d <= WindowData {
		a.Dup = d // 3 is reserved: no report
	}
	a.RxBufLevel = body[1]
	a.OOWCount = be.Uint16(body[2:])
	a.RxTime = be.Uint32(body[4:])
	if len(body) == ExtendedAckBodyLen {
		a.ReqBitmap = Bitmap128{be.Uint64(body[8:]), be.Uint64(body[16:])}
		a.DataBitmap = Bitmap128{be.Uint64(body[24:]), be.Uint64(body[32:])}
	}
}

// clearBodies zeroes the bodies and extensions, one statement each (a
// tuple assignment goes through temporaries).
func (h *Header) clearBodies() {
	h.Ack = AckBody{}
	h.Nack = NackBody{}
	h.Resync = ResyncBody{}
	h.Ext = Ext{}
}

// String renders the header on one line for logs and `peregrine decode`.
func (h *Header) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v cid=%#06x", h.Type, h.DestCID)
	if w := h.Window(); w != WindowNone {
		fmt.Fprintf(&b, " win=%v psn=%d", w, h.PSN)
	}
	fmt.Fprintf(&b, " rsn=%d ssn=%d ebsn=r%d/d%d flags=%v retry=%d phase=%v tx=%d echo=%d hops=%d",
		h.RSN, h.SSN, h.ReqEBSN, h.DataEBSN, h.Flags, h.Retry, h.Phase, h.TxTime, h.TxEcho, h.HopEcho)
	fmt.Fprintf(&b, " reqlen=%d off=%d len=%d", h.ReqLen, h.Offset, h.PayloadLen)
	if h.Type == TypeSend {
		fmt.Fprintf(&b, " desc=%#02x", h.Desc)
	}
	switch h.Type {
	case TypeAck, TypeExtendedAck:
		fmt.Fprintf(&b, " oow=%v oowcount=%d rxbuf=%d rxtime=%d", h.Ack.OOW, h.Ack.OOWCount, h.Ack.RxBufLevel, h.Ack.RxTime)
		if h.Ack.Dup != WindowNone {
			fmt.Fprintf(&b, " dup=%v/%d", h.Ack.Dup, h.PSN)
		}
		if h.Type == TypeExtendedAck {
			fmt.Fprintf(&b, " reqmap=%v datamap=%v", h.Ack.ReqBitmap, h.Ack.DataBitmap)
		}
	case TypeNack:
		fmt.Fprintf(&b, " nack=%v nackwin=%v nackpsn=%d ulp=%d rnr=%dus",
			h.Nack.Code, h.Nack.Window, h.Nack.PSN, h.Nack.ULPCode, h.Nack.RNRTimeoutMicros)
	case TypeResync:
		fmt.Fprintf(&b, " resync=%v for=%v", h.Resync.Code, h.Resync.OrigType)
	}
	if h.Ext.Present != 0 {
		b.WriteByte(' ')
		b.WriteString(h.Ext.String())
	}
	return b.String()
}
