package fabric

import (
	"encoding/binary"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TransportClassifier returns an Options.Classify for peregrine transport
// traffic on UDP port udpPort (0: wire.DefaultPort): a transport packet
// flagged IOIInOrder keeps its flow's path (IOI's in-order head and tail,
// SEEDS §S1) and every other transport packet may be sprayed. Frames that
// are not transport packets stay in order, the safe default for traffic
// the fabric does not understand. The flow hash is FlowHash's 5-tuple hash.
func TransportClassifier(udpPort uint16) func(frame []byte) (flowHash uint32, inOrder bool) {
	if udpPort == 0 {
		udpPort = wire.DefaultPort
	}
	return func(frame []byte) (uint32, bool) {
		hash := FlowHash(frame)
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
