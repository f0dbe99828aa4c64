package rt

import "github.com/peregrine-net/peregrine/core/wire"

// IOIEntropyPorts is the first UDP source port of the range IOI's sprayed
// packets use as per-packet ECMP entropy (core/ioi): 49152..65535.
const IOIEntropyPorts = 0xc000

// sprayedFrom reports whether f may come from a source port other than its
// connection's peer's: a data packet whose source port lies in
// IOIEntropyPorts is a sprayed packet (SendHeader.SrcPort) or, flagged in
// order, one on an ordered path the peer moved (paths.go), and an ACK or
// NACK from one is on the path the peer moved its ACKs to; its port only
// picks its path over the fabric. Its source IP must still be the peer's,
// and its CID the connection's.
func sprayedFrom(f *wire.Frame) bool {
	h := &f.Header
	return f.SrcPort >= IOIEntropyPorts &&
		(h.Type == wire.TypeAck || h.Type == wire.TypeExtendedAck || h.Type == wire.TypeNack ||
			h.Type == wire.TypePushUnsolicitedData || h.Type == wire.TypePushSolicitedData || h.Type == wire.TypePullData)
}
