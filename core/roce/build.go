package roce

import (
	"github.com/peregrine-net/peregrine/core/wire"
)

// FrameSpec describes a RoCEv2 frame for generators, tests and benchmarks:
// addresses, BTH, the extended headers the opcode carries and a payload.
// Encode fills in the pad count and the ICRC.
type FrameSpec struct {
	Addrs   wire.Addrs
	BTH     wire.BTH
	RETH    wire.RETH // written when the opcode carries one
	AETH    wire.AETH // written when the opcode carries one
	Payload []byte
}

// Encode builds the frame into b and returns its length. Extended headers
// the opcode carries and the spec does not describe (DETH, ImmDt …) are
// zero. It allocates a scratch buffer: it is for building, not for the
// packet path.
func (f *FrameSpec) Encode(b []byte) (int, error) {
	ext, n, ok := wire.BTHExtHeaders(f.BTH.Opcode)
	if !ok {
		n = 0
	}
	pad := (4 - len(f.Payload)%4) % 4
	body := make([]byte, n+len(f.Payload)+pad)
	if ext&wire.IBExtRDMA != 0 {
		f.RETH.Put(body[wire.IBExtOffset(ext, wire.IBExtRDMA):])
	}
	if ext&wire.IBExtAck != 0 {
		f.AETH.Put(body[wire.IBExtOffset(ext, wire.IBExtAck):])
	}
	copy(body[n:], f.Payload)
	h := f.BTH
	h.PadCount = uint8(pad)
	a := f.Addrs
	if a.DstPort == 0 {
		a.DstPort = wire.RoCEv2Port
	}
	return wire.EncodeRoCEFrame(b, &a, &h, body)
}
