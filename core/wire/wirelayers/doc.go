// Package wirelayers teaches gopacket (github.com/gopacket/gopacket) to
// decode peregrine's transport header and the RoCEv2 Base Transport
// Header, so tests, `peregrine decode` and any gopacket tool can read our
// captures:
//
//	import _ "github.com/peregrine-net/peregrine/core/wire/wirelayers"
//	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
//	if t, ok := pkt.Layer(wirelayers.LayerTypeTransport).(*wirelayers.Transport); ok { ... }
//
// It is a separate package so that the packet path (package wire) neither
// links gopacket nor registers anything. Importing this package registers,
// once, in gopacket's process-wide tables: the layer types
// LayerTypeTransport (number 2140) and LayerTypeBTH (2791), outside the
// 0–1999 range gopacket reserves; and UDP port wire.DefaultPort (5140) →
// transport and wire.RoCEv2Port (4791) → BTH. That is this package's only
// side effect, the decoder-registration exception to the no-init rule.
// RegisterPort adds a port for a deployment that moved the transport.
//
// Layers hold views into the packet data gopacket was given (as gopacket's
// own layers do); the data must not be reused while the layers are in use.
package wirelayers
