package wire

import (
	"fmt"
	"strings"
)

// ExtMask says which extensions an Ext holds.
type ExtMask uint8

// Extensions a header can carry.
const (
	// ExtPlacement: the delivery index (Ext.Placement).
	ExtPlacement ExtMask = 1 << 0
	// ExtQPN: the global QP numbers (Ext.DstQPN, Ext.SrcQPN).
	ExtQPN ExtMask = 1 << 1
	// ExtSourceCID: the sender's own CID (Ext.SourceCID); required on
	// ConnOpen and ConnAccept.
	ExtSourceCID ExtMask = 1 << 2
	// ExtRegion: the remote memory a push lands in or a pull reads from
	// (Ext.Region): the target's region key and the byte address inside
	// that region of the message's first byte.
	ExtRegion ExtMask = 1 << 3
	// ExtSeal: the packet's integrity tag (Ext.Seal, seal.go), on every
	// packet of a sealed connection but ConnOpen and ConnAccept.
	ExtSeal ExtMask = 1 << 4
	// ExtSealKey: the key the sender seals its packets with (Ext.SealKey);
	// ConnOpen and ConnAccept of an endpoint that seals carry it.
	ExtSealKey ExtMask = 1 << 5

	extKnown = ExtPlacement | ExtQPN | ExtSourceCID | ExtRegion | ExtSeal | ExtSealKey
)

// TLV type codes of the extensions. Other codes are skipped by length, so
// older receivers ignore newer extensions.
const (
	ExtTypePlacement uint8 = 1
	ExtTypeQPN       uint8 = 2
	ExtTypeSourceCID uint8 = 3
	ExtTypeRegion    uint8 = 4
	ExtTypeSeal      uint8 = 5
	ExtTypeSealKey   uint8 = 6
)

// Encoded length of each known extension, TLV header included.
const (
	extPlacementLen = 8
	extQPNLen       = 8
	extSourceCIDLen = 8
	extRegionLen    = 16
	extSealLen      = 8
	extSealKeyLen   = 20
)

// Ext is the set of extensions of one header: fixed fields, no slices.
// Fields of extensions not in Present are ignored by Encode and zero after
// Decode.
type Ext struct {
	Present   ExtMask
	Placement Placement
	DstQPN    uint32 // global QPN of the receiving queue pair (24 bits)
	SrcQPN    uint32 // global QPN of the sending queue pair (24 bits)
	SourceCID uint32 // the sender's CID (24 bits)
	Region    RegionRef
	Seal      uint64  // the integrity tag (SealTagBits bits)
	SealKey   SealKey // the sender's sealing key
}

// RegionRef names remote memory: a region the target registered (Key) and a
// byte address inside it (Addr). A packet's payload goes to
// Addr + Header.Offset.
type RegionRef struct {
	Key  uint32
	Addr uint64
}

// Placement is the delivery index (docs/sends.md): where the receiver places the
// transaction's data even when it arrives out of order. Send packets
// carry it when their descriptor (Header.Desc) puts the index here
// (core/dix, core/rt/txn).
type Placement struct {
	Mode  PlacementMode
	Index uint32
}

// Len returns the encoded length of the extension chain in bytes (a
// multiple of 4, 0 when there is none).
func (e *Ext) Len() int { return int(extLens[e.Present&extKnown]) }

// extLens holds the encoded length of every set of known extensions: the
// encoder asks for it on every packet, and a lookup costs less than six
// tests. Unknown bits add nothing (Validate refuses them).
var extLens = func() (t [extKnown + 1]uint8) {
	each := [...]struct {
		bit ExtMask
		n   uint8
	}{
		{ExtPlacement, extPlacementLen}, {ExtQPN, extQPNLen}, {ExtSourceCID, extSourceCIDLen},
		{ExtRegion, extRegionLen}, {ExtSeal, extSealLen}, {ExtSealKey, extSealKeyLen},
	}
	for m := range t {
		for _, e := range each {
			if ExtMask(m)&e.bit != 0 {
				t[m] += e.n
			}
		}
	}
	return t
}()

// Validate reports the first value Encode would refuse.
func (e *Ext) Validate() error {
	if e.Present&^extKnown != 0 {
		return fmt.Errorf("%w: extension mask %#02x has undefined bits", ErrField, uint8(e.Present))
	}
	if e.Present&ExtPlacement != 0 && !e.Placement.Mode.Valid() {
		return fmt.Errorf("%w: placement mode %d is not defined (use wire.PlacementAbsolute, Relative or FreeRunning)", ErrExtension, e.Placement.Mode)
	}
	if e.Present&ExtQPN != 0 && (e.DstQPN > MaxQPN || e.SrcQPN > MaxQPN) {
		return fmt.Errorf("%w: QPNs %#x/%#x exceed 24 bits", ErrField, e.DstQPN, e.SrcQPN)
	}
	if e.Present&ExtSourceCID != 0 && e.SourceCID > MaxCID {
		return fmt.Errorf("%w: source CID %#x exceeds 24 bits", ErrField, e.SourceCID)
	}
	if e.Present&ExtSeal != 0 && e.Seal > sealMask {
		return fmt.Errorf("%w: seal %#x exceeds %d bits", ErrField, e.Seal, SealTagBits)
	}
	return nil
}

// Encode writes the extension chain to b and returns its length.
func (e *Ext) Encode(b []byte) (int, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	n := e.Len()
	if len(b) < n {
		return 0, fmt.Errorf("%w: extensions need %d bytes, buffer has %d", ErrShort, n, len(b))
	}
	e.put(b)
	return n, nil
}

// put writes a validated chain; b holds Len() bytes.
func (e *Ext) put(b []byte) {
	if e.Present&ExtPlacement != 0 {
		b[0], b[1], b[2], b[3] = ExtTypePlacement, extPlacementLen/4, byte(e.Placement.Mode), 0
		be.PutUint32(b[4:], e.Placement.Index)
		b = b[extPlacementLen:]
	}
	if e.Present&ExtQPN != 0 {
		b[0], b[1] = ExtTypeQPN, extQPNLen/4
		put24(b[2:], e.DstQPN)
		put24(b[5:], e.SrcQPN)
		b = b[extQPNLen:]
	}
	if e.Present&ExtSourceCID != 0 {
		b[0], b[1] = ExtTypeSourceCID, extSourceCIDLen/4
		be.PutUint16(b[2:], 0)
		be.PutUint32(b[4:], e.SourceCID)
		b = b[extSourceCIDLen:]
	}
	if e.Present&ExtRegion != 0 {
		b[0], b[1] = ExtTypeRegion, extRegionLen/4
		be.PutUint16(b[2:], 0)
		be.PutUint32(b[4:], e.Region.Key)
		be.PutUint64(b[8:], e.Region.Addr)
		b = b[extRegionLen:]
	}
	if e.Present&ExtSeal != 0 {
		b[0], b[1] = ExtTypeSeal, extSealLen/4
		be.PutUint16(b[2:], uint16(e.Seal>>32))
		be.PutUint32(b[4:], uint32(e.Seal))
		b = b[extSealLen:]
	}
	if e.Present&ExtSealKey != 0 {
		b[0], b[1] = ExtTypeSealKey, extSealKeyLen/4
		be.PutUint16(b[2:], 0)
		be.PutUint64(b[4:], e.SealKey[0])
		be.PutUint64(b[12:], e.SealKey[1])
	}
}

// DecodeExt decodes an extension chain that fills b exactly (len(b) is the
// header's ExtWords×4). Unknown TLV types are skipped by their length;
// errors are ErrExtension. It never panics.
func DecodeExt(b []byte) (Ext, error) {
	var e Ext
	if err := e.Decode(b); err != nil {
		return Ext{}, err
	}
	return e, nil
}

// Decode is DecodeExt into e. On error e holds garbage.
func (e *Ext) Decode(b []byte) error {
	*e = Ext{}
	if len(b)%4 != 0 {
		return ErrExtension
	}
	for len(b) > 0 {
		typ, n := b[0], int(b[1])*4
		if n == 0 || n > len(b) {
			return ErrExtension
		}
		tlv := b[:n]
		b = b[n:]
		var bit ExtMask
		switch typ {
		case ExtTypePlacement:
			if n < extPlacementLen {
				return ErrExtension
			}
			bit = ExtPlacement
			e.Placement = placementAt(tlv)
			if !e.Placement.Mode.Valid() {
				return ErrExtension
			}
		case ExtTypeQPN:
			if n < extQPNLen {
				return ErrExtension
			}
			bit = ExtQPN
			e.DstQPN, e.SrcQPN = get24(tlv[2:]), get24(tlv[5:])
		case ExtTypeSourceCID:
			if n < extSourceCIDLen {
				return ErrExtension
			}
			bit = ExtSourceCID
			e.SourceCID = be.Uint32(tlv[4:]) & MaxCID
		case ExtTypeRegion:
			if n < extRegionLen {
				return ErrExtension
			}
			bit = ExtRegion
			e.Region = regionAt(tlv)
		case ExtTypeSeal:
			if n < extSealLen {
				return ErrExtension
			}
			bit = ExtSeal
			e.Seal = sealAt(tlv)
		case ExtTypeSealKey:
			if n < extSealKeyLen {
				return ErrExtension
			}
			bit = ExtSealKey
			e.SealKey = SealKey{be.Uint64(tlv[4:]), be.Uint64(tlv[12:])}
		default:
			continue
		}
		if e.Present&bit != 0 {
			return ErrExtension // a duplicate would silently override the first
		}
		e.Present |= bit
	}
	return nil
}

// placementAt, regionAt and sealAt read the value of a delivery-index, a
// region and a seal TLV (at least as long as its kind encodes).
func placementAt(tlv []byte) Placement {
	return Placement{Mode: PlacementMode(tlv[2]), Index: be.Uint32(tlv[4:])}
}

func regionAt(tlv []byte) RegionRef {
	return RegionRef{Key: be.Uint32(tlv[4:]), Addr: be.Uint64(tlv[8:])}
}

func sealAt(tlv []byte) uint64 { return uint64(be.Uint16(tlv[2:]))<<32 | uint64(be.Uint32(tlv[4:])) }

func (e *Ext) String() string {
	var b strings.Builder
	b.WriteString("ext{")
	sep := ""
	if e.Present&ExtPlacement != 0 {
		fmt.Fprintf(&b, "placement=%v:%d", e.Placement.Mode, e.Placement.Index)
		sep = " "
	}
	if e.Present&ExtQPN != 0 {
		fmt.Fprintf(&b, "%sqpn=%#06x<-%#06x", sep, e.DstQPN, e.SrcQPN)
		sep = " "
	}
	if e.Present&ExtSourceCID != 0 {
		fmt.Fprintf(&b, "%sscid=%#06x", sep, e.SourceCID)
		sep = " "
	}
	if e.Present&ExtRegion != 0 {
		fmt.Fprintf(&b, "%sregion=%#x+%#x", sep, e.Region.Key, e.Region.Addr)
		sep = " "
	}
	if e.Present&ExtSeal != 0 {
		fmt.Fprintf(&b, "%sseal=%012x", sep, e.Seal)
		sep = " "
	}
	if e.Present&ExtSealKey != 0 {
		b.WriteString(sep + "sealkey") // the key itself stays out of logs
	}
	b.WriteByte('}')
	return b.String()
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v)
}

func get24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}
