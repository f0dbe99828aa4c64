package wirelayers

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Summary describes one Ethernet frame on one line, for `peregrine decode`
// and test failure messages. Frames to or from port (0 means
// wire.DefaultPort) are decoded as the transport and RoCEv2 frames as BTH,
// both by package wire with every check it makes (IP and UDP checksums,
// lengths, the ICRC); other frames are named by gopacket's layers. A frame
// that fails a check says which.
func Summary(frame []byte, port uint16) string {
	if port == 0 {
		port = wire.DefaultPort
	}
	d, err := wire.DecodeUDP(frame)
	switch {
	case errors.Is(err, wire.ErrNotIP), errors.Is(err, wire.ErrNotUDP), errors.Is(err, wire.ErrFragment):
		return layerNames(frame)
	case err != nil:
		return fmt.Sprintf("%s: %v", layerNames(frame), err)
	}
	flow := fmt.Sprintf("%v → %v", netip.AddrPortFrom(d.SrcIP, d.SrcPort), netip.AddrPortFrom(d.DstIP, d.DstPort))
	switch {
	case d.DstPort == port || d.SrcPort == port:
		f, err := wire.DecodeFrame(frame)
		if err != nil {
			return fmt.Sprintf("%s peregrine: %v", flow, err)
		}
		return fmt.Sprintf("%s peregrine %s%s", flow, f.Header.String(), IOISummary(d.TOS, &f.Header))
	case d.DstPort == wire.RoCEv2Port:
		return flow + " " + RoCESummary(frame)
	}
	return fmt.Sprintf("%s udp len=%d", flow, len(d.Data))
}

// RoCESummary describes a RoCEv2 frame: its BTH fields, the extended
// headers its opcode carries (RETH, AETH, DETH), the payload length and
// the ICRC with its status — "ok", or "BAD" with the value it should
// have. A frame too malformed to locate the ICRC says why.
func RoCESummary(frame []byte) string {
	var v wire.RoCEView
	if err := wire.ParseRoCE(frame, wire.RoCEv2Port, &v); err != nil {
		return fmt.Sprintf("roce: %v", err)
	}
	h, _, err := wire.DecodeBTH(frame[v.BTHOff:])
	if err != nil {
		return fmt.Sprintf("roce: %v", err)
	}
	var b strings.Builder
	b.WriteString("roce ")
	b.WriteString(h.String())
	ext := frame[v.ExtOff:v.DataOff]
	if v.Ext&wire.IBExtDatagram != 0 {
		d := ext[wire.IBExtOffset(v.Ext, wire.IBExtDatagram):]
		fmt.Fprintf(&b, " deth{qkey=%#x srcqp=%#06x}", uint32(d[0])<<24|uint32(d[1])<<16|uint32(d[2])<<8|uint32(d[3]), uint32(d[5])<<16|uint32(d[6])<<8|uint32(d[7]))
	}
	if v.Ext&wire.IBExtRDMA != 0 {
		r, _ := wire.DecodeRETH(ext[wire.IBExtOffset(v.Ext, wire.IBExtRDMA):])
		fmt.Fprintf(&b, " reth{va=%#x rkey=%#x len=%d}", r.VA, r.RKey, r.DMALen)
	}
	if v.Ext&wire.IBExtAck != 0 {
		a, _ := wire.DecodeAETH(ext[wire.IBExtOffset(v.Ext, wire.IBExtAck):])
		fmt.Fprintf(&b, " aeth{%v}", a)
	}
	fmt.Fprintf(&b, " payload=%d", v.ICRCOff-v.DataOff-int(h.PadCount))
	carried := uint32(frame[v.ICRCOff]) | uint32(frame[v.ICRCOff+1])<<8 | uint32(frame[v.ICRCOff+2])<<16 | uint32(frame[v.ICRCOff+3])<<24
	if got := v.ICRC(frame); got == carried {
		fmt.Fprintf(&b, " icrc=%#08x ok", carried)
	} else {
		fmt.Fprintf(&b, " icrc=%#08x BAD (computed %#08x)", carried, got)
	}
	return b.String()
}

func layerNames(frame []byte) string {
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var names []string
	for _, l := range pkt.Layers() {
		names = append(names, l.LayerType().String())
	}
	return strings.Join(names, "/")
}

// IOISummary describes a transport packet's IOI marks (docs/ioi.md) from its
// IP TOS and header: " ioi=in-order seq=N" for a flagged packet (its
// in-order sequence number travels in the SSN field), " ioi=sprayed" for
// a middle packet, the phase when there is one, and the DSCP when set. A
// packet without any IOI mark gives "".
func IOISummary(tos uint8, h *wire.Header) string {
	flagged := h.Flags.Has(wire.FlagIOIInOrder)
	dscp := tos >> 2
	if !flagged && h.Phase == wire.PhaseNone && dscp == 0 {
		return ""
	}
	var b strings.Builder
	switch {
	case flagged:
		fmt.Fprintf(&b, " ioi=in-order seq=%d", h.SSN)
	case h.Phase == wire.PhaseMiddle:
		b.WriteString(" ioi=sprayed")
	default:
		b.WriteString(" ioi=none")
	}
	if h.Phase != wire.PhaseNone {
		fmt.Fprintf(&b, " ioi-phase=%v", h.Phase)
	}
	if dscp != 0 {
		fmt.Fprintf(&b, " dscp=%d", dscp)
	}
	return b.String()
}
