package wire_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestTypeWindow(t *testing.T) {
	want := map[wire.Type]wire.Window{
		wire.TypeConnOpen:            wire.WindowNone,
		wire.TypeConnAccept:          wire.WindowNone,
		wire.TypeConnClose:           wire.WindowRequest,
		wire.TypePullRequest:         wire.WindowRequest,
		wire.TypePullData:            wire.WindowData,
		wire.TypePushRequest:         wire.WindowRequest,
		wire.TypePushGrant:           wire.WindowData,
		wire.TypePushSolicitedData:   wire.WindowData,
		wire.TypePushUnsolicitedData: wire.WindowRequest,
		wire.TypeSend:                wire.WindowRequest,
		wire.TypeResync:              wire.WindowRequest,
		wire.TypeAck:                 wire.WindowNone,
		wire.TypeExtendedAck:         wire.WindowNone,
		wire.TypeNack:                wire.WindowNone,
		wire.TypeInvalid:             wire.WindowNone,
		wire.Type(200):               wire.WindowNone,
	}
	for typ, w := range want {
		require.Equal(t, w, typ.Window(), "%v", typ)
	}
	for _, typ := range allTypes {
		require.True(t, typ.Valid(), "%v", typ)
		require.NotContains(t, typ.String(), "Type(")
	}
	require.False(t, wire.TypeInvalid.Valid())
	require.False(t, wire.Type(15).Valid())

	// A resync counts in the window of the packet it replaces.
	h := wire.Header{Type: wire.TypeResync, Resync: wire.ResyncBody{Code: wire.ResyncTimeout, OrigType: wire.TypePullData}}
	require.Equal(t, wire.WindowData, h.Window())
	h.Resync.OrigType = wire.TypePushRequest
	require.Equal(t, wire.WindowRequest, h.Window())
}

func TestHeaderRoundTripEveryType(t *testing.T) {
	r := newRand(1)
	for _, typ := range allTypes {
		for mask := wire.ExtMask(0); mask < 16; mask++ {
			h := randHeader(r, typ, 0)
			h.Ext = randExt(r, false)
			h.Ext.Present = mask
			if typ == wire.TypeConnOpen || typ == wire.TypeConnAccept {
				h.Ext.Present |= wire.ExtSourceCID
			}
			h.Ext = fillExt(h.Ext)
			h.Flags &^= wire.FlagHasExtension
			if h.Ext.Present != 0 {
				h.Flags |= wire.FlagHasExtension
			}
			payload := randBytes(r, r.IntN(64))
			h.PayloadLen = uint16(len(payload))
			b, err := encodePacket(&h, payload)
			require.NoError(t, err, "%v", h.String())
			got, n, err := wire.DecodeHeader(b)
			require.NoError(t, err, "%v", h.String())
			require.Equal(t, h, got)
			require.Equal(t, h.Len(), n)
			require.Equal(t, payload, b[n:])
		}
	}
}

// fillExt gives every present extension a valid value.
func fillExt(e wire.Ext) wire.Ext {
	if e.Present&wire.ExtPlacement != 0 && !e.Placement.Mode.Valid() {
		e.Placement = wire.Placement{Mode: wire.PlacementFreeRunning, Index: 0xfffffff0}
	}
	if e.Present&wire.ExtPlacement == 0 {
		e.Placement = wire.Placement{}
	}
	if e.Present&wire.ExtQPN == 0 {
		e.DstQPN, e.SrcQPN = 0, 0
	}
	if e.Present&wire.ExtSourceCID == 0 {
		e.SourceCID = 0
	}
	if e.Present&wire.ExtRegion == 0 {
		e.Region = wire.RegionRef{}
	}
	return e
}

func TestHeaderRoundTripRandom(t *testing.T) {
	r := newRand(42)
	for i := range 20000 {
		typ := allTypes[r.IntN(len(allTypes))]
		payload := randBytes(r, r.IntN(300))
		h := randHeader(r, typ, len(payload))
		b, err := encodePacket(&h, payload)
		require.NoError(t, err, "iteration %d: %v", i, h.String())
		got, n, err := wire.DecodeHeader(b)
		require.NoError(t, err, "iteration %d: %v", i, h.String())
		require.Equal(t, h, got, "iteration %d", i)
		require.Equal(t, payload, b[n:])

		// Decoding into an existing header gives the same value.
		var into wire.Header
		into.Ext.Present = wire.ExtQPN // stale state must be cleared
		n2, err := into.Decode(b)
		require.NoError(t, err)
		require.Equal(t, n, n2)
		require.Equal(t, h, into)
	}
}

// TestGoldenLayout pins the byte layout: if it fails, the wire format
// changed and doc.go, the gopacket layer and every peer must change too.
func TestGoldenLayout(t *testing.T) {
	t.Run("push-unsolicited-with-extensions", func(t *testing.T) {
		h := wire.Header{
			Version:    wire.Version,
			DestCID:    0x0a0b0c,
			Type:       wire.TypePushUnsolicitedData,
			Flags:      wire.FlagAckRequested | wire.FlagOrdered | wire.FlagLastOfMessage | wire.FlagHasExtension,
			Retry:      3,
			Phase:      wire.PhaseTail,
			PSN:        0x01020304,
			RSN:        0x11121314,
			SSN:        0x21222324,
			ReqEBSN:    0x31323334,
			DataEBSN:   0x41424344,
			TxTime:     0x51525354,
			TxEcho:     0x61626364,
			ReqLen:     0x00010000,
			Offset:     0x00002000,
			PayloadLen: 4,
			Ext: wire.Ext{
				Present:   wire.ExtPlacement | wire.ExtQPN,
				Placement: wire.Placement{Mode: wire.PlacementRelative, Index: 7},
				DstQPN:    0xabcdef,
				SrcQPN:    0x123456,
			},
		}
		golden := []byte{
			0x10, 0x0a, 0x0b, 0x0c, // version 1, reserved 0, destination CID
			0x09, 0x55, 0x3c, 0x04, // type 9, flags 0x01|0x04|0x10|0x40, retry 3 | phase 3, 4 ext words
			0x01, 0x02, 0x03, 0x04, // PSN
			0x11, 0x12, 0x13, 0x14, // RSN
			0x21, 0x22, 0x23, 0x24, // SSN
			0x31, 0x32, 0x33, 0x34, // request-window eBSN
			0x41, 0x42, 0x43, 0x44, // data-window eBSN
			0x51, 0x52, 0x53, 0x54, // TxTime
			0x61, 0x62, 0x63, 0x64, // TxEcho
			0x00, 0x01, 0x00, 0x00, // request length
			0x00, 0x00, 0x20, 0x00, // segment offset
			0x00, 0x04, 0x00, 0x00, // payload length, reserved
			0x01, 0x02, 0x02, 0x00, // placement TLV: type 1, 2 words, relative
			0x00, 0x00, 0x00, 0x07, // delivery index
			0x02, 0x02, 0xab, 0xcd, // QPN TLV: type 2, 2 words, destination QPN...
			0xef, 0x12, 0x34, 0x56, // ...and source QPN
			'd', 'a', 't', 'a',
		}
		checkGolden(t, &h, golden)
	})
	t.Run("extended-ack", func(t *testing.T) {
		h := wire.Header{
			Version:  wire.Version,
			DestCID:  0x000001,
			Type:     wire.TypeExtendedAck,
			ReqEBSN:  1000,
			DataEBSN: 2000,
			TxTime:   0xaabbccdd,
			TxEcho:   0x01020304,
			HopEcho:  3,
			Ack: wire.AckBody{
				OOW:        wire.OOWData,
				RxBufLevel: 0x80,
				OOWCount:   0x0102,
				RxTime:     0x01020300,
			},
		}
		h.Ack.ReqBitmap.Set(0)
		h.Ack.ReqBitmap.Set(127)
		h.Ack.DataBitmap.Set(9)
		golden := []byte{
			0x10, 0x00, 0x00, 0x01,
			0x0c, 0x00, 0x00, 0x00, // type 12, no flags, no extensions
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // PSN, RSN, SSN
			0x00, 0x00, 0x03, 0xe8, // request-window BSN 1000
			0x00, 0x00, 0x07, 0xd0, // data-window BSN 2000
			0xaa, 0xbb, 0xcc, 0xdd, // TxTime
			0x01, 0x02, 0x03, 0x04, // TxEcho
			0, 0, 0, 0, 0, 0, 0, 0, // request length, offset
			0x00, 0x00, 0x03, 0x00, // payload length, 3 hops, reserved
			0x02, 0x80, 0x01, 0x02, // OOW data, buffer level, OOW count
			0x01, 0x02, 0x03, 0x00, // RxTime
			0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // request bitmap: bits 0 and 127
			0x00, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // data bitmap: bit 9
		}
		checkGolden(t, &h, golden)
	})
	t.Run("nack", func(t *testing.T) {
		h := wire.Header{
			Version: wire.Version, DestCID: 0xfffffe, Type: wire.TypeNack,
			Nack: wire.NackBody{Code: wire.NackReceiverNotReady, Window: wire.WindowData, ULPCode: 9, PSN: 77, RNRTimeoutMicros: 250},
		}
		golden := make([]byte, 60)
		copy(golden, []byte{0x10, 0xff, 0xff, 0xfe, 0x0d})
		copy(golden[48:], []byte{0x02, 0x02, 0x09, 0x00, 0, 0, 0, 77, 0, 0, 0, 250})
		checkGolden(t, &h, golden)
	})
	t.Run("conn-open", func(t *testing.T) {
		h := wire.Header{
			Version: wire.Version, Type: wire.TypeConnOpen, Flags: wire.FlagHasExtension,
			Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: 0x123456},
		}
		golden := make([]byte, 56)
		copy(golden, []byte{0x10, 0, 0, 0, 0x01, 0x40, 0x00, 0x02})
		copy(golden[48:], []byte{0x03, 0x02, 0, 0, 0x00, 0x12, 0x34, 0x56})
		checkGolden(t, &h, golden)
	})
	t.Run("resync", func(t *testing.T) {
		h := wire.Header{
			Version: wire.Version, DestCID: 5, Type: wire.TypeResync, PSN: 9,
			Resync: wire.ResyncBody{Code: wire.ResyncAborted, OrigType: wire.TypePushGrant},
		}
		golden := make([]byte, 52)
		copy(golden, []byte{0x10, 0, 0, 5, 0x0a, 0, 0, 0, 0, 0, 0, 9})
		copy(golden[48:], []byte{0x03, 0x07, 0, 0})
		checkGolden(t, &h, golden)
	})
}

func checkGolden(t *testing.T, h *wire.Header, golden []byte) {
	t.Helper()
	buf := make([]byte, len(golden))
	n, err := h.Encode(buf)
	require.NoError(t, err)
	copy(buf[n:], golden[n:]) // the payload
	require.Equal(t, golden, buf, "encoding differs from the golden bytes")
	got, n2, err := wire.DecodeHeader(golden)
	require.NoError(t, err)
	require.Equal(t, n, n2)
	require.Equal(t, *h, got)
}

func TestDecodeTruncatedEveryLength(t *testing.T) {
	r := newRand(7)
	for _, typ := range allTypes {
		payload := randBytes(r, 17)
		h := randHeader(r, typ, len(payload))
		h.Ext = fillExt(wire.Ext{Present: wire.ExtPlacement | wire.ExtQPN | wire.ExtSourceCID | wire.ExtRegion})
		h.Flags |= wire.FlagHasExtension
		b, err := encodePacket(&h, payload)
		require.NoError(t, err)
		for i := range len(b) {
			_, _, err := wire.DecodeHeader(b[:i])
			require.Error(t, err, "%v truncated to %d of %d bytes", typ, i, len(b))
		}
		// One byte too many is a length mismatch too.
		_, _, err = wire.DecodeHeader(append(b, 0))
		require.ErrorIs(t, err, wire.ErrLength)
		_, _, err = wire.DecodeHeader(b)
		require.NoError(t, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	base := func() []byte {
		h := sampleHeader()
		b, err := encodePacket(&h, nil)
		require.NoError(t, err)
		return b
	}
	withExt := func(chain ...byte) []byte {
		b := base()
		b[5] |= byte(wire.FlagHasExtension)
		b[7] = byte(len(chain) / 4)
		return append(b, chain...)
	}
	tests := []struct {
		name   string
		packet func() []byte
		want   error
	}{
		{"empty", func() []byte { return nil }, wire.ErrShort},
		{"version 0", func() []byte { b := base(); b[0] &= 0x0f; return b }, wire.ErrVersion},
		{"version 2", func() []byte { b := base(); b[0] = 0x20 | b[0]&0x0f; return b }, wire.ErrVersion},
		{"version 15", func() []byte { b := base(); b[0] |= 0xf0; return b }, wire.ErrVersion},
		{"type 0", func() []byte { b := base(); b[4] = 0; return b }, wire.ErrType},
		{"type 15", func() []byte { b := base(); b[4] = 15; return b }, wire.ErrType},
		{"type 255", func() []byte { b := base(); b[4] = 255; return b }, wire.ErrType},
		{"payload longer than claimed", func() []byte { return append(base(), 1, 2, 3) }, wire.ErrLength},
		{"payload shorter than claimed", func() []byte { b := base(); b[45] = 9; return b }, wire.ErrLength},
		{"ext flag without words", func() []byte { b := base(); b[5] |= byte(wire.FlagHasExtension); return b }, wire.ErrExtension},
		{"ext words without flag", func() []byte {
			b := withExt(1, 2, 1, 0, 0, 0, 0, 0)
			b[5] &^= byte(wire.FlagHasExtension)
			return b
		}, wire.ErrExtension},
		{"ext words past the buffer", func() []byte { b := withExt(9, 1, 0, 0); b[7] = 2; return b }, wire.ErrShort},
		{"tlv length 0", func() []byte { return withExt(9, 0, 0, 0) }, wire.ErrExtension},
		{"tlv past the chain", func() []byte { return withExt(9, 2, 0, 0) }, wire.ErrExtension},
		{"placement too short", func() []byte { return withExt(1, 1, 1, 0) }, wire.ErrExtension},
		{"placement bad mode", func() []byte { return withExt(1, 2, 0, 0, 0, 0, 0, 0) }, wire.ErrExtension},
		{"placement mode 4", func() []byte { return withExt(1, 2, 4, 0, 0, 0, 0, 0) }, wire.ErrExtension},
		{"qpn too short", func() []byte { return withExt(2, 1, 0, 0) }, wire.ErrExtension},
		{"source cid too short", func() []byte { return withExt(3, 1, 0, 0) }, wire.ErrExtension},
		{"duplicate placement", func() []byte {
			return withExt(1, 2, 1, 0, 0, 0, 0, 1, 1, 2, 1, 0, 0, 0, 0, 2)
		}, wire.ErrExtension},
		{"conn open without source cid", func() []byte { b := base(); b[4] = byte(wire.TypeConnOpen); return b }, wire.ErrExtension},
		{"conn accept with only a placement", func() []byte {
			b := withExt(1, 2, 1, 0, 0, 0, 0, 1)
			b[4] = byte(wire.TypeConnAccept)
			return b
		}, wire.ErrExtension},
		{"nack code 0", func() []byte { return nackPacket(0, 1) }, wire.ErrBody},
		{"nack code 8", func() []byte { return nackPacket(8, 1) }, wire.ErrBody},
		{"nack window 0", func() []byte { return nackPacket(1, 0) }, wire.ErrBody},
		{"nack window 3", func() []byte { return nackPacket(1, 3) }, wire.ErrBody},
		{"resync code 0", func() []byte { return resyncPacket(0, byte(wire.TypePullData)) }, wire.ErrBody},
		{"resync for an ack", func() []byte { return resyncPacket(1, byte(wire.TypeAck)) }, wire.ErrBody},
		{"resync for a resync", func() []byte { return resyncPacket(1, byte(wire.TypeResync)) }, wire.ErrBody},
		{"resync for conn open", func() []byte { return resyncPacket(1, byte(wire.TypeConnOpen)) }, wire.ErrBody},
		{"resync for type 99", func() []byte { return resyncPacket(1, 99) }, wire.ErrBody},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, n, err := wire.DecodeHeader(tc.packet())
			require.ErrorIs(t, err, tc.want)
			require.Zero(t, n)
			require.Equal(t, wire.Header{}, h)
		})
	}
}

func nackPacket(code, window byte) []byte {
	h := wire.Header{Version: 1, Type: wire.TypeNack, Nack: wire.NackBody{Code: wire.NackBadCID, Window: wire.WindowRequest}}
	b, _ := encodePacket(&h, nil)
	b[48], b[49] = code, window
	return b
}

func resyncPacket(code, orig byte) []byte {
	h := wire.Header{Version: 1, Type: wire.TypeResync, Resync: wire.ResyncBody{Code: wire.ResyncTimeout, OrigType: wire.TypePullData}}
	b, _ := encodePacket(&h, nil)
	b[48], b[49] = code, orig
	return b
}

func TestDecodeIgnoresReservedAndSkipsUnknown(t *testing.T) {
	h := sampleHeader()
	h.Type = wire.TypeAck
	h.Ack = wire.AckBody{OOW: wire.OOWRequest, OOWCount: 3}
	h.Ext = wire.Ext{Present: wire.ExtSourceCID, SourceCID: 0x42}
	h.Flags |= wire.FlagHasExtension
	clean, err := encodePacket(&h, nil)
	require.NoError(t, err)

	// Reserved bits set everywhere, and an unknown 12-byte TLV in front of
	// the source CID: the decoded header is the same.
	b := append([]byte(nil), clean[:48+8]...)
	b[0] |= 0x0f                                              // reserved nibble of word 0
	b[5] |= 0x80                                              // reserved flag bit 7
	b[6] |= 0x03                                              // reserved bits under retry/phase
	b[47] = 0xff                                              // reserved byte after HopEcho
	b[48] |= 0xfc                                             // reserved OOW bits
	b[7] += 3                                                 // three more extension words
	b = append(b, 200, 3, 0xde, 0xad, 1, 2, 3, 4, 5, 6, 7, 8) // unknown TLV
	b = append(b, clean[48+8:]...)
	got, n, err := wire.DecodeHeader(b)
	require.NoError(t, err)
	require.Equal(t, h, got)
	require.Equal(t, len(b), n)

	// The source-CID TLV's reserved bytes are ignored too.
	b[len(b)-4] = 0xff
	b[len(b)-6] = 0xff
	got, _, err = wire.DecodeHeader(b)
	require.NoError(t, err)
	require.Equal(t, uint32(0x42), got.Ext.SourceCID)

	// Re-encoding gives the clean form back.
	re, err := encodePacket(&got, nil)
	require.NoError(t, err)
	require.Equal(t, clean, re)
}

// A chain of extensions this version does not know reads as no extensions
// at all, HasExtension included.
func TestDecodeOnlyUnknownExtensions(t *testing.T) {
	h := sampleHeader()
	b, err := encodePacket(&h, nil)
	require.NoError(t, err)
	b[5] |= byte(wire.FlagHasExtension)
	b[7] = 2
	b = append(b, 99, 2, 1, 2, 3, 4, 5, 6)
	got, n, err := wire.DecodeHeader(b)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
	require.Equal(t, h, got)
	require.False(t, got.Flags.Has(wire.FlagHasExtension))
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(h *wire.Header)
		want   error
	}{
		{"version 0", func(h *wire.Header) { h.Version = 0 }, wire.ErrVersion},
		{"version 2", func(h *wire.Header) { h.Version = 2 }, wire.ErrVersion},
		{"cid 25 bits", func(h *wire.Header) { h.DestCID = 1 << 24 }, wire.ErrField},
		{"type 0", func(h *wire.Header) { h.Type = 0 }, wire.ErrType},
		{"type 15", func(h *wire.Header) { h.Type = 15 }, wire.ErrType},
		{"flag bit 7", func(h *wire.Header) { h.Flags = 0x80 }, wire.ErrField},
		{"retry 16", func(h *wire.Header) { h.Retry = 16 }, wire.ErrField},
		{"phase 4", func(h *wire.Header) { h.Phase = 4 }, wire.ErrField},
		{"ack oow bit 2", func(h *wire.Header) { h.Type = wire.TypeAck; h.Ack.OOW = 4 }, wire.ErrField},
		{"nack code 0", func(h *wire.Header) { h.Type = wire.TypeNack; h.Nack.Window = wire.WindowData }, wire.ErrBody},
		{"nack window none", func(h *wire.Header) { h.Type = wire.TypeNack; h.Nack.Code = wire.NackBadCID }, wire.ErrBody},
		{"resync code 0", func(h *wire.Header) { h.Type = wire.TypeResync; h.Resync.OrigType = wire.TypePullData }, wire.ErrBody},
		{"resync of an ack", func(h *wire.Header) {
			h.Type = wire.TypeResync
			h.Resync = wire.ResyncBody{Code: wire.ResyncTimeout, OrigType: wire.TypeAck}
		}, wire.ErrBody},
		{"conn open without source cid", func(h *wire.Header) { h.Type = wire.TypeConnOpen }, wire.ErrExtension},
		{"undefined ext bit", func(h *wire.Header) { h.Ext.Present = 0x40 }, wire.ErrField},
		{"seal 49 bits", func(h *wire.Header) { h.Ext.Present = wire.ExtSeal; h.Ext.Seal = 1 << 48 }, wire.ErrField},
		{"placement mode 0", func(h *wire.Header) { h.Ext.Present = wire.ExtPlacement }, wire.ErrExtension},
		{"qpn 25 bits", func(h *wire.Header) { h.Ext.Present = wire.ExtQPN; h.Ext.SrcQPN = 1 << 24 }, wire.ErrField},
		{"source cid 25 bits", func(h *wire.Header) { h.Ext.Present = wire.ExtSourceCID; h.Ext.SourceCID = 1 << 24 }, wire.ErrField},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := sampleHeader()
			tc.modify(&h)
			_, err := h.Encode(make([]byte, wire.MaxHeaderLen))
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, h.Validate(), tc.want)
		})
	}

	h := sampleHeader()
	h.Ext = wire.Ext{Present: wire.ExtQPN, DstQPN: 1}
	for size := range h.Len() {
		_, err := h.Encode(make([]byte, size))
		require.ErrorIs(t, err, wire.ErrShort, "buffer of %d", size)
	}
}

// Encode derives HasExtension from the extensions, whatever the caller set.
func TestEncodeDerivesHasExtension(t *testing.T) {
	h := sampleHeader()
	h.Flags |= wire.FlagHasExtension
	b, err := encodePacket(&h, nil)
	require.NoError(t, err)
	got, _, err := wire.DecodeHeader(b)
	require.NoError(t, err)
	require.False(t, got.Flags.Has(wire.FlagHasExtension))

	h = sampleHeader()
	h.Ext = wire.Ext{Present: wire.ExtPlacement, Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 3}}
	b, err = encodePacket(&h, nil)
	require.NoError(t, err)
	got, _, err = wire.DecodeHeader(b)
	require.NoError(t, err)
	require.True(t, got.Flags.Has(wire.FlagHasExtension))
}

// Bodies a type does not carry are ignored by Encode and zero after Decode.
func TestEncodeIgnoresForeignBodies(t *testing.T) {
	h := sampleHeader()
	h.Nack = wire.NackBody{Code: wire.NackBadCID, Window: wire.WindowData, PSN: 5}
	h.Ack.ReqBitmap.Set(3)
	require.Equal(t, wire.BaseHeaderLen, h.Len())
	b, err := encodePacket(&h, nil)
	require.NoError(t, err)
	got, _, err := wire.DecodeHeader(b)
	require.NoError(t, err)
	require.Zero(t, got.Nack)
	require.Zero(t, got.Ack)

	h = sampleHeader()
	h.Type = wire.TypeAck
	h.Ack.ReqBitmap.Set(3) // only ExtendedAck carries bitmaps
	b, err = encodePacket(&h, nil)
	require.NoError(t, err)
	got, _, err = wire.DecodeHeader(b)
	require.NoError(t, err)
	require.Zero(t, got.Ack.ReqBitmap)
}

func TestBitmap128(t *testing.T) {
	var m wire.Bitmap128
	require.Zero(t, m.Count())
	for _, n := range []uint32{0, 1, 63, 64, 65, 127} {
		require.False(t, m.Has(n))
		m.Set(n)
		require.True(t, m.Has(n), "bit %d", n)
	}
	require.Equal(t, 6, m.Count())
	require.Equal(t, wire.Bitmap128{1<<63 | 1<<62 | 1, 1<<63 | 1<<62 | 1}, m)
	m.Set(128) // out of range: ignored
	require.False(t, m.Has(128))
	require.False(t, m.Has(1<<31))
	m.Clear(64)
	require.False(t, m.Has(64))
	require.Equal(t, 5, m.Count())
	m.Clear(500)
	require.Equal(t, 5, m.Count())
}

func TestHeaderView(t *testing.T) {
	h := sampleHeader()
	h.Retry = 2
	h.Phase = wire.PhaseMiddle
	h.Ext = wire.Ext{Present: wire.ExtSourceCID, SourceCID: 9}
	payload := []byte("payload!")
	h.PayloadLen = uint16(len(payload))
	b, err := encodePacket(&h, payload)
	require.NoError(t, err)
	h.Flags |= wire.FlagHasExtension

	v, err := wire.ViewHeader(b)
	require.NoError(t, err)
	require.Equal(t, h.DestCID, v.DestCID())
	require.Equal(t, h.Type, v.Type())
	require.Equal(t, h.Flags, v.Flags())
	require.Equal(t, h.Retry, v.Retry())
	require.Equal(t, h.Phase, v.Phase())
	require.Equal(t, h.PSN, v.PSN())
	require.Equal(t, h.RSN, v.RSN())
	require.Equal(t, h.SSN, v.SSN())
	require.Equal(t, h.ReqEBSN, v.ReqEBSN())
	require.Equal(t, h.DataEBSN, v.DataEBSN())
	require.Equal(t, h.TxTime, v.TxTime())
	require.Equal(t, h.TxEcho, v.TxEcho())
	require.Equal(t, h.ReqLen, v.ReqLen())
	require.Equal(t, h.Offset, v.Offset())
	require.Equal(t, h.PayloadLen, v.PayloadLen())

	// The retransmit path: mark, count, restamp, refresh the eBSNs. Trying
	// to clear HasExtension must not break the layout.
	v.SetFlags(wire.FlagRetransmission | wire.FlagOrdered)
	v.SetRetry(3)
	v.SetTxTime(111)
	v.SetTxEcho(222)
	v.SetReqEBSN(333)
	v.SetDataEBSN(444)
	got, _, err := wire.DecodeHeader(b)
	require.NoError(t, err)
	want := h
	want.Flags = wire.FlagRetransmission | wire.FlagOrdered | wire.FlagHasExtension
	want.Retry, want.TxTime, want.TxEcho, want.ReqEBSN, want.DataEBSN = 3, 111, 222, 333, 444
	require.Equal(t, want, got)

	v.SetRetry(200)
	require.Equal(t, uint8(wire.MaxRetry), v.Retry())
	require.Equal(t, wire.PhaseMiddle, v.Phase())

	_, err = wire.ViewHeader(b[:wire.BaseHeaderLen-1])
	require.ErrorIs(t, err, wire.ErrShort)
	b[0] = 0x20
	_, err = wire.ViewHeader(b)
	require.ErrorIs(t, err, wire.ErrVersion)
}

func TestStrings(t *testing.T) {
	r := newRand(3)
	for _, typ := range allTypes {
		h := randHeader(r, typ, 0)
		h.Ext = fillExt(wire.Ext{Present: wire.ExtPlacement | wire.ExtQPN | wire.ExtSourceCID, DstQPN: 1, SrcQPN: 2, SourceCID: 3})
		s := h.String()
		require.Contains(t, s, typ.String())
		require.Contains(t, s, "ext{placement=free-running")
	}
	require.Equal(t, "[ack-req,ordered,ext]", (wire.FlagAckRequested | wire.FlagOrdered | wire.FlagHasExtension).String())
	require.Equal(t, "[]", wire.Flags(0).String())
	require.Equal(t, "Type(99)", wire.Type(99).String())
	require.Equal(t, "receiver-not-ready", wire.NackReceiverNotReady.String())
	require.Equal(t, "tail", wire.PhaseTail.String())
	require.Equal(t, "data", wire.WindowData.String())
	require.Equal(t, "[request,data]", (wire.OOWRequest | wire.OOWData).String())
	require.True(t, bytes.Contains([]byte(wire.ResyncRetryExhausted.String()), []byte("retry")))
}
