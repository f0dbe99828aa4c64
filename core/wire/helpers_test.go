package wire_test

import (
	"math/rand/v2"
	"net/netip"

	"github.com/peregrine-net/peregrine/core/wire"
)

var allTypes = []wire.Type{
	wire.TypeConnOpen, wire.TypeConnAccept, wire.TypeConnClose, wire.TypePullRequest,
	wire.TypePullData, wire.TypePushRequest, wire.TypePushGrant, wire.TypePushSolicitedData,
	wire.TypePushUnsolicitedData, wire.TypeResync, wire.TypeAck, wire.TypeExtendedAck, wire.TypeNack,
	wire.TypeSend,
}

// windowedTypes are the types a resync may stand in for.
var windowedTypes = []wire.Type{
	wire.TypeConnClose, wire.TypePullRequest, wire.TypePullData, wire.TypePushRequest,
	wire.TypePushGrant, wire.TypePushSolicitedData, wire.TypePushUnsolicitedData, wire.TypeSend,
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// randHeader returns a valid header of type t whose every field survives a
// round trip: bodies only for the types that carry them, HasExtension
// exactly when there are extensions.
func randHeader(r *rand.Rand, t wire.Type, payloadLen int) wire.Header {
	h := wire.Header{
		Version:    wire.Version,
		DestCID:    r.Uint32() & wire.MaxCID,
		Type:       t,
		Flags:      wire.Flags(r.IntN(128)) &^ wire.FlagHasExtension,
		Retry:      uint8(r.IntN(16)),
		Phase:      wire.Phase(r.IntN(4)),
		PSN:        r.Uint32(),
		RSN:        r.Uint32(),
		SSN:        r.Uint32(),
		ReqEBSN:    r.Uint32(),
		DataEBSN:   r.Uint32(),
		TxTime:     r.Uint32(),
		TxEcho:     r.Uint32(),
		ReqLen:     r.Uint32(),
		Offset:     r.Uint32(),
		PayloadLen: uint16(payloadLen),
	}
	switch t {
	case wire.TypeAck, wire.TypeExtendedAck:
		h.HopEcho = uint8(r.Uint32())
		h.Ack = wire.AckBody{
			OOW:        wire.OOWFlags(r.IntN(4)),
			RxBufLevel: uint8(r.Uint32()),
			OOWCount:   uint16(r.Uint32()),
			RxTime:     r.Uint32(),
		}
		if t == wire.TypeExtendedAck {
			h.Ack.ReqBitmap = wire.Bitmap128{r.Uint64(), r.Uint64()}
			h.Ack.DataBitmap = wire.Bitmap128{r.Uint64(), r.Uint64()}
		}
	case wire.TypeNack:
		h.Nack = wire.NackBody{
			Code:             wire.NackCode(1 + r.IntN(7)),
			Window:           wire.Window(1 + r.IntN(2)),
			ULPCode:          uint8(r.Uint32()),
			PSN:              r.Uint32(),
			RNRTimeoutMicros: r.Uint32(),
		}
	case wire.TypeSend:
		h.Desc = uint8(r.Uint32())
	case wire.TypeResync:
		h.Resync = wire.ResyncBody{
			Code:     wire.ResyncCode(1 + r.IntN(4)),
			OrigType: windowedTypes[r.IntN(len(windowedTypes))],
		}
	}
	h.Ext = randExt(r, t == wire.TypeConnOpen || t == wire.TypeConnAccept)
	if h.Ext.Present != 0 {
		h.Flags |= wire.FlagHasExtension
	}
	return h
}

func randExt(r *rand.Rand, needSourceCID bool) wire.Ext {
	var e wire.Ext
	e.Present = wire.ExtMask(r.IntN(16))
	if needSourceCID {
		e.Present |= wire.ExtSourceCID
	}
	if e.Present&wire.ExtPlacement != 0 {
		e.Placement = wire.Placement{Mode: wire.PlacementMode(1 + r.IntN(3)), Index: r.Uint32()}
	}
	if e.Present&wire.ExtQPN != 0 {
		e.DstQPN, e.SrcQPN = r.Uint32()&wire.MaxQPN, r.Uint32()&wire.MaxQPN
	}
	if e.Present&wire.ExtSourceCID != 0 {
		e.SourceCID = r.Uint32() & wire.MaxCID
	}
	if e.Present&wire.ExtRegion != 0 {
		e.Region = wire.RegionRef{Key: r.Uint32(), Addr: r.Uint64()}
	}
	return e
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// encodePacket returns header+payload as one UDP payload.
func encodePacket(h *wire.Header, payload []byte) ([]byte, error) {
	b := make([]byte, h.Len()+len(payload))
	n, err := h.Encode(b)
	if err != nil {
		return nil, err
	}
	copy(b[n:], payload)
	return b, nil
}

func addrs4() wire.Addrs {
	return wire.Addrs{
		SrcMAC:  [6]byte{0x02, 0, 0, 0, 0, 0x01},
		DstMAC:  [6]byte{0x02, 0, 0, 0, 0, 0x02},
		SrcIP:   netip.MustParseAddr("10.0.0.1"),
		DstIP:   netip.MustParseAddr("10.0.0.2"),
		SrcPort: 40000,
		DstPort: wire.DefaultPort,
		TOS:     0x2a<<2 | 0x2, // DSCP 42, ECT(0)
		TTL:     wire.DefaultTTL,
	}
}

func addrs6() wire.Addrs {
	return wire.Addrs{
		SrcMAC:    [6]byte{0x02, 0, 0, 0, 0, 0x01},
		DstMAC:    [6]byte{0x02, 0, 0, 0, 0, 0x02},
		SrcIP:     netip.MustParseAddr("fd00::1"),
		DstIP:     netip.MustParseAddr("fd00::2"),
		SrcPort:   40001,
		DstPort:   wire.DefaultPort,
		TOS:       0x1a << 2,
		TTL:       17,
		FlowLabel: 0xabcde,
	}
}

func sampleHeader() wire.Header {
	return wire.Header{
		Version:  wire.Version,
		DestCID:  0x0a0b0c,
		Type:     wire.TypePushUnsolicitedData,
		Flags:    wire.FlagAckRequested | wire.FlagOrdered,
		PSN:      7,
		RSN:      3,
		ReqEBSN:  100,
		DataEBSN: 200,
		TxTime:   123456789,
		ReqLen:   4096,
	}
}

// refChecksum is a plain RFC 1071 checksum, 16 bits at a time: the
// reference the fast one is checked against.
func refChecksum(chunks ...[]byte) uint16 {
	var all []byte
	for _, c := range chunks {
		all = append(all, c...)
	}
	var sum uint32
	for i := 0; i+1 < len(all); i += 2 {
		sum += uint32(all[i])<<8 | uint32(all[i+1])
	}
	if len(all)%2 == 1 {
		sum += uint32(all[len(all)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// fixChecksums recomputes the IPv4 header checksum and the UDP checksum
// (left 0 on IPv4 if it was 0) of whatever frame b holds, as far as its
// lengths allow, so tests and fuzzers can edit a frame and still get past
// the checksum checks. It never panics.
func fixChecksums(b []byte) {
	if len(b) < wire.EthHeaderLen {
		return
	}
	ip := b[wire.EthHeaderLen:]
	var pseudo []byte
	var udp []byte
	switch uint16(b[12])<<8 | uint16(b[13]) {
	case wire.EtherTypeIPv4:
		if len(ip) < 20 {
			return
		}
		ihl := int(ip[0]&0xf) * 4
		if ihl < 20 || ihl > len(ip) {
			return
		}
		ip[10], ip[11] = 0, 0
		c := refChecksum(ip[:ihl])
		ip[10], ip[11] = byte(c>>8), byte(c)
		total := int(ip[2])<<8 | int(ip[3])
		if total < ihl+8 || total > len(ip) || ip[9] != 17 {
			return
		}
		udp = ip[ihl:total]
		if udp[6] == 0 && udp[7] == 0 {
			return
		}
		pseudo = append(append([]byte(nil), ip[12:20]...), 0, 17, byte(len(udp)>>8), byte(len(udp)))
	case wire.EtherTypeIPv6:
		if len(ip) < 40 || ip[6] != 17 {
			return
		}
		plen := int(ip[4])<<8 | int(ip[5])
		if plen < 8 || 40+plen > len(ip) {
			return
		}
		udp = ip[40 : 40+plen]
		pseudo = append(append([]byte(nil), ip[8:40]...), 0, 0, byte(len(udp)>>8), byte(len(udp)), 0, 0, 0, 17)
	default:
		return
	}
	udp[6], udp[7] = 0, 0
	c := refChecksum(pseudo, udp)
	if c == 0 {
		c = 0xffff
	}
	udp[6], udp[7] = byte(c>>8), byte(c)
}
