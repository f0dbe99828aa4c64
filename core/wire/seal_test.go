package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// The tag changes with every covered field, and with the key; it stays
// over what a resend rewrites in place of a reliable packet; it survives
// encoding and both decoders.
func TestSealTag(t *testing.T) {
	k := wire.SealKey{0x0123456789abcdef, 0xfedcba9876543210}
	base := func() wire.Header {
		return wire.Header{Version: wire.Version, DestCID: 0x1234, Type: wire.TypeSend, Flags: wire.FlagOrdered,
			PSN: 100, RSN: 7, SSN: 3, ReqLen: 3000, Offset: 1024, Desc: 0x21,
			Ext: wire.Ext{Present: wire.ExtPlacement | wire.ExtRegion, Placement: wire.Placement{Mode: wire.PlacementFreeRunning, Index: 9},
				Region: wire.RegionRef{Key: 5, Addr: 0x1000}}}
	}
	h0 := base()
	tag := h0.SealTag(k, 1000)
	require.LessOrEqual(t, tag, uint64(1)<<wire.SealTagBits-1)
	for name, edit := range map[string]func(h *wire.Header){
		"cid":       func(h *wire.Header) { h.DestCID++ },
		"type":      func(h *wire.Header) { h.Type = wire.TypePushUnsolicitedData },
		"psn":       func(h *wire.Header) { h.PSN++ },
		"rsn":       func(h *wire.Header) { h.RSN++ },
		"ssn":       func(h *wire.Header) { h.SSN++ },
		"reqlen":    func(h *wire.Header) { h.ReqLen++ },
		"offset":    func(h *wire.Header) { h.Offset++ },
		"desc":      func(h *wire.Header) { h.Desc++ },
		"last flag": func(h *wire.Header) { h.Flags |= wire.FlagLastOfMessage },
		"phase":     func(h *wire.Header) { h.Phase = wire.PhaseMiddle },
		"index":     func(h *wire.Header) { h.Ext.Placement.Index++ },
		"region":    func(h *wire.Header) { h.Ext.Region.Addr++ },
		"key":       func(h *wire.Header) { h.Ext.Region.Key++ },
		"no region": func(h *wire.Header) { h.Ext.Present &^= wire.ExtRegion },
	} {
		h := base()
		edit(&h)
		require.NotEqual(t, tag, h.SealTag(k, 1000), name)
	}
	require.NotEqual(t, tag, h0.SealTag(k, 999), "payload length")
	require.NotEqual(t, tag, h0.SealTag(wire.SealKey{k[0], k[1] ^ 1}, 1000), "key")
	h := base()
	h.Retry, h.Flags = 3, h.Flags|wire.FlagRetransmission|wire.FlagAckRequested
	h.ReqEBSN, h.DataEBSN, h.TxTime, h.TxEcho = 1, 2, 3, 4
	require.Equal(t, tag, h.SealTag(k, 1000), "a resend's rewritten fields are not covered")

	// An ACK's acknowledgement is covered: it is built anew each time.
	ack := wire.Header{Version: wire.Version, DestCID: 9, Type: wire.TypeAck, ReqEBSN: 5, DataEBSN: 6, TxEcho: 7}
	at := ack.SealTag(k, 0)
	ack.ReqEBSN++
	require.NotEqual(t, at, ack.SealTag(k, 0))

	// Through the encoder and both decoders.
	h = base()
	h.Ext = wire.Ext{}
	h.Seal(k, 64)
	a := addrs4()
	b := make([]byte, 512)
	n, err := wire.EncodeFrame(b, &a, &h, make([]byte, 64))
	require.NoError(t, err)
	fr, err := wire.DecodeFrame(b[:n])
	require.NoError(t, err)
	require.True(t, fr.Header.SealOK(k))
	require.False(t, fr.Header.SealOK(wire.SealKey{1, 2}))
	ip, port := dstOf(a)
	var hd wire.Header
	p, ok := wire.DecodeFastIPv4(b[:n], ip, port, &hd)
	require.True(t, ok, "the fast path takes a sealed frame")
	require.Len(t, p, 64)
	require.True(t, hd.SealOK(k))
	require.True(t, checkFastAgrees(t, b[:n], ip, port))

	// The key travels in ConnOpen.
	open := wire.Header{Version: wire.Version, Type: wire.TypeConnOpen,
		Ext: wire.Ext{Present: wire.ExtSourceCID | wire.ExtSealKey, SourceCID: 3, SealKey: k}}
	n, err = wire.EncodeFrame(b, &a, &open, nil)
	require.NoError(t, err)
	fr, err = wire.DecodeFrame(b[:n])
	require.NoError(t, err)
	require.Equal(t, k, fr.Header.Ext.SealKey)
	require.NotContains(t, fr.Header.String(), "0123456789abcdef", "the key stays out of logs")
}

// Every field of an ACK or NACK its receiver acts on is covered, the
// bitmaps of an extended ACK included; only HasExtension is not (it
// follows from the extensions).
func TestSealTagCoversAcks(t *testing.T) {
	k := wire.SealKey{3, 4}
	base := func() wire.Header {
		h := wire.Header{Version: wire.Version, DestCID: 9, Type: wire.TypeExtendedAck, PSN: 40, ReqEBSN: 5, DataEBSN: 6,
			TxTime: 7, TxEcho: 8, HopEcho: 2}
		h.Ack = wire.AckBody{OOW: wire.OOWData, RxBufLevel: 10, OOWCount: 3, Dup: wire.WindowData, RxTime: 11}
		h.Ack.ReqBitmap.Set(3)
		h.Ack.DataBitmap.Set(70)
		return h
	}
	h0 := base()
	tag := h0.SealTag(k, 0)
	for name, edit := range map[string]func(h *wire.Header){
		"request bitmap": func(h *wire.Header) { h.Ack.ReqBitmap.Set(5) },
		"data bitmap":    func(h *wire.Header) { h.Ack.DataBitmap.Clear(70) },
		"high bit":       func(h *wire.Header) { h.Ack.ReqBitmap.Set(127) },
		"hop echo":       func(h *wire.Header) { h.HopEcho++ },
		"buffer level":   func(h *wire.Header) { h.Ack.RxBufLevel++ },
		"ack requested":  func(h *wire.Header) { h.Flags |= wire.FlagAckRequested },
		"ecn echo":       func(h *wire.Header) { h.Flags |= wire.FlagECNEcho },
		"dup window":     func(h *wire.Header) { h.Ack.Dup = wire.WindowRequest },
		"dup psn":        func(h *wire.Header) { h.PSN++ },
		"oow":            func(h *wire.Header) { h.Ack.OOW = wire.OOWRequest },
		"rx time":        func(h *wire.Header) { h.Ack.RxTime++ },
		"plain ack":      func(h *wire.Header) { h.Type = wire.TypeAck },
	} {
		h := base()
		edit(&h)
		require.NotEqual(t, tag, h.SealTag(k, 0), name)
	}
	h := base()
	h.Flags |= wire.FlagHasExtension
	require.Equal(t, tag, h.SealTag(k, 0), "HasExtension follows from the extensions")

	nack := wire.Header{Version: wire.Version, DestCID: 9, Type: wire.TypeNack, Nack: wire.NackBody{Code: wire.NackOutOfWindow, Window: wire.WindowRequest, PSN: 3}}
	nt := nack.SealTag(k, 0)
	nack.Flags |= wire.FlagAckRequested
	require.NotEqual(t, nt, nack.SealTag(k, 0), "a NACK's flags")
}

// A ConnAccept's tag covers its own fields and the ConnOpen it answers;
// it survives encoding and decoding.
func TestHelloTag(t *testing.T) {
	k := wire.SealKey{0x1111, 0x2222}
	open := wire.Header{Version: wire.Version, Type: wire.TypeConnOpen, ReqEBSN: 100, DataEBSN: 200, TxTime: 5,
		PSN: 7, Offset: 8, ReqLen: 9, RSN: 10, SSN: 11,
		Ext: wire.Ext{Present: wire.ExtSourceCID | wire.ExtSealKey | wire.ExtQPN, SourceCID: 3, SealKey: k, SrcQPN: 12}}
	ot := open.HelloTag(k, 0)
	resent := open
	resent.TxTime = 99
	require.Equal(t, ot, resent.HelloTag(k, 0), "a resent ConnOpen's new TxTime is not bound")
	for name, edit := range map[string]func(h *wire.Header){
		"request BSN": func(h *wire.Header) { h.ReqEBSN++ },
		"data BSN":    func(h *wire.Header) { h.DataEBSN++ },
		"source CID":  func(h *wire.Header) { h.Ext.SourceCID++ },
		"key":         func(h *wire.Header) { h.Ext.SealKey[1]++ },
		"no key":      func(h *wire.Header) { h.Ext.Present &^= wire.ExtSealKey },
		"qpn":         func(h *wire.Header) { h.Ext.SrcQPN++ },
		"early psn":   func(h *wire.Header) { h.PSN++ },
		"early data":  func(h *wire.Header) { h.Offset++ },
		"early mark":  func(h *wire.Header) { h.ReqLen++ },
		"incarnation": func(h *wire.Header) { h.RSN++ },
		"connect":     func(h *wire.Header) { h.SSN++ },
	} {
		h := open
		edit(&h)
		require.NotEqual(t, ot, h.HelloTag(k, 0), name)
	}

	acc := wire.Header{Version: wire.Version, Type: wire.TypeConnAccept, DestCID: 3, ReqEBSN: 300, DataEBSN: 400, TxTime: 6, TxEcho: 5,
		Ext: wire.Ext{Present: wire.ExtSourceCID | wire.ExtSealKey, SourceCID: 4, SealKey: wire.SealKey{5, 6}}}
	acc.Ext.Present |= wire.ExtSeal
	acc.Ext.Seal = acc.HelloTag(k, ot)
	require.NotEqual(t, acc.Ext.Seal, acc.HelloTag(k, ot^1), "bound to its ConnOpen")
	for name, edit := range map[string]func(h *wire.Header){
		"tx time": func(h *wire.Header) { h.TxTime++ },
		"echo":    func(h *wire.Header) { h.TxEcho++ },
		"cid":     func(h *wire.Header) { h.DestCID++ },
	} {
		h := acc
		edit(&h)
		require.NotEqual(t, acc.Ext.Seal, h.HelloTag(k, ot), name)
	}
	a := addrs4()
	b := make([]byte, 512)
	n, err := wire.EncodeFrame(b, &a, &acc, nil)
	require.NoError(t, err)
	fr, err := wire.DecodeFrame(b[:n])
	require.NoError(t, err)
	require.Equal(t, acc.Ext.Seal, fr.Header.HelloTag(k, ot), "through the encoder and decoder")
}

// Sealing and checking do not allocate.
func TestSealDoesNotAllocate(t *testing.T) {
	k := wire.SealKey{1, 2}
	h := sampleHeader()
	allocs := testing.AllocsPerRun(100, func() {
		h.Seal(k, 64)
		if !h.SealOK(k) {
			h.PayloadLen = 64
		}
		h.Ext.Seal ^= h.HelloTag(k, 1)
	})
	require.Zero(t, allocs)
}

// BenchmarkSealTag is the per-packet cost of the seal: once at the
// sender, once at the receiver.
func BenchmarkSealTag(b *testing.B) {
	k := wire.SealKey{1, 2}
	for _, typ := range []wire.Type{wire.TypeSend, wire.TypeAck, wire.TypeExtendedAck} {
		h := sampleHeader()
		h.Type = typ
		b.Run(typ.String(), func(b *testing.B) {
			b.ReportAllocs()
			var x uint64
			for range b.N {
				x ^= h.SealTag(k, 1024)
			}
			sink = x
		})
	}
}

var sink uint64
