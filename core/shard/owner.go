package shard

import (
	"encoding/binary"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// MaxOpenerExts is how many extensions Owner (and the XDP program of an
// afxdp port with shard_bits, which reads a frame the same way) looks
// through for the source CID of a frame to CID 0: every extension this
// version defines, and two more of a later one. A source CID further
// down the chain names no shard.
const MaxOpenerExts = 8

// Owner returns which of n shards (bits = Bits(n) CID bits) owns frame b,
// from the frame alone, so that every copy of a frame has one owner
// whichever queue it arrives on:
//
//   - a frame to a CID: the shard the CID's top bits name;
//   - a frame to CID 0 (a ConnOpen, or data an initiator sends before the
//     ConnAccept names the target's CID): the shard the opener's own CID,
//     in the source-CID extension, names in the same bits, modulo n. A
//     retransmitted ConnOpen of one connection carries the same source CID
//     as the first, so it reaches the shard that accepted the first and
//     finds the connection there, whatever queue it came on; and an opener
//     of as many shards as this side pairs its shard i with shard i here.
//
// ok is false for a frame that names no shard: not a transport datagram,
// a CID whose shard is not one of the n, a frame to CID 0 of a type with
// a body or without the source CID among its first MaxOpenerExts
// extensions. Such a frame is malformed or unknown to every shard; the
// caller leaves it where it arrived, and the endpoint counts it.
func Owner(b []byte, bits uint, n int) (shard int, ok bool) {
	l4, ok := wire.L4Offset(b)
	if !ok {
		return 0, false
	}
	cid, ok := wire.PeekCID(b, l4)
	if !ok {
		return 0, false
	}
	if cid != 0 {
		j := rt.CIDShard(cid, bits)
		return j, j < n
	}
	src, ok := openerCID(b[l4+wire.UDPHeaderLen:])
	if !ok {
		return 0, false
	}
	return rt.CIDShard(src, bits) % n, true
}

// openerCID reads the source CID of the transport header at the start of
// h (version checked by the caller) without decoding the rest: only
// types without a body (those an opener sends before it knows the
// target's CID) qualify. The extension chain (ExtWords×4 bytes) is walked
// TLV by TLV, up to MaxOpenerExts; a TLV of length 0 or longer than what
// the chain has left ends the walk, and so does a byte it needs past the
// end of h. The XDP program follows these steps one for one.
func openerCID(h []byte) (uint32, bool) {
	if len(h) < wire.BaseHeaderLen {
		return 0, false
	}
	if t := wire.Type(h[4]); !t.Valid() || hasBody(t) {
		return 0, false
	}
	off, left := wire.BaseHeaderLen, int(h[7])*4
	for range MaxOpenerExts {
		if left == 0 || off+2 > len(h) {
			return 0, false
		}
		n := int(h[off+1]) * 4
		if n == 0 || n > left {
			return 0, false
		}
		if h[off] == wire.ExtTypeSourceCID {
			if n < 8 || off+8 > len(h) {
				return 0, false
			}
			return binary.BigEndian.Uint32(h[off+4:]) & wire.MaxCID, true
		}
		off, left = off+n, left-n
	}
	return 0, false
}

// hasBody reports whether type t carries a body between the base header
// and the extensions.
func hasBody(t wire.Type) bool {
	return t == wire.TypeAck || t == wire.TypeExtendedAck || t == wire.TypeNack || t == wire.TypeResync
}
