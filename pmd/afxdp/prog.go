package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ProgramName is the name the XDP program is loaded under (bpftool prog).
const ProgramName = "peregrine_xsk"

// Offsets in struct xdp_md and in the headers the filter parses.
const (
	xdpMdData         = 0
	xdpMdDataEnd      = 4
	xdpMdRxQueueIndex = 16

	ethHeaderLen  = 14
	vlanHeaderLen = 4
	ethTypeOff    = 12
	ipv4MinLen    = 20
	ipv4FragOff   = ethHeaderLen + 6
	ipv4ProtoOff  = ethHeaderLen + 9
	ipv6HeaderLen = 40
	ipv6NextOff   = ethHeaderLen + 6
	udpHeaderLen  = 8
	udpDstPortOff = 2

	ipProtoUDP = 17
	xdpPass    = 2
)

// be16 returns the value a 16-bit load from packet memory yields for the
// big-endian (network order) field value v.
func be16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// programInstructions builds the XDP program: redirect every frame (or,
// with udpPort != 0, every IPv4/IPv6 UDP datagram to that destination port)
// into xsks[rx_queue_index]; everything else, and any frame whose queue has
// no socket in the map, goes to the kernel stack (XDP_PASS), so ARP and
// neighbour discovery keep working. IPv6 extension headers, VLAN tags and
// non-first IPv4 fragments are not parsed: such frames pass.
func programInstructions(xsksFD int, udpPort uint16) asm.Instructions {
	const (
		ctx     = asm.R6
		data    = asm.R2
		dataEnd = asm.R3
		end     = asm.R4
		tmp     = asm.R5
	)
	insns := asm.Instructions{
		asm.Mov.Reg(ctx, asm.R1),
	}
	if udpPort != 0 {
		// Every packet load is preceded by a check that the bytes up to
		// its end lie before data_end, the form the verifier proves safe.
		need := func(n int32) asm.Instructions {
			return asm.Instructions{
				asm.Mov.Reg(end, data),
				asm.Add.Imm(end, n),
				asm.JGT.Reg(end, dataEnd, "pass"),
			}
		}
		insns = append(insns,
			asm.LoadMem(data, ctx, xdpMdData, asm.Word),
			asm.LoadMem(dataEnd, ctx, xdpMdDataEnd, asm.Word),
		)
		insns = append(insns, need(ethHeaderLen)...)
		insns = append(insns,
			asm.LoadMem(tmp, data, ethTypeOff, asm.Half),
			asm.JEq.Imm(tmp, be16(unix.ETH_P_IP), "ipv4"),
			asm.JNE.Imm(tmp, be16(unix.ETH_P_IPV6), "pass"),
		)
		// IPv6: fixed header, next header must be UDP.
		insns = append(insns, need(ethHeaderLen+ipv6HeaderLen+udpHeaderLen)...)
		insns = append(insns,
			asm.LoadMem(tmp, data, ipv6NextOff, asm.Byte),
			asm.JNE.Imm(tmp, ipProtoUDP, "pass"),
			asm.LoadMem(tmp, data, ethHeaderLen+ipv6HeaderLen+udpDstPortOff, asm.Half),
			asm.JNE.Imm(tmp, be16(udpPort), "pass"),
			asm.Ja.Label("redirect"),
		)
		// IPv4: protocol UDP, first fragment, header length from IHL.
		ipv4 := need(ethHeaderLen + ipv4MinLen)
		ipv4[0] = ipv4[0].WithSymbol("ipv4")
		insns = append(insns, ipv4...)
		insns = append(insns,
			asm.LoadMem(tmp, data, ipv4ProtoOff, asm.Byte),
			asm.JNE.Imm(tmp, ipProtoUDP, "pass"),
			asm.LoadMem(tmp, data, ipv4FragOff, asm.Half),
			asm.And.Imm(tmp, be16(0x1fff)),
			asm.JNE.Imm(tmp, 0, "pass"),
			asm.LoadMem(tmp, data, ethHeaderLen, asm.Byte),
			asm.And.Imm(tmp, 0x0f),
			asm.LSh.Imm(tmp, 2),
			asm.JLT.Imm(tmp, ipv4MinLen, "pass"),
			asm.Add.Reg(data, tmp), // data now points IHL*4 bytes further
		)
		insns = append(insns, need(ethHeaderLen+udpHeaderLen)...)
		insns = append(insns,
			asm.LoadMem(tmp, data, ethHeaderLen+udpDstPortOff, asm.Half),
			asm.JNE.Imm(tmp, be16(udpPort), "pass"),
		)
	}
	insns = append(insns,
		// bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS): the low
		// bits of flags are the action when the map has no socket there.
		asm.LoadMem(asm.R2, ctx, xdpMdRxQueueIndex, asm.Word).WithSymbol("redirect"),
		asm.LoadMapPtr(asm.R1, xsksFD),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	)
	if udpPort != 0 {
		insns = append(insns,
			asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
			asm.Return(),
		)
	}
	return insns
}

// program is a loaded XDP program with its XSKMAP.
type program struct {
	prog *ebpf.Program
	xsks *ebpf.Map
}

// loadProgram creates an XSKMAP with one slot per interface queue and loads
// the program that redirects into it.
func loadProgram(queues int, udpPort uint16, frags bool) (*program, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "peregrine_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(queues),
	})
	if err != nil {
		return nil, privilegeError("create XSKMAP", err)
	}
	var flags uint32
	if frags {
		// Multi-buffer frames reach the program and the sockets whole.
		flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         ProgramName,
		Type:         ebpf.XDP,
		Flags:        flags,
		Instructions: programInstructions(xsks.FD(), udpPort),
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		xsks.Close()
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("afxdp: the verifier rejected the XDP program (a bug in peregrine): %+v", ve)
		}
		return nil, privilegeError("load XDP program", err)
	}
	return &program{prog: prog, xsks: xsks}, nil
}

func (p *program) Close() error {
	return errors.Join(p.prog.Close(), p.xsks.Close())
}

// attachFlags maps a Mode to the link flags.
func attachFlags(m Mode) link.XDPAttachFlags {
	if m == ModeGeneric {
		return link.XDPGenericMode
	}
	return link.XDPDriverMode
}
