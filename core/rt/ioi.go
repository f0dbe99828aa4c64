package rt

import "github.com/peregrine-net/peregrine/core/wire"

// IOIEntropyPorts is the first UDP source port of the range IOI's sprayed
// packets use as per-packet ECMP entropy (core/ioi): 49152..65535.
const IOIEntropyPorts = 0xc000

// sprayedFrom reports whether f may come from a source port other than its
// connection's peer's: a data packet not flagged in order whose source
// port lies in IOIEntropyPorts is a sprayed packet (SendHeader.SrcPort),
// whose port only spreads it over the fabric's paths. Its source IP must
// still be the peer's, and its CID the connection's.
func sprayedFrom(f *wire.Frame) bool {
	h := &f.Header
	return f.SrcPort >= IOIEntropyPorts && !h.Flags.Has(wire.FlagIOIInOrder) &&
		(h.Type == wire.TypePushUnsolicitedData || h.Type == wire.TypePushSolicitedData || h.Type == wire.TypePullData)
}
