package rt

import "github.com/peregrine-net/peregrine/core/wire"

// onEstablishedData is onPacket for the packet that carries nearly all
// traffic: a connection in StateEstablished receiving a reliable type
// other than ConnClose (wire.DecodeFastIPv4 lets through only reliable
// types without a body; ConnClose changes the connection's state and
// takes onPacket). It does what onPacket does for it, without the
// dispatch on state and type.
func (e *Endpoint) onEstablishedData(c *conn, hd *wire.Header, payload []byte) {
	c.peerTx = hd.TxTime
	e.onData(c, hd, payload)
	e.afterPacket(c)
}
