package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gopacket/gopacket/layers"
)

// Link types a capture may carry that ToEthernet turns into Ethernet
// frames: Ethernet itself, Linux cooked captures (tcpdump -i any: SLL and
// SLL2) and raw IP (DLT_RAW as 101 or BSD's 12 and 14, LINKTYPE_IPV4 and
// _IPV6).
var linkTypes = map[layers.LinkType]string{
	layers.LinkTypeEthernet:  "Ethernet",
	layers.LinkTypeLinuxSLL:  "Linux cooked (SLL)",
	layers.LinkTypeLinuxSLL2: "Linux cooked v2 (SLL2)",
	layers.LinkTypeRaw:       "raw IP",
	12:                       "raw IP",
	14:                       "raw IP",
	layers.LinkTypeIPv4:      "raw IPv4",
	layers.LinkTypeIPv6:      "raw IPv6",
}

// Header lengths of the Linux cooked captures.
const (
	sllLen  = 16
	sll2Len = 20
	ethLen  = 14
)

// ErrLinkHeader is ToEthernet's error for a record too short for, or
// inconsistent with, its link type's header.
var ErrLinkHeader = errors.New("malformed link header")

// CheckLinkType refuses a link type ToEthernet cannot convert.
func CheckLinkType(lt layers.LinkType) error {
	if _, ok := linkTypes[lt]; !ok {
		return fmt.Errorf("link type %s (%d) is not one this reads (Ethernet, Linux SLL and SLL2 from tcpdump -i any, raw IPv4/IPv6)", lt, int(lt))
	}
	return nil
}

// ToEthernet returns the record data of link type lt as an Ethernet frame:
// data itself for Ethernet; otherwise an Ethernet header (zero addresses,
// or the source address an SLL header gives, and the EtherType of the
// payload) followed by the network-layer payload, built in buf (which it
// grows only when too small, so a reused buf costs no allocation). It
// never panics; a record too short for its header, or raw IP that is
// neither version 4 nor 6, is ErrLinkHeader.
func ToEthernet(lt layers.LinkType, data, buf []byte) ([]byte, error) {
	var (
		proto   uint16
		payload []byte
		src     []byte
	)
	switch lt {
	case layers.LinkTypeEthernet:
		return data, nil
	case layers.LinkTypeLinuxSLL:
		if len(data) < sllLen {
			return nil, fmt.Errorf("%w: %d bytes, shorter than a Linux SLL header (%d)", ErrLinkHeader, len(data), sllLen)
		}
		proto, payload = binary.BigEndian.Uint16(data[14:16]), data[sllLen:]
		if binary.BigEndian.Uint16(data[4:6]) == 6 {
			src = data[6:12]
		}
	case layers.LinkTypeLinuxSLL2:
		if len(data) < sll2Len {
			return nil, fmt.Errorf("%w: %d bytes, shorter than a Linux SLL2 header (%d)", ErrLinkHeader, len(data), sll2Len)
		}
		proto, payload = binary.BigEndian.Uint16(data[0:2]), data[sll2Len:]
		if data[11] == 6 {
			src = data[12:18]
		}
	case layers.LinkTypeRaw, 12, 14, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		if len(data) == 0 {
			return nil, fmt.Errorf("%w: an empty raw IP record", ErrLinkHeader)
		}
		switch data[0] >> 4 {
		case 4:
			proto = uint16(layers.EthernetTypeIPv4)
		case 6:
			proto = uint16(layers.EthernetTypeIPv6)
		default:
			return nil, fmt.Errorf("%w: raw IP of version %d", ErrLinkHeader, data[0]>>4)
		}
		payload = data
	default:
		return nil, CheckLinkType(lt)
	}
	n := ethLen + len(payload)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	clear(buf[:12])
	copy(buf[6:12], src)
	binary.BigEndian.PutUint16(buf[12:14], proto)
	copy(buf[ethLen:], payload)
	return buf, nil
}
