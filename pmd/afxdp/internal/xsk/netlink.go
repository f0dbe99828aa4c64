package xsk

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an
// attribute type.
const nlaTypeMask = 0x3fff

// XDP attach modes as netlink reports them (XDP_ATTACHED_*).
const (
	XDPAttachedNone  = 0
	XDPAttachedDrv   = 1
	XDPAttachedSKB   = 2
	XDPAttachedHW    = 3
	XDPAttachedMulti = 4
)

// Link is an interface as rtnetlink describes it.
type Link struct {
	Name    string
	Index   int
	MTU     int
	MAC     net.HardwareAddr
	Queues  int    // max(numrxqueues, numtxqueues): allocated, not current
	XDPMode uint8  // XDPAttached*
	XDPProg uint32 // id of the attached XDP program, 0 if none
}

// Links dumps every interface of the calling thread's network namespace.
func Links() ([]Link, error) {
	tab, err := syscall.NetlinkRIB(unix.RTM_GETLINK, unix.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("netlink RTM_GETLINK: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return nil, fmt.Errorf("netlink: parse link dump: %w", err)
	}
	var out []Link
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		l := Link{Index: int(int32(binary.NativeEndian.Uint32(m.Data[4:8])))}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			return nil, fmt.Errorf("netlink: parse link attributes: %w", err)
		}
		var numRx, numTx int
		for _, a := range attrs {
			v := a.Value
			switch a.Attr.Type & nlaTypeMask {
			case unix.IFLA_IFNAME:
				l.Name = strings.TrimRight(string(v), "\x00")
			case unix.IFLA_MTU:
				if len(v) >= 4 {
					l.MTU = int(binary.NativeEndian.Uint32(v))
				}
			case unix.IFLA_ADDRESS:
				l.MAC = net.HardwareAddr(slices.Clone(v))
			case unix.IFLA_NUM_RX_QUEUES:
				if len(v) >= 4 {
					numRx = int(binary.NativeEndian.Uint32(v))
				}
			case unix.IFLA_NUM_TX_QUEUES:
				if len(v) >= 4 {
					numTx = int(binary.NativeEndian.Uint32(v))
				}
			case unix.IFLA_XDP:
				l.XDPMode, l.XDPProg = parseXDPAttr(v)
			}
		}
		l.Queues = max(numRx, numTx)
		out = append(out, l)
	}
	return out, nil
}

// parseXDPAttr reads the nested IFLA_XDP attribute.
func parseXDPAttr(b []byte) (mode uint8, prog uint32) {
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < unix.SizeofRtAttr || l > len(b) {
			break
		}
		v := b[unix.SizeofRtAttr:l]
		switch typ {
		case unix.IFLA_XDP_ATTACHED:
			if len(v) >= 1 {
				mode = v[0]
			}
		case unix.IFLA_XDP_PROG_ID:
			if len(v) >= 4 {
				prog = binary.NativeEndian.Uint32(v)
			}
		case unix.IFLA_XDP_DRV_PROG_ID, unix.IFLA_XDP_SKB_PROG_ID:
			if len(v) >= 4 && prog == 0 {
				prog = binary.NativeEndian.Uint32(v)
			}
		}
		next := (l + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return mode, prog
}
