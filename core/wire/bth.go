package wire

import (
	"fmt"
	"hash/crc32"
	"strconv"
)

// RoCEv2 constants.
const (
	// RoCEv2Port is the IANA UDP port of RoCEv2.
	RoCEv2Port = 4791
	// BTHLen is the length of the InfiniBand Base Transport Header.
	BTHLen = 12
	// ICRCLen is the length of the invariant CRC that ends a RoCEv2
	// packet.
	ICRCLen = 4

	maxPSN24 = 1<<24 - 1
)

// BTH is the InfiniBand Base Transport Header as RoCEv2 carries it after
// UDP (IBA vol. 1 §9.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------+-+-+---+-------+-------------------------------+
//	|    OpCode     |S|M|Pad| TVer  |        Partition Key          |
//	+-+-+-----------+-+-+---+-------+-------------------------------+
//	|F|B|   Resv6   |          Destination QP                       |
//	+-+-------------+-----------------------------------------------+
//	|A|   Resv7     |          Packet Sequence Number               |
//	+-+-------------+-----------------------------------------------+
//
// Reserved bits are written as 0 and ignored on decode.
type BTH struct {
	Opcode    uint8
	Solicited bool  // S: solicited event
	MigReq    bool  // M: migration state
	PadCount  uint8 // pad bytes before the ICRC (2 bits)
	TVer      uint8 // transport header version (4 bits), 0
	PKey      uint16
	FECN      bool // forward congestion notification
	BECN      bool // backward congestion notification
	DestQP    uint32
	AckReq    bool   // A: acknowledge request
	PSN       uint32 // 24 bits
}

// Validate reports the first field Encode would refuse.
func (h *BTH) Validate() error {
	switch {
	case h.PadCount > 3:
		return fmt.Errorf("%w: BTH pad count %d exceeds 3", ErrField, h.PadCount)
	case h.TVer != 0:
		return fmt.Errorf("%w: BTH TVer %d is not 0", ErrVersion, h.TVer)
	case h.DestQP > MaxQPN:
		return fmt.Errorf("%w: BTH destination QP %#x exceeds 24 bits", ErrField, h.DestQP)
	case h.PSN > maxPSN24:
		return fmt.Errorf("%w: BTH PSN %#x exceeds 24 bits", ErrField, h.PSN)
	}
	return nil
}

// Encode writes the BTH to b and returns BTHLen.
func (h *BTH) Encode(b []byte) (int, error) {
	if err := h.Validate(); err != nil {
		return 0, err
	}
	if len(b) < BTHLen {
		return 0, fmt.Errorf("%w: BTH needs %d bytes, buffer has %d", ErrShort, BTHLen, len(b))
	}
	h.put(b)
	return BTHLen, nil
}

func (h *BTH) put(b []byte) {
	_ = b[BTHLen-1]
	b[0] = h.Opcode
	b[1] = bit(h.Solicited, 7) | bit(h.MigReq, 6) | h.PadCount<<4 | h.TVer
	be.PutUint16(b[2:], h.PKey)
	be.PutUint32(b[4:], uint32(bit(h.FECN, 7)|bit(h.BECN, 6))<<24|h.DestQP)
	be.PutUint32(b[8:], uint32(bit(h.AckReq, 7))<<24|h.PSN)
}

func bit(v bool, n uint) byte {
	if v {
		return 1 << n
	}
	return 0
}

// DecodeBTH decodes the BTH at the start of b and returns it with BTHLen.
// Errors: ErrShort, ErrVersion (TVer not 0). It never panics.
func DecodeBTH(b []byte) (BTH, int, error) {
	if len(b) < BTHLen {
		return BTH{}, 0, ErrShort
	}
	h := BTH{
		Opcode:    b[0],
		Solicited: b[1]&0x80 != 0,
		MigReq:    b[1]&0x40 != 0,
		PadCount:  b[1] >> 4 & 3,
		TVer:      b[1] & 0x0f,
		PKey:      be.Uint16(b[2:]),
		FECN:      b[4]&0x80 != 0,
		BECN:      b[4]&0x40 != 0,
		DestQP:    be.Uint32(b[4:]) & MaxQPN,
		AckReq:    b[8]&0x80 != 0,
		PSN:       be.Uint32(b[8:]) & maxPSN24,
	}
	if h.TVer != 0 {
		return BTH{}, 0, ErrVersion
	}
	return h, BTHLen, nil
}

// String renders the BTH on one line.
func (h *BTH) String() string {
	return fmt.Sprintf("%s qp=%#06x psn=%d pkey=%#04x se=%t m=%t pad=%d fecn=%t becn=%t ackreq=%t",
		BTHOpcodeName(h.Opcode), h.DestQP, h.PSN, h.PKey, h.Solicited, h.MigReq, h.PadCount, h.FECN, h.BECN, h.AckReq)
}

var bthTransports = [8]string{"RC", "UC", "RD", "UD", "CNP", "XRC", "Manufacturer", "Manufacturer"}

var bthOps = [...]string{
	0x00: "SEND First", 0x01: "SEND Middle", 0x02: "SEND Last", 0x03: "SEND Last with Immediate",
	0x04: "SEND Only", 0x05: "SEND Only with Immediate", 0x06: "RDMA WRITE First",
	0x07: "RDMA WRITE Middle", 0x08: "RDMA WRITE Last", 0x09: "RDMA WRITE Last with Immediate",
	0x0a: "RDMA WRITE Only", 0x0b: "RDMA WRITE Only with Immediate", 0x0c: "RDMA READ Request",
	0x0d: "RDMA READ Response First", 0x0e: "RDMA READ Response Middle",
	0x0f: "RDMA READ Response Last", 0x10: "RDMA READ Response Only", 0x11: "Acknowledge",
	0x12: "ATOMIC Acknowledge", 0x13: "CmpSwap", 0x14: "FetchAdd", 0x16: "SEND Last with Invalidate",
	0x17: "SEND Only with Invalidate",
}

// BTHOpcodeName names a BTH opcode, e.g. 0x04 "RC SEND Only", 0x81 "CNP".
func BTHOpcodeName(op uint8) string {
	if op == 0x81 {
		return "CNP"
	}
	tr := bthTransports[op>>5]
	if low := op & 0x1f; int(low) < len(bthOps) && bthOps[low] != "" {
		return tr + " " + bthOps[low]
	}
	return tr + " opcode " + strconv.Itoa(int(op&0x1f))
}

// RoCEFrame is a decoded RoCEv2 frame: the datagram, its BTH, what lies
// between the BTH and the ICRC (extended transport headers and payload, not
// parsed further), and the ICRC.
type RoCEFrame struct {
	Datagram
	BTH     BTH
	Payload []byte // view: after the BTH, before the ICRC
	ICRC    uint32 // as carried (little-endian on the wire, like an FCS)
}

// EncodeRoCEFrame builds Ethernet/IP/UDP/BTH/payload/ICRC into b and
// returns the frame length (padded to MinFrameLen). payload is everything
// after the BTH (extended headers included); the ICRC is computed. The UDP
// checksum follows a.NoUDPChecksum (RoCEv2 over IPv4 usually sends 0).
func EncodeRoCEFrame(b []byte, a *Addrs, h *BTH, payload []byte) (int, error) {
	if err := h.Validate(); err != nil {
		return 0, err
	}
	l3len, err := a.l3Len()
	if err != nil {
		return 0, err
	}
	off, end, err := putDatagram(b, a, l3len, BTHLen+len(payload)+ICRCLen)
	if err != nil {
		return 0, err
	}
	h.put(b[off:])
	copy(b[off+BTHLen:], payload)
	icrc := roceICRC(b[EthHeaderLen:off-UDPHeaderLen], b[off-UDPHeaderLen:off], b[off:end-ICRCLen])
	putLE32(b[end-ICRCLen:], icrc)
	return sealDatagram(b, a, l3len, end)
}

// DecodeRoCEFrame decodes a RoCEv2 frame and verifies its ICRC (ErrChecksum
// on mismatch). It accepts any UDP port. It never panics and does not
// allocate; the RoCEFrame is zero on error.
func DecodeRoCEFrame(b []byte) (RoCEFrame, error) {
	var f RoCEFrame
	if err := f.Datagram.Decode(b); err != nil {
		return RoCEFrame{}, err
	}
	if len(f.Data) < BTHLen+ICRCLen {
		return RoCEFrame{}, ErrShort
	}
	bth, _, err := DecodeBTH(f.Data)
	if err != nil {
		return RoCEFrame{}, err
	}
	f.BTH = bth
	f.Payload = f.Data[BTHLen : len(f.Data)-ICRCLen]
	f.ICRC = getLE32(f.Data[len(f.Data)-ICRCLen:])
	ip := b[f.L3Off:f.L4Off]
	if roceICRC(ip, b[f.L4Off:f.DataOff], f.Data[:len(f.Data)-ICRCLen]) != f.ICRC {
		return RoCEFrame{}, ErrChecksum
	}
	return f, nil
}

// roceICRC computes the RoCEv2 invariant CRC: CRC-32 (the Ethernet
// polynomial) over eight 0xff bytes standing in for the InfiniBand LRH,
// then the IP and UDP headers and the BTH with every field a router may
// change masked to ones (IPv4 TOS, TTL and header checksum; IPv6 traffic
// class, flow label and hop limit; the UDP checksum; the BTH's reserved
// byte 4), then the rest of the packet up to the ICRC.
func roceICRC(ip, udp, rest []byte) uint32 {
	var buf [8 + 60 + UDPHeaderLen + BTHLen]byte
	n := copy(buf[:], "\xff\xff\xff\xff\xff\xff\xff\xff")
	ipOff := n
	n += copy(buf[n:], ip)
	if len(ip) >= IPv6HeaderLen && ip[0]>>4 == 6 {
		buf[ipOff] |= 0x0f
		buf[ipOff+1], buf[ipOff+2], buf[ipOff+3] = 0xff, 0xff, 0xff
		buf[ipOff+7] = 0xff
	} else if len(ip) >= IPv4HeaderLen {
		buf[ipOff+1] = 0xff
		buf[ipOff+8] = 0xff
		buf[ipOff+10], buf[ipOff+11] = 0xff, 0xff
	}
	udpOff := n
	n += copy(buf[n:], udp)
	buf[udpOff+6], buf[udpOff+7] = 0xff, 0xff
	bthOff := n
	n += copy(buf[n:], rest[:BTHLen])
	buf[bthOff+4] = 0xff
	// crc32.Update reaches its assembly through a function variable, which
	// would move buf to the heap; the few header bytes go through the
	// table by hand instead.
	tab := crc32.IEEETable
	raw := ^uint32(0)
	for _, c := range buf[:n] {
		raw = tab[byte(raw)^c] ^ raw>>8
	}
	return crc32.Update(^raw, tab, rest[BTHLen:])
}

func putLE32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func getLE32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
