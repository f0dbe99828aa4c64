package wire

import (
	"errors"
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

// IBExt is a set of InfiniBand extended transport headers (IBA vol. 1
// §9.3), the ones an opcode carries between the BTH and the payload.
type IBExt uint16

// Extended transport headers, in the order they follow the BTH.
const (
	IBExtXRC       IBExt = 1 << iota // XRCETH, 4 bytes (XRC)
	IBExtRD                          // RDETH, 4 bytes (RD)
	IBExtDatagram                    // DETH, 8 bytes: Q_Key, source QP (RD, UD)
	IBExtRDMA                        // RETH, 16 bytes: virtual address, R_Key, DMA length
	IBExtAtomic                      // AtomicETH, 28 bytes
	IBExtAck                         // AETH, 4 bytes: syndrome, MSN
	IBExtAtomicAck                   // AtomicAckETH, 8 bytes
	IBExtImm                         // ImmDt, 4 bytes
	IBExtInv                         // IETH, 4 bytes
)

// Extended header lengths.
const (
	RETHLen         = 16
	AETHLen         = 4
	DETHLen         = 8
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
)

var ibExtOrder = [...]struct {
	bit IBExt
	n   int
}{
	{IBExtXRC, 4}, {IBExtRD, 4}, {IBExtDatagram, DETHLen}, {IBExtRDMA, RETHLen},
	{IBExtAtomic, AtomicETHLen}, {IBExtAck, AETHLen}, {IBExtAtomicAck, AtomicAckETHLen},
	{IBExtImm, 4}, {IBExtInv, 4},
}

// ibOpExt is the extended headers of each opcode's low five bits for the
// connected and reliable-datagram services (IBA vol. 1 table 38).
var ibOpExt = [32]IBExt{
	0x03: IBExtImm, 0x05: IBExtImm,
	0x06: IBExtRDMA, 0x09: IBExtImm, 0x0a: IBExtRDMA, 0x0b: IBExtRDMA | IBExtImm,
	0x0c: IBExtRDMA,
	0x0d: IBExtAck, 0x0f: IBExtAck, 0x10: IBExtAck, 0x11: IBExtAck,
	0x12: IBExtAck | IBExtAtomicAck,
	0x13: IBExtAtomic, 0x14: IBExtAtomic,
	0x16: IBExtInv, 0x17: IBExtInv,
}

// BTHExtHeaders returns the extended transport headers opcode op carries
// after the BTH and their total length; ok is false for an opcode IBA does
// not define (a reserved one, or a manufacturer's). One table lookup: the
// receive path asks it for every frame.
func BTHExtHeaders(op uint8) (ext IBExt, n int, ok bool) {
	e := bthExtTable[op]
	return IBExt(e), int(e >> 16 & 0xff), e>>24 != 0
}

// bthExtTable holds, per opcode, its IBExt set in bits 0..15, the length
// in bits 16..23 and 1 in bit 24 when IBA defines the opcode.
var bthExtTable = func() (t [256]uint32) {
	for op := range 256 {
		if ext, n, ok := bthExtHeadersSlow(uint8(op)); ok {
			t[op] = uint32(ext) | uint32(n)<<16 | 1<<24
		}
	}
	return t
}()

// bthExtHeadersSlow is BTHExtHeaders from the rules, filling the table.
func bthExtHeadersSlow(op uint8) (ext IBExt, n int, ok bool) {
	low := op & 0x1f
	switch op >> 5 {
	case 0: // RC
		ok = low <= 0x14 || low == 0x16 || low == 0x17
	case 1: // UC: sends and writes only
		ok = low <= 0x0b && low != 0x0c
	case 2: // RD
		ok = low <= 0x14
		ext = IBExtRD | IBExtDatagram
		if low >= 0x0d && low <= 0x12 { // responses carry no DETH
			ext = IBExtRD
		}
	case 3: // UD: SEND Only, with or without immediate
		ok = low == 0x04 || low == 0x05
		ext = IBExtDatagram
	case 4: // CNP: 16 reserved bytes, no extended header
		return 0, 0, op == 0x81
	case 5: // XRC: as RC, without atomic-free gaps
		ok = low <= 0x14 || low == 0x16 || low == 0x17
		ext = IBExtXRC
		if low >= 0x0d && low <= 0x12 {
			ext = 0
		}
	}
	if !ok {
		return 0, 0, false
	}
	ext |= ibOpExt[low]
	for _, e := range ibExtOrder {
		if ext&e.bit != 0 {
			n += e.n
		}
	}
	return ext, n, true
}

// IBExtOffset returns where extended header e starts, counted from the end
// of the BTH, in a packet carrying ext.
func IBExtOffset(ext, e IBExt) int {
	n := 0
	for _, x := range ibExtOrder {
		if x.bit == e {
			return n
		}
		if ext&x.bit != 0 {
			n += x.n
		}
	}
	return n
}

// RETH is the RDMA extended transport header: the remote memory of an RDMA
// WRITE or READ.
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// DecodeRETH reads a RETH from the start of b (RETHLen bytes).
func DecodeRETH(b []byte) (RETH, error) {
	if len(b) < RETHLen {
		return RETH{}, ErrShort
	}
	return RETH{VA: be.Uint64(b), RKey: be.Uint32(b[8:]), DMALen: be.Uint32(b[12:])}, nil
}

// Put writes the RETH to b (RETHLen bytes).
func (r *RETH) Put(b []byte) {
	_ = b[RETHLen-1]
	be.PutUint64(b, r.VA)
	be.PutUint32(b[8:], r.RKey)
	be.PutUint32(b[12:], r.DMALen)
}

// AETH is the ACK extended transport header: a syndrome (ACK, RNR NAK or
// NAK with its code, and the credit count or timer) and the message
// sequence number.
type AETH struct {
	Syndrome uint8
	MSN      uint32 // 24 bits
}

// DecodeAETH reads an AETH from the start of b (AETHLen bytes).
func DecodeAETH(b []byte) (AETH, error) {
	if len(b) < AETHLen {
		return AETH{}, ErrShort
	}
	return AETH{Syndrome: b[0], MSN: be.Uint32(b) & maxPSN24}, nil
}

// Put writes the AETH to b (AETHLen bytes).
func (a *AETH) Put(b []byte) {
	_ = b[AETHLen-1]
	be.PutUint32(b, uint32(a.Syndrome)<<24|a.MSN&maxPSN24)
}

// String names the syndrome: "ACK credits=N", "RNR-NAK timer=N", "NAK code=N".
func (a AETH) String() string {
	v := a.Syndrome & 0x1f
	switch a.Syndrome >> 5 & 3 {
	case 0:
		return fmt.Sprintf("ACK credits=%d msn=%d", v, a.MSN)
	case 1:
		return fmt.Sprintf("RNR-NAK timer=%d msn=%d", v, a.MSN)
	case 3:
		return fmt.Sprintf("NAK code=%d msn=%d", v, a.MSN)
	}
	return fmt.Sprintf("reserved syndrome=%#02x msn=%d", a.Syndrome, a.MSN)
}

// RoCEView locates the parts of a RoCEv2 frame in place, for a stage that
// rewrites frames: offsets into the frame, the opcode's extended headers,
// and the BTH fields a translation stage reads. ParseRoCE fills it without
// copying or allocating.
type RoCEView struct {
	L3Off, L4Off, BTHOff int
	// ExtOff is where the extended headers start (BTHOff+BTHLen); DataOff
	// where the payload starts; ICRCOff where the ICRC starts (the end of
	// the payload, pad bytes included).
	ExtOff, DataOff, ICRCOff int
	IPv6                     bool
	Opcode                   uint8
	DestQP, PSN              uint32
	Ext                      IBExt
}

// ErrNotRoCE is returned by ParseRoCE for a frame that is not a RoCEv2
// datagram at all (not IP, not UDP, another port): a stage passes such
// frames on. ErrRoCEUnsupported is a RoCEv2 datagram in a form ParseRoCE
// does not locate (IPv6 extension headers before the UDP header): a stage
// must not pass it on untranslated. Any other error is a RoCEv2 frame that
// is malformed.
var (
	ErrNotRoCE         = errors.New("wire: not a RoCEv2 frame")
	ErrRoCEUnsupported = errors.New("wire: RoCEv2 frame in an unsupported form")
)

// VLAN tag protocol identifiers ParseRoCE steps over: 802.1Q, 802.1ad
// (QinQ's outer tag) and the pre-standard QinQ 0x9100.
const (
	etherTypeVLAN   = 0x8100
	etherTypeQinQ   = 0x88a8
	etherTypeQinQv1 = 0x9100
)

// ParseRoCE locates a RoCEv2 frame (Ethernet with any number of 802.1Q or
// 802.1ad tags, IPv4 with or without options or IPv6 without extension
// headers, UDP to port, BTH, the opcode's extended headers, payload, ICRC)
// in b. It checks what it reads — IP version, lengths against each other
// and the buffer, fragments, TVer 0, an opcode IBA defines, room for the
// extended headers and the ICRC — but no checksum: the ICRC is the
// caller's (CheckICRC). It does not allocate and never panics. Errors:
// ErrNotRoCE, ErrRoCEUnsupported, ErrShort, ErrLength, ErrIPHeader,
// ErrFragment, ErrVersion, ErrType.
func ParseRoCE(b []byte, port uint16, v *RoCEView) error {
	l3 := EthHeaderLen
	if len(b) < l3 {
		return ErrShort
	}
	et := be.Uint16(b[12:])
	for et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQv1 {
		if len(b) < l3+4 {
			return ErrNotRoCE
		}
		et = be.Uint16(b[l3+2:])
		l3 += 4
	}
	if et != EtherTypeIPv4 && et != EtherTypeIPv6 {
		return ErrNotRoCE
	}
	if len(b) < l3+IPv4HeaderLen+UDPHeaderLen {
		return ErrShort
	}
	var end int
	ip := b[l3:]
	if et == EtherTypeIPv4 {
		if ip[0]>>4 != 4 || ip[0]&0xf < 5 {
			return ErrIPHeader
		}
		if ip[9] != ProtocolUDP {
			return ErrNotRoCE
		}
		if be.Uint16(ip[6:])&0x3fff != 0 {
			return ErrFragment
		}
		ihl := int(ip[0]&0xf) * 4
		if len(ip) < ihl+UDPHeaderLen {
			return ErrShort
		}
		end = l3 + int(be.Uint16(ip[2:]))
		v.L3Off, v.L4Off, v.IPv6 = l3, l3+ihl, false
	} else {
		if len(b) < l3+IPv6HeaderLen+UDPHeaderLen {
			return ErrShort
		}
		if ip[0]>>4 != 6 {
			return ErrIPHeader
		}
		end = l3 + IPv6HeaderLen + int(be.Uint16(ip[4:]))
		v.L3Off, v.L4Off, v.IPv6 = l3, l3+IPv6HeaderLen, true
		if ip[6] != ProtocolUDP {
			return ipv6ExtToRoCE(b, ip[6], v.L4Off, port)
		}
	}
	udp := b[v.L4Off:]
	if be.Uint16(udp[2:]) != port {
		return ErrNotRoCE
	}
	if end > len(b) {
		return ErrShort
	}
	if end < v.L4Off+UDPHeaderLen || int(be.Uint16(udp[4:])) != end-v.L4Off {
		return ErrLength
	}
	v.BTHOff = v.L4Off + UDPHeaderLen
	v.ExtOff = v.BTHOff + BTHLen
	if end < v.ExtOff+ICRCLen {
		return ErrShort
	}
	bth := b[v.BTHOff:v.ExtOff]
	if bth[1]&0x0f != 0 {
		return ErrVersion
	}
	v.Opcode = bth[0]
	ext, n, ok := BTHExtHeaders(v.Opcode)
	if !ok {
		return ErrType
	}
	v.Ext = ext
	v.DestQP = be.Uint32(bth[4:]) & MaxQPN
	v.PSN = be.Uint32(bth[8:]) & maxPSN24
	v.DataOff = v.ExtOff + n
	v.ICRCOff = end - ICRCLen
	if v.DataOff > v.ICRCOff {
		return ErrShort
	}
	if pad := int(bth[1] >> 4 & 3); v.ICRCOff-v.DataOff < pad {
		return ErrLength
	}
	return nil
}

// ipv6ExtToRoCE walks IPv6 extension headers from next header nh at off:
// ErrRoCEUnsupported when they lead to a UDP datagram to port, ErrNotRoCE
// otherwise (another protocol, an encrypted payload, a later fragment, a
// chain running off the frame).
func ipv6ExtToRoCE(b []byte, nh uint8, off int, port uint16) error {
	for range 8 {
		if off+8 > len(b) {
			return ErrNotRoCE
		}
		switch nh {
		case ProtocolUDP:
			if be.Uint16(b[off+2:]) == port {
				return ErrRoCEUnsupported
			}
			return ErrNotRoCE
		case 0, 43, 60: // hop-by-hop, routing, destination options
			nh, off = b[off], off+(int(b[off+1])+1)*8
		case 44: // fragment: only the first one holds the UDP header
			if be.Uint16(b[off+2:])&0xfff8 != 0 {
				return ErrNotRoCE
			}
			nh, off = b[off], off+8
		case 51: // authentication header
			nh, off = b[off], off+(int(b[off+1])+2)*4
		default:
			return ErrNotRoCE
		}
	}
	return ErrNotRoCE
}

// lrhCRC is the CRC (crc32.Update from 0) of the eight 0xFF bytes that
// stand in for the LRH: every ICRC continues from it. A test recomputes it.
const lrhCRC = 0x2144df1c

// icrcInPlaceFrom is the covered length from which ICRC masks the frame
// in place and lets hash/crc32 (PCLMULQDQ on amd64) run over all of it:
// the stall of reading just-written bytes is then small beside the pass,
// and cheaper than the header words done in software. Below it, the
// software words win.
const icrcInPlaceFrom = 256

// ICRC computes the RoCEv2 invariant CRC of the frame v describes, as
// roceICRC does, without copying it: from the CRC of the eight 0xFF bytes
// that stand in for the LRH over the IP, UDP and BTH headers with the
// variant fields masked to ones, and the rest up to the ICRC. A short
// frame's headers go through the CRC eight bytes at a time as words read
// from the frame and masked in the register, nothing written; a long
// frame (icrcInPlaceFrom) has the masks written into it for the one
// hash/crc32 pass and every byte put back after, so it must be the
// caller's alone for the call (a stage's received frame, a decoded
// capture's).
func (v *RoCEView) ICRC(b []byte) uint32 {
	// The word path knows the plain headers' layout; IPv4 options move the
	// UDP header, so such a frame takes the in-place pass.
	if v.ICRCOff-v.L3Off >= icrcInPlaceFrom || !v.IPv6 && v.L4Off-v.L3Off != IPv4HeaderLen {
		return v.icrcInPlace(b)
	}
	h := b[v.L3Off:v.ExtOff]
	crc := ^uint32(lrhCRC)
	var rest int // where the bytes hash/crc32 takes start, in h
	if v.IPv6 {
		_ = h[55]                                             // IPv6 40 + UDP 8 + the BTH's first 8
		crc = crcWord(crc, le64(h[0:])|0xff00_0000_ffff_ff0f) // traffic class, flow label, hop limit
		crc = crcWord(crc, le64(h[8:]))
		crc = crcWord(crc, le64(h[16:]))
		crc = crcWord(crc, le64(h[24:]))
		crc = crcWord(crc, le64(h[32:]))
		crc = crcWord(crc, le64(h[40:])|0xffff<<48) // UDP checksum
		crc = crcWord(crc, le64(h[48:])|0xff<<32)   // BTH resv8a (FECN, BECN)
		rest = 56
	} else {
		_ = h[39]                                   // IPv4 20 + UDP 8 + BTH 12
		crc = crcWord(crc, le64(h[0:])|0xff<<8)     // TOS
		crc = crcWord(crc, le64(h[8:])|0xffff_00ff) // TTL, header checksum
		crc = crcWord(crc, le64(h[16:]))            // addresses, UDP ports
		crc = crcWord(crc, le64(h[24:])|0xffff<<16) // UDP checksum
		crc = crcWord(crc, le64(h[32:])|0xff)       // BTH resv8a
		rest = 40
	}
	return crc32.Update(^crc, crc32.IEEETable, b[v.L3Off+rest:v.ICRCOff])
}

// icrcInPlace is ICRC for long frames: masks written, one pass, restored.
func (v *RoCEView) icrcInPlace(b []byte) uint32 {
	ip := b[v.L3Off:v.L4Off]
	udp := b[v.L4Off : v.L4Off+UDPHeaderLen]
	bth := b[v.BTHOff:v.ExtOff]
	var s [8]byte
	if v.IPv6 {
		s[0], s[1], s[2], s[3], s[4] = ip[0], ip[1], ip[2], ip[3], ip[7]
		ip[0] |= 0x0f
		ip[1], ip[2], ip[3], ip[7] = 0xff, 0xff, 0xff, 0xff
	} else {
		s[0], s[1], s[2], s[3] = ip[1], ip[8], ip[10], ip[11]
		ip[1], ip[8], ip[10], ip[11] = 0xff, 0xff, 0xff, 0xff
	}
	s[5], s[6], s[7] = udp[6], udp[7], bth[4]
	udp[6], udp[7], bth[4] = 0xff, 0xff, 0xff
	crc := crc32.Update(lrhCRC, crc32.IEEETable, b[v.L3Off:v.ICRCOff])
	if v.IPv6 {
		ip[0], ip[1], ip[2], ip[3], ip[7] = s[0], s[1], s[2], s[3], s[4]
	} else {
		ip[1], ip[8], ip[10], ip[11] = s[0], s[1], s[2], s[3]
	}
	udp[6], udp[7], bth[4] = s[5], s[6], s[7]
	return crc
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// crcWord runs eight bytes (w, least significant first) through the
// reflected CRC-32 register crc, slicing by 8.
func crcWord(crc uint32, w uint64) uint32 {
	t := &crcSlice8
	x := crc ^ uint32(w)
	y := uint32(w >> 32)
	return t[7][x&0xff] ^ t[6][x>>8&0xff] ^ t[5][x>>16&0xff] ^ t[4][x>>24] ^
		t[3][y&0xff] ^ t[2][y>>8&0xff] ^ t[1][y>>16&0xff] ^ t[0][y>>24]
}

// crcSlice8 are the slicing-by-8 tables of the IEEE CRC-32 (table 0 is
// crc32.IEEETable; table k advances a byte k more positions).
var crcSlice8 = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := range 256 {
		for k := 1; k < 8; k++ {
			c := t[k-1][i]
			t[k][i] = c>>8 ^ t[0][c&0xff]
		}
	}
	return t
}()

// CheckICRC reports whether the frame's ICRC is right.
func (v *RoCEView) CheckICRC(b []byte) bool {
	return v.ICRC(b) == getLE32(b[v.ICRCOff:])
}

// PutICRC computes the ICRC and writes it into the frame, keeping a UDP
// checksum right (it covers the ICRC).
func (v *RoCEView) PutICRC(b []byte) {
	v.writeICRC(b, v.ICRC(b))
}

// writeICRC stores crc as the frame's ICRC and, when the datagram carries a
// UDP checksum, updates it for the four bytes (RFC 1624), over the 16-bit
// words that cover them counted from the UDP header (the ICRC ends the
// datagram; an odd last byte is paired with a virtual zero).
func (v *RoCEView) writeICRC(b []byte, crc uint32) {
	ck := be.Uint16(b[v.L4Off+6:])
	if ck == 0 {
		putLE32(b[v.ICRCOff:], crc)
		return
	}
	end := v.ICRCOff + ICRCLen
	start := v.L4Off + (v.ICRCOff-v.L4Off)&^1
	word := func(p int) uint32 {
		w := uint32(b[p]) << 8
		if p+1 < end {
			w |= uint32(b[p+1])
		}
		return w
	}
	sum := uint32(^ck)
	for p := start; p < end; p += 2 {
		sum += ^word(p) & 0xffff
	}
	putLE32(b[v.ICRCOff:], crc)
	for p := start; p < end; p += 2 {
		sum += word(p)
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	nc := ^uint16(sum)
	if nc == 0 {
		nc = 0xffff
	}
	be.PutUint16(b[v.L4Off+6:], nc)
}

// SetDestQP rewrites the BTH's destination QP, keeping a UDP checksum
// right (RFC 1624 incremental update) when the datagram carries one. The
// ICRC is the caller's to rewrite (PutICRC).
func (v *RoCEView) SetDestQP(b []byte, qp uint32) {
	v.setBTHWord(b, 4, be.Uint32(b[v.BTHOff+4:])&^MaxQPN|qp&MaxQPN)
	v.DestQP = qp & MaxQPN
}

// SetPKey rewrites the BTH's partition key, keeping a UDP checksum right.
func (v *RoCEView) SetPKey(b []byte, pkey uint16) {
	w := be.Uint32(b[v.BTHOff:])
	v.setBTHWord(b, 0, w&^0xffff|uint32(pkey))
}

func (v *RoCEView) setBTHWord(b []byte, off int, w uint32) {
	p := b[v.BTHOff+off : v.BTHOff+off+4]
	old := be.Uint32(p)
	be.PutUint32(p, w)
	ck := b[v.L4Off+6 : v.L4Off+8]
	c := be.Uint16(ck)
	if c == 0 || old == w {
		return
	}
	// HC' = ~(~HC + ~m + m'), over the two 16-bit words that changed.
	sum := uint32(^c) + uint32(^uint16(old>>16)) + uint32(^uint16(old)) + uint32(uint16(w>>16)) + uint32(uint16(w))
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	nc := ^uint16(sum)
	if nc == 0 {
		nc = 0xffff
	}
	be.PutUint16(ck, nc)
}

// icrcWays is how many frame lengths an ICRCUpdater keeps tables for.
const icrcWays = 4

// ICRCUpdater patches a RoCEv2 frame's ICRC after a stage rewrote BTH
// bytes 2 to 7 (the P_Key and the destination QP) without a second pass
// over the frame. A CRC is linear: the new ICRC is the old one XOR the
// CRC contribution of the bytes that changed, which depends only on those
// bytes and on how many bytes follow them — the frame's length. For each
// of four lengths it keeps one table per BTH byte that may change (5
// tables of 256 entries: a patch is one lookup per changed byte), built
// from 40 CRC passes over zeros the second time a length is met (the
// first time, and for lengths beyond its buffer, it leaves the caller to
// recompute: Patch returns false). One stage owns one; it allocates only
// in NewICRCUpdater.
type ICRCUpdater struct {
	lens     [icrcWays]int32
	tabs     [icrcWays][6][256]uint32 // per BTH byte 2..7 (4 unused: masked) and value
	next     int
	last     int // the way the latest patch used: frames of one length come in runs
	lastMiss int32
	zeros    []byte
	// Hits and Builds count patches served from a table and tables built.
	Hits, Builds uint64
}

// NewICRCUpdater returns an updater for frames of up to maxFrame bytes.
func NewICRCUpdater(maxFrame int) *ICRCUpdater {
	u := &ICRCUpdater{zeros: make([]byte, maxFrame+8), lastMiss: -1}
	for i := range u.lens {
		u.lens[i] = -1
	}
	return u
}

// Patch updates the ICRC of the frame v describes, whose BTH bytes 0 to 7
// were old (big-endian, as read before the rewrite) and are now what the
// frame holds. It returns false, changing nothing, when it has no table
// for the frame's length yet: the caller then writes the ICRC in full
// (PutICRC). The old ICRC must have been right.
func (u *ICRCUpdater) Patch(v *RoCEView, b []byte, old uint64) bool {
	d := (old ^ be.Uint64(b[v.BTHOff:])) & 0x0000_ffff_00ff_ffff // bytes 2-3 and 5-7; byte 4 is masked
	if d == 0 {
		return true
	}
	k := int32(v.ICRCOff - v.ExtOff) // bytes after the BTH (its bytes 8..11 follow the QP too)
	w := u.last
	if u.lens[w] != k {
		w = -1
		for i, l := range u.lens {
			if l == k {
				w = i
				break
			}
		}
	}
	if w < 0 {
		if k != u.lastMiss || int(k)+10 > len(u.zeros) {
			u.lastMiss = k
			return false
		}
		w = u.build(k)
	}
	u.last = w
	t := &u.tabs[w]
	// One table lookup per changed byte: BTH bytes 2, 3 (P_Key) and 5, 6,
	// 7 (destination QP) sit at bits 40..47, 32..39, 16..23, 8..15, 0..7.
	var e uint32
	if x := byte(d >> 40); x != 0 {
		e ^= t[0][x]
	}
	if x := byte(d >> 32); x != 0 {
		e ^= t[1][x]
	}
	if x := byte(d >> 16); x != 0 {
		e ^= t[3][x]
	}
	if x := byte(d >> 8); x != 0 {
		e ^= t[4][x]
	}
	if x := byte(d); x != 0 {
		e ^= t[5][x]
	}
	v.writeICRC(b, getLE32(b[v.ICRCOff:])^e)
	u.Hits++
	return true
}

// build fills a way's tables for k bytes after the BTH.
func (u *ICRCUpdater) build(k int32) int {
	w := u.next
	u.next = (u.next + 1) % icrcWays
	buf := u.zeros[:10+int(k)] // BTH bytes 2..11, then k bytes
	z := crc32.Update(0, crc32.IEEETable, buf)
	t := &u.tabs[w]
	for j := range 6 {
		if j == 2 {
			continue // BTH byte 4 is masked: it never changes the ICRC
		}
		var basis [8]uint32
		for bit := range 8 {
			buf[j] = 1 << bit
			basis[bit] = crc32.Update(0, crc32.IEEETable, buf) ^ z
			buf[j] = 0
		}
		for v := range 256 {
			var e uint32
			for bit := range 8 {
				if v&(1<<bit) != 0 {
					e ^= basis[bit]
				}
			}
			t[j][v] = e
		}
	}
	u.lens[w] = k
	u.lastMiss = -1
	u.Builds++
	return w
}
