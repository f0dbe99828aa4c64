package wire

import (
	"fmt"
	"math/bits"
)

// maxTemplateLen is the longest Ethernet, IP and UDP header: IPv6.
const maxTemplateLen = EthHeaderLen + IPv6HeaderLen + UDPHeaderLen

// FrameTemplate holds the Ethernet, IP and UDP headers of every frame to one
// peer, built once from its Addrs, with the parts of both checksums that do
// not depend on the frame already summed. Encode then copies the headers,
// patches the lengths and finishes the checksums: a connection that sends
// many frames (ACKs, data) pays for Addrs once rather than per frame. The
// frames are byte for byte those of EncodeFrame with the same Addrs.
//
// A FrameTemplate is a plain value (no pointers); copying it copies the
// template.
type FrameTemplate struct {
	hdr     [maxTemplateLen]byte
	hdrLen  uint8 // EthHeaderLen + IP header + UDPHeaderLen
	v6      bool
	csum    bool   // the UDP checksum is computed (always on IPv6)
	ipSum   uint64 // IPv4: header sum with total length and checksum 0
	pseudo  uint64 // pseudo-header sum without the UDP length
	present bool
}

// NewFrameTemplate validates a like EncodeFrame does and builds its
// template.
func NewFrameTemplate(a *Addrs) (FrameTemplate, error) {
	var t FrameTemplate
	l3len, err := a.l3Len()
	if err != nil {
		return t, err
	}
	// putDatagram with a zero-length payload fills every constant field;
	// the lengths and checksums are overwritten per frame.
	end := EthHeaderLen + l3len + UDPHeaderLen
	if _, _, err := putDatagram(t.hdr[:], a, l3len, 0); err != nil {
		return t, err
	}
	t.hdrLen = uint8(end)
	t.v6 = l3len == IPv6HeaderLen
	t.csum = t.v6 || !a.NoUDPChecksum
	ip := t.hdr[EthHeaderLen : EthHeaderLen+l3len]
	if !t.v6 {
		be.PutUint16(ip[2:], 0)  // total length
		be.PutUint16(ip[10:], 0) // header checksum
		t.ipSum = csumAdd(0, ip)
	} else {
		be.PutUint16(ip[4:], 0) // payload length
	}
	be.PutUint16(t.hdr[end-UDPHeaderLen+4:], 0) // UDP length
	t.pseudo = pseudoSum(ip, t.v6, 0)
	t.present = true
	return t, nil
}

// HeaderLen returns the bytes the template writes in front of the
// transport header.
func (t *FrameTemplate) HeaderLen() int { return int(t.hdrLen) }

// Encode is EncodeFrame for the template's Addrs: it builds Ethernet, IP,
// UDP, the transport header and payload into b and returns the frame
// length. Like EncodeFrame it validates h, sets the payload length from
// len(payload), and does not allocate. A zero FrameTemplate (not made by
// NewFrameTemplate) is ErrAddr.
func (t *FrameTemplate) Encode(b []byte, h *Header, payload []byte) (int, error) {
	hdr, end, err := t.encode(b, h, payload, len(payload))
	if err != nil {
		return 0, err
	}
	if end < MinFrameLen {
		clear(b[hdr+len(payload) : MinFrameLen])
		end = MinFrameLen
	}
	return end, nil
}

// EncodeHeaders is Encode without the payload: it writes only the headers
// into b, with the lengths of a payloadLen-byte payload and a UDP checksum
// over the headers alone, and returns how many bytes it wrote and the
// length of the whole frame. A sender that keeps the payload elsewhere (a
// retransmission engine holding a reference to the caller's memory) sends
// the frame as these headers, then the payload copied with CopyChecksum,
// then zeros up to frameLen, and finishes the checksum with AddPayloadSum:
// one pass over the payload. The headers' length is always even, so the
// payload's words keep their places in the sum.
func (t *FrameTemplate) EncodeHeaders(b []byte, h *Header, payloadLen int) (hdrLen, frameLen int, err error) {
	hdrLen, end, err := t.encode(b, h, nil, payloadLen)
	if err != nil {
		return 0, 0, err
	}
	return hdrLen, max(end, MinFrameLen), nil
}

// AddPayloadSum adds a payload's sum (CopyChecksum's, starting from 0) to
// the UDP checksum of frame, built by EncodeHeaders on t. Without a UDP
// checksum (IPv4 with Addrs.NoUDPChecksum) it does nothing.
func (t *FrameTemplate) AddPayloadSum(frame []byte, sum uint64) {
	if !t.csum {
		return
	}
	ck := frame[int(t.hdrLen)-UDPHeaderLen+6:]
	// ^checksum is the folded sum so far, in network order: back into the
	// running sum's order, plus the payload's.
	s, c := bits.Add64(uint64(bits.ReverseBytes16(^be.Uint16(ck))), sum, 0)
	v := ^csumFold(s + c)
	if v == 0 {
		v = 0xffff
	}
	be.PutUint16(ck, v)
}

// encode writes the headers for a payloadLen-byte payload, and payload
// when it is not nil (then payloadLen is its length), and returns where the
// payload starts and ends.
func (t *FrameTemplate) encode(b []byte, h *Header, payload []byte, payloadLen int) (hdrEnd, end int, err error) {
	copyPayload := payload != nil
	if !t.present {
		return 0, 0, fmt.Errorf("%w: frame template was not built (use NewFrameTemplate)", ErrAddr)
	}
	if err := h.Validate(); err != nil {
		return 0, 0, err
	}
	hl := h.Len()
	off := int(t.hdrLen)
	udpLen := UDPHeaderLen + hl + payloadLen
	ipLen := udpLen // IPv6 payload length
	if !t.v6 {
		ipLen += IPv4HeaderLen
	}
	if payloadLen < 0 || payloadLen > 0xffff || ipLen > 0xffff {
		return 0, 0, fmt.Errorf("%w: UDP payload of %d bytes does not fit an IP packet", ErrField, hl+payloadLen)
	}
	hdrEnd = off + hl
	end = hdrEnd + payloadLen
	need := hdrEnd
	if copyPayload {
		need = max(end, MinFrameLen)
	}
	if len(b) < need {
		return 0, 0, fmt.Errorf("%w: frame needs %d bytes, buffer has %d", ErrShort, need, len(b))
	}
	copy(b[:off], t.hdr[:off])
	if copyPayload && !t.csum {
		copy(b[hdrEnd:end], payload)
	}
	h.put(b[off:hdrEnd], uint16(payloadLen))
	ip := b[EthHeaderLen:]
	l4 := off - UDPHeaderLen
	if !t.v6 {
		be.PutUint16(ip[2:], uint16(ipLen))
		s, c := bits.Add64(t.ipSum, uint64(bits.ReverseBytes16(uint16(ipLen))), 0)
		be.PutUint16(ip[10:], ^csumFold(s+c))
	} else {
		be.PutUint16(ip[4:], uint16(ipLen))
	}
	be.PutUint16(b[l4+4:], uint16(udpLen))
	if t.csum {
		s, c := bits.Add64(t.pseudo, uint64(bits.ReverseBytes16(uint16(udpLen))), 0)
		sum := csumAdd(s+c, b[l4:hdrEnd]) // EncodeHeaders: AddPayloadSum adds the rest
		if copyPayload {
			// One pass over the payload instead of a copy and then a sum
			// of the copy. The headers' length is even, so the payload's
			// words keep their places in the sum.
			sum = CopyChecksum(b[hdrEnd:end], payload, sum)
		}
		ck := ^csumFold(sum)
		if ck == 0 {
			ck = 0xffff
		}
		be.PutUint16(b[l4+6:], ck)
	}
	return hdrEnd, end, nil
}

// PutUDP writes the template's Ethernet, IP and UDP headers at the front of
// b for a plain UDP frame (no transport header) of len(b) bytes whose UDP
// payload is b[HeaderLen():], with srcPort as the UDP source port (the
// template's own is not used: a generator gives each flow its port). The
// lengths cover all of b (no padding is added). When the template has a
// UDP checksum it covers the payload as it lies at the call: write the
// payload first. The bytes are EncodeUDP's with the same Addrs and source
// port; the headers are one copy and the checksums finish sums taken once.
// It does not validate (a generator checks its frame sizes once, not per
// frame): b shorter than HeaderLen, or a UDP length over 65535, panics or
// wraps.
func (t *FrameTemplate) PutUDP(b []byte, srcPort uint16) {
	off := int(t.hdrLen)
	l4 := off - UDPHeaderLen
	udpLen := uint16(len(b) - l4)
	if !t.v6 {
		// The common case as one fixed-size copy.
		*(*[EthHeaderLen + IPv4HeaderLen + UDPHeaderLen]byte)(b) = [EthHeaderLen + IPv4HeaderLen + UDPHeaderLen]byte(t.hdr[:])
		ip := b[EthHeaderLen:l4]
		ipLen := udpLen + IPv4HeaderLen
		be.PutUint16(ip[2:], ipLen)
		s, c := bits.Add64(t.ipSum, uint64(bits.ReverseBytes16(ipLen)), 0)
		be.PutUint16(ip[10:], ^csumFold(s+c))
	} else {
		copy(b[:off], t.hdr[:off])
		be.PutUint16(b[EthHeaderLen+4:], udpLen)
	}
	udp := b[l4:]
	be.PutUint16(udp[0:], srcPort)
	be.PutUint16(udp[4:], udpLen)
	if t.csum {
		s, c := bits.Add64(t.pseudo, uint64(bits.ReverseBytes16(udpLen)), 0)
		ck := ^csumFold(csumAdd(s+c, udp))
		if ck == 0 {
			ck = 0xffff
		}
		be.PutUint16(udp[6:], ck)
	}
}

// SendFields are the transport header fields that change with each
// transmission of a packet whose frame was built once: what Refresh
// rewrites in the copy that goes out.
type SendFields struct {
	// Flags are set on top of the encoded flags (a resend adds
	// FlagRetransmission and FlagAckRequested); none is cleared.
	Flags Flags
	// Retry is the retry count; it saturates at MaxRetry.
	Retry uint8
	// ReqEBSN and DataEBSN are the piggybacked receive BSNs.
	ReqEBSN, DataEBSN uint32
	// TxTime and TxEcho are the timestamps.
	TxTime, TxEcho uint32
}

// The bytes of the base header Refresh may change: type (unchanged), flags
// and retry through TxEcho, an even offset so that the words line up with
// those of the UDP checksum.
const (
	refreshFrom = offType
	refreshTo   = offTxEcho + 4
)

// Refresh rewrites the per-send fields of frame, a transport frame built
// with this template (Encode, or EncodeHeaders then AddPayloadSum), for one
// more transmission. The UDP checksum is updated incrementally (RFC 1624)
// from the 32 header bytes around the fields, so the payload is not read
// again; the result is byte for byte the frame Encode builds with the same
// fields. The retransmission engine (core/rt) refreshes its copy of a
// retained frame this way on every send. It does not validate: frame
// shorter than HeaderLen+BaseHeaderLen panics.
func (t *FrameTemplate) Refresh(frame []byte, f *SendFields) {
	off := int(t.hdrLen)
	th := frame[off : off+BaseHeaderLen]
	w := th[refreshFrom:refreshTo]
	var old uint64
	if t.csum {
		old = csumAdd(0, w)
	}
	th[offFlags] |= byte(f.Flags &^ flagsReserved)
	th[offRetryPhase] = min(f.Retry, MaxRetry)<<4 | th[offRetryPhase]&0x0f
	be.PutUint32(th[offReqEBSN:], f.ReqEBSN)
	be.PutUint32(th[offDataEBSN:], f.DataEBSN)
	be.PutUint32(th[offTxTime:], f.TxTime)
	be.PutUint32(th[offTxEcho:], f.TxEcho)
	if !t.csum {
		return
	}
	ck := frame[off-UDPHeaderLen+6:]
	v := UpdateChecksum(be.Uint16(ck), csumFold(old), csumFold(csumAdd(0, w)))
	if v == 0 {
		v = 0xffff // RFC 768: a computed 0 is sent as all ones
	}
	be.PutUint16(ck, v)
}
