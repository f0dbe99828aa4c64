package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/wire"
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
//
// With shardBits != 0 (which needs udpPort) the program also reads the
// transport header's destination CID (its first word: version in the top
// 4 bits, CID in the low 24, the shard in the CID's top shardBits) and,
// when that shard is not the receiving queue, adds one to missFD[queue]:
// the kernel would drop a frame redirected to another queue's socket, so
// the frame still goes to its own queue's socket and the counter tells how
// many the sender's steering missed. A frame to CID 0 (a ConnOpen, or data
// sent before the ConnAccept) belongs to the shard its opener's source CID
// names (steerCheck), as core/shard decides; a frame with no owner (too
// short for the word, of another version, CID 0 without a source CID) is
// redirected uncounted.
func programInstructions(xsksFD int, udpPort uint16, shardBits, missFD int) asm.Instructions {
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
			asm.Add.Imm(data, ipv6HeaderLen), // the UDP header at data+ethHeaderLen, as for IPv4
			asm.Ja.Label("steer"),
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
		insns = append(insns, steerCheck(shardBits, missFD)...)
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

// openerExts is how many extensions the program looks through for the
// source CID of a frame to CID 0, as core/shard's Owner does
// (shard.MaxOpenerExts; a test keeps them equal).
const openerExts = 8

// steerCheck counts a frame whose owner is another queue's shard; data
// points IP-header-length bytes past the frame start, so the UDP header is
// at data+ethHeaderLen, and R6 holds the context. The owner is the one
// core/shard's Owner finds, step for step: the shard the destination CID
// names, or, for a frame to CID 0 (a ConnOpen, or data sent before the
// ConnAccept), the shard the opener's CID names in the source-CID
// extension, found by walking the extension chain of a body-less type up
// to openerExts TLVs. A frame with no owner is not counted. The shard is
// the CID's top shardBits bits, read as one of 1<<shardBits shards.
func steerCheck(shardBits, missFD int) asm.Instructions {
	const (
		data, dataEnd, end, w, rxq = asm.R2, asm.R3, asm.R4, asm.R5, asm.R7
		typ, left, n               = asm.R1, asm.R8, asm.R9
		hdr                        = ethHeaderLen + udpHeaderLen // the transport header
		ext                        = hdr + wire.BaseHeaderLen    // its extensions, for a body-less type
	)
	if shardBits == 0 {
		return asm.Instructions{asm.Ja.Label("redirect").WithSymbol("steer")}
	}
	need := func(off int32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(end, data),
			asm.Add.Imm(end, off),
			asm.JGT.Reg(end, dataEnd, "redirect"),
		}
	}
	insns := need(hdr + 4)
	insns[0] = insns[0].WithSymbol("steer")
	insns = append(insns,
		asm.LoadMem(w, data, hdr, asm.Word),
		asm.HostTo(asm.BE, w, asm.Word),
		asm.Mov.Reg(end, w),
		asm.RSh.Imm(end, 28),
		asm.JNE.Imm(end, wire.Version, "redirect"),
		asm.And.Imm(w, wire.MaxCID),
		asm.JNE.Imm(w, 0, "named"),
	)
	// CID 0: a body-less type, then the extension chain, TLV by TLV.
	insns = append(insns, need(ext)...)
	insns = append(insns, asm.LoadMem(typ, data, hdr+4, asm.Byte))
	for _, t := range []wire.Type{wire.TypeInvalid, wire.TypeResync, wire.TypeAck, wire.TypeExtendedAck, wire.TypeNack} {
		insns = append(insns, asm.JEq.Imm(typ, int32(t), "redirect"))
	}
	insns = append(insns,
		asm.JGT.Imm(typ, int32(wire.TypeSend), "redirect"),
		asm.LoadMem(left, data, hdr+7, asm.Byte), // ExtWords
		asm.LSh.Imm(left, 2),
	)
	for range openerExts {
		insns = append(insns, asm.JEq.Imm(left, 0, "redirect"))
		insns = append(insns, need(ext+2)...)
		insns = append(insns,
			asm.LoadMem(n, data, ext+1, asm.Byte),
			asm.LSh.Imm(n, 2),
			asm.JEq.Imm(n, 0, "redirect"),
			asm.JGT.Reg(n, left, "redirect"),
			asm.LoadMem(typ, data, ext, asm.Byte),
			asm.JEq.Imm(typ, int32(wire.ExtTypeSourceCID), "source"),
			asm.Sub.Reg(left, n),
			asm.Add.Reg(data, n), // the next TLV at data+ext
		)
	}
	insns = append(insns,
		asm.Ja.Label("redirect"),
		asm.JLT.Imm(n, 8, "redirect").WithSymbol("source"),
	)
	insns = append(insns, need(ext+8)...)
	insns = append(insns,
		asm.LoadMem(w, data, ext+4, asm.Word),
		asm.HostTo(asm.BE, w, asm.Word),
		asm.And.Imm(w, wire.MaxCID),
		asm.RSh.Imm(w, int32(24-shardBits)).WithSymbol("named"),
		asm.LoadMem(rxq, asm.R6, xdpMdRxQueueIndex, asm.Word),
		asm.JEq.Reg(w, rxq, "redirect"),
		asm.StoreMem(asm.RFP, -4, rxq, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, missFD),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "redirect"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
	return insns
}

// program is a loaded XDP program with its XSKMAP.
type program struct {
	prog *ebpf.Program
	xsks *ebpf.Map
	miss *ebpf.Map // per-queue count of frames whose CID names another shard; nil without shard bits
}

// loadProgram creates an XSKMAP with one slot per interface queue and loads
// the program that redirects into it.
func loadProgram(queues int, udpPort uint16, shardBits int, frags bool) (*program, error) {
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
	var miss *ebpf.Map
	missFD := -1
	if shardBits != 0 {
		miss, err = ebpf.NewMap(&ebpf.MapSpec{
			Name: "peregrine_miss", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: uint32(queues),
		})
		if err != nil {
			xsks.Close()
			return nil, privilegeError("create the missteered map", err)
		}
		missFD = miss.FD()
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
		Instructions: programInstructions(xsks.FD(), udpPort, shardBits, missFD),
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		xsks.Close()
		if miss != nil {
			miss.Close()
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("afxdp: the verifier rejected the XDP program (a bug in peregrine): %+v", ve)
		}
		return nil, privilegeError("load XDP program", err)
	}
	return &program{prog: prog, xsks: xsks, miss: miss}, nil
}

func (p *program) Close() error {
	err := errors.Join(p.prog.Close(), p.xsks.Close())
	if p.miss != nil {
		err = errors.Join(err, p.miss.Close())
	}
	return err
}

// missteered reads interface queue q's count (0 without shard bits).
func (p *program) missteered(q int) uint64 {
	var v uint64
	if p.miss == nil || p.miss.Lookup(uint32(q), &v) != nil {
		return 0
	}
	return v
}

// attachFlags maps a Mode to the link flags.
func attachFlags(m Mode) link.XDPAttachFlags {
	if m == ModeGeneric {
		return link.XDPGenericMode
	}
	return link.XDPDriverMode
}
