package rt

import (
	crand "crypto/rand"
	"encoding/binary"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Sealing: every packet of a sealed connection but ConnOpen carries an
// integrity tag (the seal extension, wire.SealTag: SipHash-1-3 under a
// 128-bit key, 48 bits) over the fields that name it and that its
// receiver acts on: CID, type, PSN, RSN, SSN, request length, offset,
// descriptor, the placement, QPN and region extensions, and for ACKs and
// NACKs every field (bitmaps, duplicate report, hop count included). The
// ConnAccept's tag (wire.HelloTag) is under the key the ConnOpen
// announced and binds that ConnOpen as the target saw it: the initiator
// refuses a setup rewritten in either direction (acceptSealed). Each direction has its own key,
// drawn by its sender and announced in its ConnOpen or ConnAccept; a
// connection is sealed in both directions when both ends seal (neither
// has Options.NoSeal). The receiver checks the tag before the packet
// touches the connection: one whose tag is missing or wrong is dropped
// unacknowledged and counted (RxBadSeal), so the real packet with that
// PSN still comes and wins.
//
// What it protects against: anyone who does not know the key — a
// middlebox or a buggy NIC that rewrites a field and fixes the checksum,
// a frame of another connection misdelivered under a live CID, an
// off-path injector guessing a live CID and PSN (one try in 2^48 passes).
// What it does not: an on-path attacker who saw the handshake (the keys
// travel in clear, as nothing else here is encrypted), the payload bytes
// (not covered: the UDP checksum guards them against corruption only),
// confidentiality of anything, a replay of a real sealed packet (the
// receive window's PSN check does that), nor a ConnOpen whose key was
// stripped in flight (the target then sees a peer that does not seal,
// and the connection is set up unsealed). Falcon's PSP and UET's TSS do this with real cryptography
// and keys from a key exchange; this is the integrity half, keyed at
// setup.

// initSeal makes the endpoint's secret, from which each connection's key
// is derived: from crypto/rand, unless the endpoint's random choices are
// deterministic (Options.Seed, or a virtual clock), when it follows from
// the seed like the rest.
func (e *Endpoint) initSeal() {
	if _, virtual := e.opts.Clock.(*clock.Virtual); e.opts.Seed != 0 || virtual {
		e.sealSecret = wire.DeriveSealKey(wire.SealKey{e.hashSeed, ^e.hashSeed}, uint64(e.incarnation), 0x5ea1)
		return
	}
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	e.sealSecret = wire.SealKey{binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])}
}

// sealInit gives a new connection its sending key (none under NoSeal) and
// forgets the peer's.
func (e *Endpoint) sealInit(c *conn) {
	c.sealTx, c.sealRx, c.openTag = wire.SealKey{}, wire.SealKey{}, 0
	if e.opts.NoSeal {
		return
	}
	e.sealN++
	c.sealTx = wire.DeriveSealKey(e.sealSecret, uint64(c.localCID), e.sealN)
}

// sealPeer learns the peer's key from its ConnOpen or ConnAccept. A peer
// that offers none does not seal: then neither do we (the initiator's
// packets sent before ConnAccept keep their tags, which it ignores). The
// target keeps the ConnOpen's HelloTag for its ConnAccept.
func (e *Endpoint) sealPeer(c *conn, hd *wire.Header) {
	if hd.Ext.Present&wire.ExtSealKey == 0 || e.opts.NoSeal {
		c.sealTx, c.sealRx = wire.SealKey{}, wire.SealKey{}
		return
	}
	c.sealRx = hd.Ext.SealKey
	if hd.Type == wire.TypeConnOpen {
		c.openTag = hd.HelloTag(c.sealRx, 0)
	}
}

// sameOpen reports whether a ConnOpen for c's slot is the one c was
// opened with, field for field (its HelloTag), or c cannot tell (either
// side does not seal).
func (e *Endpoint) sameOpen(c *conn, hd *wire.Header) bool {
	if !c.sealRx.On() || hd.Ext.Present&wire.ExtSealKey == 0 {
		return true
	}
	return hd.HelloTag(hd.Ext.SealKey, 0) == c.openTag
}

// sealHelloTag ends a ConnOpen or ConnAccept once every field is final:
// the initiator keeps its ConnOpen's HelloTag; the target tags its
// ConnAccept under the key the ConnOpen announced, bound to that
// ConnOpen as it arrived (wire.Header.HelloTag), so the initiator can
// tell a rewritten ConnOpen or ConnAccept from the real ones.
func (c *conn) sealHelloTag(hd *wire.Header) {
	switch {
	case hd.Type == wire.TypeConnOpen && c.sealTx.On():
		c.openTag = hd.HelloTag(c.sealTx, 0)
	case hd.Type == wire.TypeConnAccept && c.sealRx.On():
		hd.Ext.Present |= wire.ExtSeal
		hd.Ext.Seal = hd.HelloTag(c.sealRx, c.openTag)
	}
}

// acceptSealed reports whether a ConnAccept may complete c's setup: we
// offered no key (nothing to check it with), or it carries the tag our
// key gives it bound to the ConnOpen we sent. An accept that announces a
// key but carries no tag answers a ConnOpen whose key was rewritten or
// stripped. One with neither comes from a peer that does not seal (or
// one that never saw our key: the setup travels in clear, docs/integrity.md).
// A ConnAccept that fails is counted (RxBadSeal) and dropped: the setup
// timer resends ConnOpen, whose real copy earns a real ConnAccept.
func (e *Endpoint) acceptSealed(c *conn, hd *wire.Header) bool {
	if !c.sealTx.On() {
		return true
	}
	if hd.Ext.Present&wire.ExtSeal == 0 {
		if hd.Ext.Present&wire.ExtSealKey == 0 {
			return true
		}
	} else if hd.Ext.Seal == hd.HelloTag(c.sealTx, c.openTag) {
		return true
	}
	e.cnt.own[cRxBadSeal]++
	return false
}

// sealHello announces our key in a ConnOpen or ConnAccept.
func (c *conn) sealHello(hd *wire.Header) {
	if c.sealTx.On() {
		hd.Ext.Present |= wire.ExtSealKey
		hd.Ext.SealKey = c.sealTx
	}
}

// seal tags a packet to the peer; call it once every covered field of
// hd is final.
func (c *conn) seal(hd *wire.Header, payloadLen int) {
	if c.sealTx.On() && hd.Type.Sealed() {
		hd.Seal(c.sealTx, payloadLen)
	}
}

// unsealed reports whether a packet for c may touch it: c is not sealed,
// or the packet carries its tag. A packet that fails is counted here.
func (e *Endpoint) unsealed(c *conn, hd *wire.Header) bool {
	if !c.sealRx.On() || !hd.Type.Sealed() || hd.SealOK(c.sealRx) {
		return true
	}
	e.cnt.own[cRxBadSeal]++
	return false
}
