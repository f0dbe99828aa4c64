// Package ctl is the sidecar's control protocol: the messages an
// application and the appliance exchange over the Unix socket (a
// SOCK_SEQPACKET socket, so each message is one datagram and a peer that
// dies is an end of file). Data never crosses it: data goes on the
// shared-memory rings (host/shm).
//
// Every message has the same fixed header and body:
//
//	0  u32  length of the whole message (must equal the datagram's)
//	4  u16  Version
//	6  u16  type (TAttach … RError)
//	8  u32  request id (the reply carries its request's)
//	12 body (48 bytes): conn u32, a u32, b u32, c u32, timeout u64,
//	   ip [16]byte, mac [6]byte, flag u8, status u8
//	60 u16  text length, then the text (RError only, at most MaxText)
//
// Decode checks the length, the version, the type and the text's length
// before it reads a field; nothing in a message is trusted further than
// that (the appliance checks the values against its quotas).
package ctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Version is the protocol's version; a message of another is refused.
const Version = 1

// Message types. T* go from the application to the appliance, R* back.
const (
	// TAttach: A buffers of B bytes, rings of C descriptors (0: the
	// appliance's defaults). Answered by RAttach with the memfd attached.
	TAttach uint16 = 1 + iota
	// TListen: accept connections (A receive slots of B bytes, Timeout).
	TListen
	// TAccept: wait for the next connection dialled to the listener.
	TAccept
	// TDial: dial IP/MAC (Flag 1: ordered; A, B, Timeout as TListen).
	TDial
	// TClose: close connection Conn.
	TClose
	// RAttach: the channel's geometry (A buffers, B bytes each, C
	// descriptors a ring) and the endpoint's address (IP, MAC).
	RAttach
	// ROK: the request succeeded.
	ROK
	// RConn: connection Conn to IP/MAC (Flag 1: ordered).
	RConn
	// RError: the request failed with Status (a peregrine.Status) and Text.
	RError
	// TUnlisten: stop listening (answered by ROK).
	TUnlisten
	// TRegister: register a region of A bytes (Flag: the access, bit 0
	// remote write, bit 1 remote read). Answered by RRegion with the
	// region's memfd attached.
	TRegister
	// RRegion: region Conn (its id in descriptors) of A bytes, key B for
	// the peers.
	RRegion
	// TDeregister: forget region Conn (answered by ROK).
	TDeregister
	// TBell: the channel's bell, an eventfd to write when the channel's
	// header says the appliance's loop sleeps (package shm). Answered by
	// ROK with the eventfd attached, or RError when the loop sleeps on no
	// descriptor (the application then just publishes).
	TBell
	typeEnd
)

const (
	headerLen = 12
	bodyLen   = 48
	// MinLen is the length of every message without text.
	MinLen = headerLen + bodyLen + 2
	// MaxText bounds an error's text.
	MaxText = 256
	// MaxLen bounds a message: a datagram read into a buffer of MaxLen+1
	// bytes that fills it is too long.
	MaxLen = MinLen + MaxText
)

// ErrMalformed: a message failed a check of Decode.
var ErrMalformed = errors.New("ctl: malformed message")

// Msg is one control message.
type Msg struct {
	Type    uint16
	ID      uint32
	Conn    uint32
	A, B, C uint32
	Timeout uint64 // nanoseconds
	IP      [16]byte
	MAC     [6]byte
	Flag    uint8
	Status  uint8
	Text    string
}

// Addr returns the message's IP (IPv4 when it is IPv4-mapped).
func (m *Msg) Addr() netip.Addr { return netip.AddrFrom16(m.IP).Unmap() }

// SetAddr stores ip.
func (m *Msg) SetAddr(ip netip.Addr) { m.IP = ip.As16() }

// Encode appends m to dst.
func (m *Msg) Encode(dst []byte) []byte {
	text := m.Text
	if len(text) > MaxText {
		text = text[:MaxText]
	}
	n := MinLen + len(text)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint16(dst, Version)
	dst = binary.LittleEndian.AppendUint16(dst, m.Type)
	dst = binary.LittleEndian.AppendUint32(dst, m.ID)
	dst = binary.LittleEndian.AppendUint32(dst, m.Conn)
	dst = binary.LittleEndian.AppendUint32(dst, m.A)
	dst = binary.LittleEndian.AppendUint32(dst, m.B)
	dst = binary.LittleEndian.AppendUint32(dst, m.C)
	dst = binary.LittleEndian.AppendUint64(dst, m.Timeout)
	dst = append(dst, m.IP[:]...)
	dst = append(dst, m.MAC[:]...)
	dst = append(dst, m.Flag, m.Status)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(text)))
	return append(dst, text...)
}

// Decode parses one whole datagram into m.
func (m *Msg) Decode(b []byte) error {
	if len(b) < MinLen || len(b) > MaxLen {
		return fmt.Errorf("%w: %d bytes, want %d..%d", ErrMalformed, len(b), MinLen, MaxLen)
	}
	if n := binary.LittleEndian.Uint32(b); int(n) != len(b) {
		return fmt.Errorf("%w: length field %d, datagram %d bytes", ErrMalformed, n, len(b))
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != Version {
		return fmt.Errorf("%w: version %d, this side speaks %d", ErrMalformed, v, Version)
	}
	t := binary.LittleEndian.Uint16(b[6:])
	if t == 0 || t >= typeEnd {
		return fmt.Errorf("%w: unknown type %d", ErrMalformed, t)
	}
	tl := int(binary.LittleEndian.Uint16(b[MinLen-2:]))
	if MinLen+tl != len(b) {
		return fmt.Errorf("%w: text of %d bytes in a %d-byte message", ErrMalformed, tl, len(b))
	}
	if tl > 0 && t != RError {
		return fmt.Errorf("%w: text in a message of type %d", ErrMalformed, t)
	}
	p := b[headerLen:]
	*m = Msg{
		Type:    t,
		ID:      binary.LittleEndian.Uint32(b[8:]),
		Conn:    binary.LittleEndian.Uint32(p[0:]),
		A:       binary.LittleEndian.Uint32(p[4:]),
		B:       binary.LittleEndian.Uint32(p[8:]),
		C:       binary.LittleEndian.Uint32(p[12:]),
		Timeout: binary.LittleEndian.Uint64(p[16:]),
		Flag:    p[46],
		Status:  p[47],
		Text:    string(b[MinLen:]),
	}
	copy(m.IP[:], p[24:40])
	copy(m.MAC[:], p[40:46])
	return nil
}
