package wirelayers

import (
	"errors"
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Layer type numbers, in gopacket's application range (≥ 2000), chosen
// after the UDP ports.
const (
	TransportLayerNum = 2140
	BTHLayerNum       = 2791
)

// Layer types, registered when the package is loaded.
var (
	LayerTypeTransport = gopacket.RegisterLayerType(TransportLayerNum, gopacket.LayerTypeMetadata{
		Name:    "Peregrine",
		Decoder: gopacket.DecodeFunc(decodeTransport),
	})
	LayerTypeBTH = gopacket.RegisterLayerType(BTHLayerNum, gopacket.LayerTypeMetadata{
		Name:    "RoCEv2BTH",
		Decoder: gopacket.DecodeFunc(decodeBTH),
	})
)

func init() {
	layers.RegisterUDPPortLayerType(wire.DefaultPort, LayerTypeTransport)
	layers.RegisterUDPPortLayerType(wire.RoCEv2Port, LayerTypeBTH)
}

// RegisterPort makes gopacket decode UDP datagrams to (or, failing a match
// on the destination, from) port as the transport. gopacket's port table is
// not synchronised: call it before any decoding starts.
func RegisterPort(port uint16) {
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerTypeTransport)
}

// Transport is the transport header as a gopacket layer. Its contents are
// the header with body and extensions; its payload is the PayloadLen bytes
// after them.
type Transport struct {
	layers.BaseLayer
	wire.Header
}

var (
	_ gopacket.DecodingLayer     = (*Transport)(nil)
	_ gopacket.SerializableLayer = (*Transport)(nil)
)

func (t *Transport) LayerType() gopacket.LayerType  { return LayerTypeTransport }
func (t *Transport) CanDecode() gopacket.LayerClass { return LayerTypeTransport }

// NextLayerType is the raw payload: what it holds belongs to the ULP.
func (t *Transport) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes data, the whole UDP payload.
func (t *Transport) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	n, err := t.Header.Decode(data)
	if err != nil {
		t.Header = wire.Header{}
		if errors.Is(err, wire.ErrShort) || errors.Is(err, wire.ErrLength) {
			df.SetTruncated()
		}
		return fmt.Errorf("peregrine header: %w", err)
	}
	t.BaseLayer = layers.BaseLayer{Contents: data[:n], Payload: data[n:]}
	return nil
}

// SerializeTo prepends the header to what b holds (the payload). With
// opts.FixLengths it sets PayloadLen from the payload.
func (t *Transport) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h := t.Header
	if opts.FixLengths {
		if len(b.Bytes()) > 0xffff {
			return fmt.Errorf("%w: payload of %d bytes exceeds 65535", wire.ErrField, len(b.Bytes()))
		}
		h.PayloadLen = uint16(len(b.Bytes()))
	}
	out, err := b.PrependBytes(h.Len())
	if err != nil {
		return err
	}
	_, err = h.Encode(out)
	return err
}

// String renders the header on one line.
func (t *Transport) String() string { return t.Header.String() }

func decodeTransport(data []byte, p gopacket.PacketBuilder) error {
	t := &Transport{}
	if err := t.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(t)
	return p.NextDecoder(t.NextLayerType())
}

// BTH is the RoCEv2 Base Transport Header as a gopacket layer. Its payload
// is what lies between the BTH and the ICRC (extended transport headers and
// data, not parsed further). The ICRC is kept but not verified here, as it
// covers the IP and UDP headers; wire.DecodeRoCEFrame verifies it.
type BTH struct {
	layers.BaseLayer
	wire.BTH
	ICRC uint32
}

var _ gopacket.DecodingLayer = (*BTH)(nil)

func (b *BTH) LayerType() gopacket.LayerType     { return LayerTypeBTH }
func (b *BTH) CanDecode() gopacket.LayerClass    { return LayerTypeBTH }
func (b *BTH) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes data, the whole UDP payload: BTH, payload, ICRC.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.BTHLen+wire.ICRCLen {
		*b = BTH{}
		df.SetTruncated()
		return fmt.Errorf("roce bth: %w", wire.ErrShort)
	}
	h, n, err := wire.DecodeBTH(data)
	if err != nil {
		*b = BTH{}
		return fmt.Errorf("roce bth: %w", err)
	}
	end := len(data) - wire.ICRCLen
	icrc := data[end:]
	*b = BTH{
		BaseLayer: layers.BaseLayer{Contents: data[:n], Payload: data[n:end]},
		BTH:       h,
		ICRC:      uint32(icrc[0]) | uint32(icrc[1])<<8 | uint32(icrc[2])<<16 | uint32(icrc[3])<<24,
	}
	return nil
}

// String renders the BTH on one line.
func (b *BTH) String() string { return b.BTH.String() + fmt.Sprintf(" icrc=%#08x", b.ICRC) }

func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	return p.NextDecoder(b.NextLayerType())
}
