package wire

import "math/bits"

// SealKey is a connection direction's sealing key: 128 bits, drawn by the
// sender at connection setup and announced in its ConnOpen or ConnAccept
// (the seal-key extension). The zero key means "not sealed".
type SealKey [2]uint64

// On reports whether k is a key (not the zero value).
func (k SealKey) On() bool { return k != SealKey{} }

// SealTagBits is the length of the integrity tag the seal extension
// carries: a forger that does not know the key passes it with probability
// 2^-48 per try.
const SealTagBits = 48

const sealMask = 1<<SealTagBits - 1

// sealFlags are the flags a tag covers: those a packet keeps over its
// resends (Retransmission and AckRequested change per transmission, and
// HasExtension follows from the extensions).
const sealFlags = FlagOrdered | FlagIOIInOrder | FlagLastOfMessage

// Sealed reports whether packets of type t carry the seal on a sealed
// connection: every type but ConnOpen and ConnAccept, which carry the key.
func (t Type) Sealed() bool { return t != TypeConnOpen && t != TypeConnAccept }

// ackFlags are the flags an ACK or NACK tag covers: all but
// HasExtension (it follows from the extensions), since these are built
// anew for each transmission and their receiver acts on AckRequested.
const ackFlags = ^FlagHasExtension

// sealWordsMax bounds the words a tag hashes (an extended ACK: 14).
const sealWordsMax = 16

// SealTag computes h's integrity tag under k for a payload of payloadLen
// bytes. It covers what names the packet and what a receiver acts on: the
// destination CID, type, phase, the flags a packet keeps, PSN, RSN, SSN,
// ReqLen, Offset, the payload length, Desc, and the placement, QPN and
// region extensions; for the types built anew for each transmission
// (ACK, extended ACK, NACK) every field their receiver acts on: all their
// flags, the BSNs, both timestamps, the hop count, the whole ACK body
// (with the bitmaps of an extended ACK) and the NACK body; for a resync,
// its body. It does not cover the payload bytes (the UDP checksum does,
// against corruption only), nor the fields a resend rewrites in place of
// a reliable packet (retry, the Retransmission and AckRequested flags,
// the piggybacked BSNs and timestamps), nor the source-CID extension.
// ConnOpen and ConnAccept have their own tag (HelloTag).
//
// The function is SipHash-1-3 (Aumasson and Bernstein) over seven 64-bit
// words (ten for ACKs and NACKs, fourteen for extended ACKs), truncated to
// SealTagBits; it does not allocate (BenchmarkSealTag gives its cost).
func (h *Header) SealTag(k SealKey, payloadLen int) uint64 {
	var m [sealWordsMax]uint64
	return sip13(k, m[:h.sealWords(&m, payloadLen)]) & sealMask
}

// sealWords fills m with what SealTag hashes and returns how many words.
func (h *Header) sealWords(m *[sealWordsMax]uint64, payloadLen int) int {
	flags := h.Flags & sealFlags
	switch h.Type {
	case TypeAck, TypeExtendedAck, TypeNack:
		flags = h.Flags & ackFlags
	}
	m[0] = uint64(h.DestCID)<<40 | uint64(h.Type)<<32 | uint64(flags)<<24 |
		uint64(h.Phase)<<16 | uint64(uint16(payloadLen))
	if h.Type == TypeSend {
		m[0] |= uint64(h.Desc) << 56 // other types send Desc as 0
	}
	m[1] = uint64(h.PSN)<<32 | uint64(h.RSN)
	m[2] = uint64(h.SSN)<<32 | uint64(h.ReqLen)
	e := &h.Ext
	cover := e.Present & (ExtPlacement | ExtQPN | ExtRegion)
	m[3] = uint64(h.Offset)<<32 | uint64(e.Placement.Index)
	m[4] = uint64(cover)<<56 | uint64(e.Placement.Mode)<<48 | uint64(e.DstQPN)<<24 | uint64(e.SrcQPN)
	m[5] = uint64(e.Region.Key) << 32
	m[6] = e.Region.Addr
	n := 7
	switch h.Type {
	case TypeAck, TypeExtendedAck:
		a := &h.Ack
		m[5] |= uint64(a.OOW)<<24 | uint64(a.Dup)<<16 | uint64(a.OOWCount)
		m[7] = uint64(h.ReqEBSN)<<32 | uint64(h.DataEBSN)
		m[8] = uint64(h.TxTime)<<32 | uint64(h.TxEcho)
		m[9] = uint64(h.HopEcho)<<40 | uint64(a.RxBufLevel)<<32 | uint64(a.RxTime)
		n = 10
		if h.Type == TypeExtendedAck {
			m[10], m[11] = a.ReqBitmap[0], a.ReqBitmap[1]
			m[12], m[13] = a.DataBitmap[0], a.DataBitmap[1]
			n = 14
		}
	case TypeNack:
		m[5] |= uint64(h.Nack.Code)<<24 | uint64(h.Nack.Window)<<16 | uint64(h.Nack.ULPCode)<<8
		m[7] = uint64(h.ReqEBSN)<<32 | uint64(h.DataEBSN)
		m[8] = uint64(h.TxTime)<<32 | uint64(h.TxEcho)
		m[9] = uint64(h.Nack.PSN)<<32 | uint64(h.Nack.RNRTimeoutMicros)
		n = 10
	case TypeResync:
		m[5] |= uint64(h.Resync.Code)<<8 | uint64(h.Resync.OrigType)
	}
	return n
}

// HelloTag is the tag of a ConnOpen or ConnAccept under k: SealTag's
// fields, and the initial BSNs, the source CID and the sealing key it
// announces; for a ConnAccept also both timestamps (a ConnOpen's TxTime
// changes with each resend: its accept's TxEcho, covered, says which) and
// open, the HelloTag of the ConnOpen it answers as its sender received
// it. Keys travel in clear at setup, so only a ConnAccept carries one:
// under the key its ConnOpen announced, which the opener holds, binding
// what the opener sent (its BSNs, QPN, key, early-connect fields) to what
// the acceptor saw. A ConnOpen's own HelloTag (open 0) is not sent.
func (h *Header) HelloTag(k SealKey, open uint64) uint64 {
	var m [sealWordsMax]uint64
	n := h.sealWords(&m, 0) // neither carries a payload
	m[n] = uint64(h.ReqEBSN)<<32 | uint64(h.DataEBSN)
	e := &h.Ext
	m[n+1] = uint64(e.Present&(ExtSourceCID|ExtSealKey))<<32 | uint64(e.SourceCID)
	m[n+2], m[n+3] = e.SealKey[0], e.SealKey[1]
	n += 4
	if h.Type == TypeConnAccept {
		m[n] = uint64(h.TxTime)<<32 | uint64(h.TxEcho)
		m[n+1] = open
		n += 2
	}
	return sip13(k, m[:n]) & sealMask
}

// Seal adds the seal extension to h: its tag under k for a payload of
// payloadLen bytes. Call it last, once every covered field is final.
func (h *Header) Seal(k SealKey, payloadLen int) {
	h.Ext.Present |= ExtSeal
	h.Ext.Seal = h.SealTag(k, payloadLen)
}

// SealOK reports whether h, as decoded, carries the seal extension with
// the tag k gives it.
func (h *Header) SealOK(k SealKey) bool {
	return h.Ext.Present&ExtSeal != 0 && h.Ext.Seal == h.SealTag(k, int(h.PayloadLen))
}

// sip13 is SipHash-1-3 of len(m) 64-bit words (the reference reads its
// message as little-endian words: these are those words).
func sip13(k SealKey, m []uint64) uint64 {
	v0 := k[0] ^ 0x736f6d6570736575
	v1 := k[1] ^ 0x646f72616e646f6d
	v2 := k[0] ^ 0x6c7967656e657261
	v3 := k[1] ^ 0x7465646279746573
	for _, w := range m {
		v3 ^= w
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= w
	}
	b := uint64(len(m)*8) << 56
	v3 ^= b
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= b
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}

func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// DeriveSealKey derives a key from a secret and two words that differ
// for every key the secret makes (SipHash is a pseudorandom function:
// without the secret, one derived key says nothing of another).
func DeriveSealKey(secret SealKey, a, b uint64) SealKey {
	m := [3]uint64{a, b, 0}
	k0 := sip13(secret, m[:])
	m[2] = 1
	return SealKey{k0, sip13(secret, m[:]) | 1} // never the zero key
}
