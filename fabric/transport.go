package fabric

import (
	"encoding/binary"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TransportClassifier returns an Options.Classify for peregrine transport
// traffic on UDP port udpPort (0: wire.DefaultPort): a transport packet
// flagged IOIInOrder keeps its flow's path (IOI's in-order head and tail,
// docs/ioi.md) and every other transport packet may be sprayed. Frames that
// are not transport packets stay in order, the safe default for traffic
// the fabric does not understand. The flow hash is FlowHash's 5-tuple hash.
func TransportClassifier(udpPort uint16) func(frame []byte) (flowHash uint32, inOrder bool) {
	return TransportClassifierDSCP(udpPort, 0)
}

// TransportClassifierDSCP is TransportClassifier that also keeps in order
// every frame whose IP DSCP is inOrderDSCP (1..63; 0: the flag alone), the
// way a switch that cannot parse the transport header tells IOI's ordered
// packets apart (the sender marks them with txn's IOI DSCP option).
func TransportClassifierDSCP(udpPort uint16, inOrderDSCP uint8) func(frame []byte) (flowHash uint32, inOrder bool) {
	if udpPort == 0 {
		udpPort = wire.DefaultPort
	}
	return func(frame []byte) (uint32, bool) {
		hash := FlowHash(frame)
		if inOrderDSCP != 0 && frameDSCP(frame) == inOrderDSCP {
			return hash, true
		}
		off, ok := wire.L4Offset(frame)
		if !ok || binary.BigEndian.Uint16(frame[off+2:]) != udpPort {
			return hash, true
		}
		v, err := wire.ViewHeader(frame[off+wire.UDPHeaderLen:])
		if err != nil {
			return hash, true
		}
		return hash, v.Flags().Has(wire.FlagIOIInOrder)
	}
}

// frameDSCP returns an untagged IPv4 or IPv6 frame's DSCP (0 otherwise).
func frameDSCP(frame []byte) uint8 {
	if len(frame) < ethHeaderLen+2 {
		return 0
	}
	switch binary.BigEndian.Uint16(frame[12:]) {
	case etherTypeIPv4:
		return frame[ethHeaderLen+1] >> 2
	case etherTypeIPv6:
		return (frame[ethHeaderLen]&0x0f)<<2 | frame[ethHeaderLen+1]>>6
	}
	return 0
}
