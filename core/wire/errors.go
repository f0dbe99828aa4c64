package wire

import "errors"

// Decoders return these sentinels unwrapped, so that a malformed packet costs
// no allocation on the receive path; encoders wrap them with the field name
// and value (an encode error is a bug in the caller, not a packet to count).
// Test with errors.Is.
var (
	// ErrShort: the buffer ends before the structure it should hold.
	ErrShort = errors.New("wire: buffer too short")
	// ErrVersion: the transport header's version is not Version, or a BTH's
	// TVer is not 0.
	ErrVersion = errors.New("wire: unsupported version")
	// ErrType: the packet type is not one this package knows.
	ErrType = errors.New("wire: unknown packet type")
	// ErrLength: a length field disagrees with the buffer (payload length vs
	// the UDP payload, UDP length vs the IP length, IP length vs the frame).
	ErrLength = errors.New("wire: length field disagrees with the buffer")
	// ErrExtension: the extension chain is malformed (a TLV of length 0 or
	// running past the chain, HasExtension without extensions or the reverse,
	// a duplicate or invalid known extension, a connection packet without its
	// source CID).
	ErrExtension = errors.New("wire: malformed header extension")
	// ErrBody: an ACK, NACK or resync body holds an invalid value.
	ErrBody = errors.New("wire: invalid packet body")
	// ErrField: Encode was given a value that does not fit its field.
	ErrField = errors.New("wire: field out of range")
	// ErrChecksum: an IPv4 header checksum, UDP checksum or RoCEv2 ICRC does
	// not match, or an IPv6 UDP datagram carries no checksum.
	ErrChecksum = errors.New("wire: checksum mismatch")
	// ErrNotIP: the EtherType is neither IPv4 nor IPv6 (VLAN tags are not
	// supported).
	ErrNotIP = errors.New("wire: not an untagged IPv4 or IPv6 frame")
	// ErrIPHeader: the IP header is malformed (version nibble disagrees with
	// the EtherType, IHL below 5).
	ErrIPHeader = errors.New("wire: malformed IP header")
	// ErrFragment: the IPv4 packet is a fragment; the transport never
	// fragments and does not reassemble.
	ErrFragment = errors.New("wire: IP fragment")
	// ErrNotUDP: the IP payload is not UDP (IPv6 extension headers are not
	// supported).
	ErrNotUDP = errors.New("wire: not a UDP datagram")
	// ErrAddr: Addrs holds an invalid address or mixes IPv4 and IPv6.
	ErrAddr = errors.New("wire: invalid address")
)
