package wire

// HeaderView reads and patches the base header of an encoded packet in
// place, without decoding it, for a frame of unknown origin (a capture, a
// test); a patched frame's UDP checksum is then recomputed with
// Datagram.UpdateUDPChecksum, a pass over the payload. A sender refreshing
// frames it built with a FrameTemplate uses FrameTemplate.Refresh instead,
// which sets the same fields and updates the checksum incrementally. Make
// one with ViewHeader; a HeaderView shorter than BaseHeaderLen panics.
type HeaderView []byte

// ViewHeader returns a view of the base header at the start of b after
// checking its length and version.
func ViewHeader(b []byte) (HeaderView, error) {
	if len(b) < BaseHeaderLen {
		return nil, ErrShort
	}
	if b[0]>>4 != Version {
		return nil, ErrVersion
	}
	return HeaderView(b[:BaseHeaderLen:BaseHeaderLen]), nil
}

func (v HeaderView) DestCID() uint32  { return be.Uint32(v[offVerCID:]) & MaxCID }
func (v HeaderView) Type() Type       { return Type(v[offType]) }
func (v HeaderView) Flags() Flags     { return Flags(v[offFlags]) &^ flagsReserved }
func (v HeaderView) Retry() uint8     { return v[offRetryPhase] >> 4 }
func (v HeaderView) Phase() Phase     { return Phase(v[offRetryPhase]>>2) & 3 }
func (v HeaderView) PSN() uint32      { return be.Uint32(v[offPSN:]) }
func (v HeaderView) RSN() uint32      { return be.Uint32(v[offRSN:]) }
func (v HeaderView) SSN() uint32      { return be.Uint32(v[offSSN:]) }
func (v HeaderView) ReqEBSN() uint32  { return be.Uint32(v[offReqEBSN:]) }
func (v HeaderView) DataEBSN() uint32 { return be.Uint32(v[offDataEBSN:]) }
func (v HeaderView) TxTime() uint32   { return be.Uint32(v[offTxTime:]) }
func (v HeaderView) TxEcho() uint32   { return be.Uint32(v[offTxEcho:]) }
func (v HeaderView) ReqLen() uint32   { return be.Uint32(v[offReqLen:]) }
func (v HeaderView) Offset() uint32   { return be.Uint32(v[offOffset:]) }
func (v HeaderView) PayloadLen() uint16 {
	return be.Uint16(v[offPayloadLen:])
}

// SetFlags replaces the flags other than FlagHasExtension, which describes
// the layout and stays as encoded.
func (v HeaderView) SetFlags(f Flags) {
	keep := Flags(v[offFlags]) & FlagHasExtension
	v[offFlags] = byte(f&^(FlagHasExtension|flagsReserved) | keep)
}

// SetRetry sets the retry count, saturating at MaxRetry.
func (v HeaderView) SetRetry(n uint8) {
	n = min(n, MaxRetry)
	v[offRetryPhase] = n<<4 | v[offRetryPhase]&0x0f
}

func (v HeaderView) SetReqEBSN(x uint32)  { be.PutUint32(v[offReqEBSN:], x) }
func (v HeaderView) SetDataEBSN(x uint32) { be.PutUint32(v[offDataEBSN:], x) }
func (v HeaderView) SetTxTime(x uint32)   { be.PutUint32(v[offTxTime:], x) }
func (v HeaderView) SetTxEcho(x uint32)   { be.PutUint32(v[offTxEcho:], x) }
