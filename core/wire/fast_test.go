package wire_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// fastTypes are the types DecodeFastIPv4 takes: no body but the ACKs',
// no source-CID extension required.
var fastTypes = []wire.Type{
	wire.TypeConnClose, wire.TypePullRequest, wire.TypePullData, wire.TypePushRequest,
	wire.TypePushGrant, wire.TypePushSolicitedData, wire.TypePushUnsolicitedData, wire.TypeSend,
	wire.TypeAck, wire.TypeExtendedAck,
}

// fastExts are the extensions DecodeFastIPv4 takes, those the data path
// sends: a delivery index (Sends), a region (pushes and pulls) and the
// seal (every packet of a sealed connection).
const fastExts = wire.ExtPlacement | wire.ExtRegion | wire.ExtSeal

// randFastExt returns a random set of the extensions DecodeFastIPv4 takes.
func randFastExt(r *rand.Rand) wire.Ext {
	e := randExt(r, false)
	e.Present &= fastExts
	if r.IntN(2) == 0 {
		e.Present |= wire.ExtSeal
		e.Seal = r.Uint64() >> (64 - wire.SealTagBits)
	}
	return e
}

func dstOf(a wire.Addrs) ([4]byte, uint16) { return a.DstIP.As4(), a.DstPort }

// checkFastAgrees asserts the contract: when DecodeFastIPv4 takes a frame,
// Frame.Decode takes it too, with the same header and payload, addressed to
// the given destination.
func checkFastAgrees(t *testing.T, b []byte, ip [4]byte, port uint16) bool {
	var h wire.Header
	payload, ok := wire.DecodeFastIPv4(b, ip, port, &h)
	if !ok {
		return false
	}
	fr, err := wire.DecodeFrame(b)
	require.NoError(t, err, "the fast path took a frame Frame.Decode refuses")
	require.Equal(t, fr.Header, h)
	require.Equal(t, fr.Payload, payload)
	require.Equal(t, ip, fr.DstIP.As4())
	require.Equal(t, port, fr.DstPort)
	require.False(t, fr.IPv6())
	return true
}

func TestDecodeFastIPv4TakesCommonFrames(t *testing.T) {
	r := newRand(5)
	for _, typ := range fastTypes {
		for i := range 8 {
			noCsum := i%2 == 1
			a := addrs4()
			a.NoUDPChecksum = noCsum
			payload := randBytes(r, r.IntN(200))
			h := randHeader(r, typ, len(payload))
			h.Ext = randFastExt(r)
			if i < 2 {
				h.Ext = wire.Ext{} // the bare header, both with and without checksum
			}
			h.Flags &^= wire.FlagHasExtension
			b := make([]byte, 512)
			n, err := wire.EncodeFrame(b, &a, &h, payload)
			require.NoError(t, err)
			ip, port := dstOf(a)
			require.True(t, checkFastAgrees(t, b[:n], ip, port), "%v %v", typ, &h.Ext)
			// Ethernet padding after the IP packet is ignored.
			require.True(t, checkFastAgrees(t, b[:n+7], ip, port), "%v padded", typ)
			// Not for us.
			var hd wire.Header
			_, ok := wire.DecodeFastIPv4(b[:n], [4]byte{10, 0, 0, 9}, port, &hd)
			require.False(t, ok)
			_, ok = wire.DecodeFastIPv4(b[:n], ip, port+1, &hd)
			require.False(t, ok)
			// Every single-bit error is refused (by a checksum or a field
			// check), or, where no checksum covers it (no UDP checksum),
			// still agrees with Frame.Decode.
			for bit := 0; bit < n*8; bit++ {
				c := append([]byte(nil), b[:n]...)
				c[bit/8] ^= 1 << (bit % 8)
				if checkFastAgrees(t, c, ip, port) && !noCsum {
					require.Less(t, bit/8, wire.EthHeaderLen, "%v: a flipped bit %d past Ethernet got through the checksums", typ, bit)
				}
				// With the checksums made right again, what the fast
				// path takes still agrees.
				fixChecksums(c)
				checkFastAgrees(t, c, ip, port)
			}
		}
	}
}

func TestDecodeFastIPv4RefusesOtherShapes(t *testing.T) {
	r := newRand(6)
	for range 4 {
		for _, typ := range allTypes {
			h := randHeader(r, typ, 10)
			a := addrs4()
			b := make([]byte, 512)
			n, err := wire.EncodeFrame(b, &a, &h, randBytes(r, 10))
			require.NoError(t, err)
			ip, port := dstOf(a)
			var hd wire.Header
			_, ok := wire.DecodeFastIPv4(b[:n], ip, port, &hd)
			fast := slices.Contains(fastTypes, typ) && h.Ext.Present&^fastExts == 0
			require.Equal(t, fast, ok, "%v with extensions %v", typ, h.Ext.Present)
			if ok {
				checkFastAgrees(t, b[:n], ip, port)
			}
		}
	}
	a := addrs6()
	h := randHeader(r, wire.TypePullData, 0)
	h.Ext = wire.Ext{}
	h.Flags &^= wire.FlagHasExtension
	b := make([]byte, 512)
	n, err := wire.EncodeFrame(b, &a, &h, nil)
	require.NoError(t, err)
	var hd wire.Header
	_, ok := wire.DecodeFastIPv4(b[:n], [4]byte{}, a.DstPort, &hd)
	require.False(t, ok, "IPv6")
}

// TestDecodeFastIPv4ExtensionChains: a chain the fast path does not know
// the shape of is left to Frame.Decode, whether Frame.Decode takes it (an
// unknown TLV, a longer TLV, another order) or refuses it (a duplicate, a
// bad delivery-index mode, a flag that disagrees with the chain).
func TestDecodeFastIPv4ExtensionChains(t *testing.T) {
	region := []byte{wire.ExtTypeRegion, 4, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	seal := []byte{wire.ExtTypeSeal, 2, 0xab, 0xcd, 1, 2, 3, 4}
	place := []byte{wire.ExtTypePlacement, 2, byte(wire.PlacementAbsolute), 0, 0, 0, 0, 9}
	cat := func(tlvs ...[]byte) []byte { return slices.Concat(tlvs...) }
	for _, tc := range []struct {
		name  string
		chain []byte
		flag  bool
		fast  bool // DecodeFastIPv4 takes it
		valid bool // Frame.Decode takes it
	}{
		{"region, seal", cat(region, seal), true, true, true},
		{"index, region, seal", cat(place, region, seal), true, true, true},
		{"index", place, true, true, true},
		{"seal, region", cat(seal, region), true, false, true},
		{"unknown TLV", cat(region, []byte{99, 1, 0, 0}, seal), true, false, true},
		{"unknown TLV alone", []byte{99, 1, 0, 0}, true, false, true},
		{"longer region", cat([]byte{wire.ExtTypeRegion, 5}, region[2:], []byte{0, 0, 0, 0}), true, false, true},
		{"source CID", []byte{wire.ExtTypeSourceCID, 2, 0, 0, 0, 0, 0, 7}, true, false, true},
		{"two seals", cat(seal, seal), true, false, false},
		{"zero-length TLV", cat(region, []byte{wire.ExtTypeSeal, 0, 0, 0}), true, false, false},
		{"TLV past the chain", cat(region, []byte{wire.ExtTypeSeal, 3, 0, 0, 0, 0, 0, 0}), true, false, false},
		{"bad index mode", cat([]byte{wire.ExtTypePlacement, 2, 0}, place[3:]), true, false, false},
		{"chain without flag", cat(region, seal), false, false, false},
		{"flag without chain", nil, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, typ := range fastTypes {
				b := frameWithChain(t, newRand(uint64(typ)), typ, tc.chain, tc.flag, []byte("payload!"))
				_, err := wire.DecodeFrame(b)
				require.Equal(t, tc.valid, err == nil, "%v: Frame.Decode: %v", typ, err)
				ip, port := dstOf(addrs4())
				require.Equal(t, tc.fast, checkFastAgrees(t, b, ip, port), "%v", typ)
			}
		})
	}
}

// frameWithChain builds an IPv4 frame of type typ whose extension chain is
// chain as given, with FlagHasExtension as flag says.
func frameWithChain(t *testing.T, r *rand.Rand, typ wire.Type, chain []byte, flag bool, payload []byte) []byte {
	h := randHeader(r, typ, len(payload))
	h.Ext = wire.Ext{}
	h.Flags &^= wire.FlagHasExtension
	hb := make([]byte, h.Len())
	_, err := h.Encode(hb)
	require.NoError(t, err)
	if flag {
		hb[5] |= byte(wire.FlagHasExtension)
	}
	hb[7] = byte(len(chain) / 4)
	a := addrs4()
	off, err := wire.DatagramOverhead(&a)
	require.NoError(t, err)
	data := slices.Concat(hb, chain, payload)
	b := make([]byte, off+len(data)+wire.MinFrameLen)
	copy(b[off:], data)
	n, err := wire.EncodeUDP(b, &a, len(data))
	require.NoError(t, err)
	return b[:n]
}

func TestDecodeFastIPv4DoesNotAllocate(t *testing.T) {
	a := addrs4()
	ip, port := dstOf(a)
	for _, tc := range []struct {
		typ wire.Type
		ext wire.Ext
	}{
		{wire.TypePushUnsolicitedData, wire.Ext{}},
		{wire.TypePushUnsolicitedData, wire.Ext{Present: wire.ExtRegion | wire.ExtSeal, Region: wire.RegionRef{Key: 3, Addr: 64}, Seal: 5}},
		{wire.TypeSend, wire.Ext{Present: wire.ExtPlacement | wire.ExtSeal, Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 2}, Seal: 5}},
		{wire.TypeAck, wire.Ext{Present: wire.ExtSeal, Seal: 5}},
		{wire.TypeExtendedAck, wire.Ext{}},
	} {
		h := sampleHeader()
		h.Type, h.Ext = tc.typ, tc.ext
		b := make([]byte, 512)
		n, err := wire.EncodeFrame(b, &a, &h, make([]byte, 64))
		require.NoError(t, err)
		var hd wire.Header
		allocs := testing.AllocsPerRun(100, func() {
			if _, ok := wire.DecodeFastIPv4(b[:n], ip, port, &hd); !ok {
				panic("not taken")
			}
		})
		require.Zero(t, allocs, "%v %v", tc.typ, &tc.ext)
	}
}

func FuzzDecodeFastIPv4(f *testing.F) {
	r := newRand(33)
	for i, typ := range allTypes {
		a := addrs4()
		a.NoUDPChecksum = i%3 == 2
		payload := randBytes(r, r.IntN(40))
		h := randHeader(r, typ, len(payload))
		if i%2 == 0 && typ != wire.TypeConnOpen && typ != wire.TypeConnAccept {
			h.Ext = randFastExt(r)
		}
		b := make([]byte, 512)
		n, err := wire.EncodeFrame(b, &a, &h, payload)
		require.NoError(f, err)
		f.Add(b[:n], false)
		f.Add(b[:n], true)
	}
	// The data path's own shapes: a sealed push, a sealed Send, an ACK.
	for _, e := range []wire.Ext{
		{Present: wire.ExtRegion | wire.ExtSeal, Region: wire.RegionRef{Key: 3, Addr: 64}, Seal: 5},
		{Present: wire.ExtPlacement | wire.ExtSeal, Placement: wire.Placement{Mode: wire.PlacementRelative, Index: 2}, Seal: 5},
	} {
		for _, typ := range []wire.Type{wire.TypePushUnsolicitedData, wire.TypeSend, wire.TypeAck, wire.TypeExtendedAck} {
			a := addrs4()
			h := randHeader(r, typ, 64)
			h.Ext = e
			b := make([]byte, 512)
			n, err := wire.EncodeFrame(b, &a, &h, randBytes(r, 64))
			require.NoError(f, err)
			f.Add(b[:n], true)
		}
	}
	ip, port := dstOf(addrs4())
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = append([]byte(nil), b...)
			fixChecksums(b)
		}
		checkFastAgrees(t, b, ip, port)
	})
}

func BenchmarkDecodeFastIPv4(b *testing.B) {
	a := addrs4()
	h := sampleHeader()
	h.Ext = wire.Ext{}
	buf := make([]byte, 512)
	n, err := wire.EncodeFrame(buf, &a, &h, make([]byte, 64))
	require.NoError(b, err)
	ip, port := dstOf(a)
	var hd wire.Header
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, ok := wire.DecodeFastIPv4(buf[:n], ip, port, &hd); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("frame", func(b *testing.B) {
		var f wire.Frame
		b.ReportAllocs()
		for range b.N {
			if err := f.Decode(buf[:n]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFastTypesAreBodilessOrACKs pins the fast path's type set to the rule
// it stands for: the reliable types without a body, and the ACKs.
func TestFastTypesAreBodilessOrACKs(t *testing.T) {
	r := newRand(8)
	for typ := wire.Type(0); typ < 40; typ++ {
		want := slices.Contains(fastTypes, typ)
		require.Equal(t, want, typ.Valid() && (typ.Window() != wire.WindowNone && typ != wire.TypeResync ||
			typ == wire.TypeAck || typ == wire.TypeExtendedAck), "%v", typ)
		h := sampleHeader()
		if typ.Valid() {
			h = randHeader(r, typ, 0)
		}
		h.Ext = wire.Ext{}
		h.Flags &^= wire.FlagHasExtension
		a := addrs4()
		b := make([]byte, 256)
		n := wire.EthHeaderLen + wire.IPv4HeaderLen + wire.UDPHeaderLen + wire.BaseHeaderLen
		if typ.Valid() && typ != wire.TypeConnOpen && typ != wire.TypeConnAccept {
			var err error
			n, err = wire.EncodeFrame(b, &a, &h, nil)
			require.NoError(t, err)
		} else {
			// Encode refuses these: patch the type of a valid frame.
			h.Type = wire.TypePullData
			_, err := wire.EncodeFrame(b, &a, &h, nil)
			require.NoError(t, err)
			b[wire.EthHeaderLen+wire.IPv4HeaderLen+wire.UDPHeaderLen+4] = byte(typ)
			fixChecksums(b[:n])
		}
		ip, port := dstOf(a)
		var hd wire.Header
		_, ok := wire.DecodeFastIPv4(b[:n], ip, port, &hd)
		require.Equal(t, want, ok, "%v", typ)
	}
}
