package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// fastTypes are the types DecodeFastIPv4 takes: no body, no source-CID
// extension required.
var fastTypes = []wire.Type{
	wire.TypeConnClose, wire.TypePullRequest, wire.TypePullData, wire.TypePushRequest,
	wire.TypePushGrant, wire.TypePushSolicitedData, wire.TypePushUnsolicitedData, wire.TypeSend,
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
		for _, noCsum := range []bool{false, true} {
			a := addrs4()
			a.NoUDPChecksum = noCsum
			payload := randBytes(r, r.IntN(200))
			h := randHeader(r, typ, len(payload))
			h.Ext = wire.Ext{}
			if r.IntN(2) == 0 {
				h.Ext = wire.Ext{Present: wire.ExtSeal, Seal: r.Uint64() >> (64 - wire.SealTagBits)}
			}
			b := make([]byte, 512)
			n, err := wire.EncodeFrame(b, &a, &h, payload)
			require.NoError(t, err)
			ip, port := dstOf(a)
			require.True(t, checkFastAgrees(t, b[:n], ip, port), "%v", typ)
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
			}
		}
	}
}

func TestDecodeFastIPv4RefusesOtherShapes(t *testing.T) {
	r := newRand(6)
	for _, typ := range allTypes {
		h := randHeader(r, typ, 10)
		a := addrs4()
		b := make([]byte, 512)
		n, err := wire.EncodeFrame(b, &a, &h, randBytes(r, 10))
		require.NoError(t, err)
		ip, port := dstOf(a)
		var hd wire.Header
		_, ok := wire.DecodeFastIPv4(b[:n], ip, port, &hd)
		fast := h.Ext.Present == 0 && h.Len() == wire.BaseHeaderLen
		require.Equal(t, fast, ok, "%v with extensions %v", typ, h.Ext.Present)
		if ok {
			checkFastAgrees(t, b[:n], ip, port)
		}
	}
	a := addrs6()
	h := randHeader(r, wire.TypePullData, 0)
	h.Ext = wire.Ext{}
	b := make([]byte, 512)
	n, err := wire.EncodeFrame(b, &a, &h, nil)
	require.NoError(t, err)
	var hd wire.Header
	_, ok := wire.DecodeFastIPv4(b[:n], [4]byte{}, a.DstPort, &hd)
	require.False(t, ok, "IPv6")
}

func TestDecodeFastIPv4DoesNotAllocate(t *testing.T) {
	a := addrs4()
	h := sampleHeader()
	h.Ext = wire.Ext{}
	b := make([]byte, 512)
	n, err := wire.EncodeFrame(b, &a, &h, make([]byte, 64))
	require.NoError(t, err)
	ip, port := dstOf(a)
	var hd wire.Header
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := wire.DecodeFastIPv4(b[:n], ip, port, &hd); !ok {
			panic("not taken")
		}
	})
	require.Zero(t, allocs)
}

func FuzzDecodeFastIPv4(f *testing.F) {
	r := newRand(33)
	for i, typ := range allTypes {
		a := addrs4()
		a.NoUDPChecksum = i%3 == 2
		payload := randBytes(r, r.IntN(40))
		h := randHeader(r, typ, len(payload))
		if i%2 == 0 && typ != wire.TypeConnOpen && typ != wire.TypeConnAccept {
			h.Ext = wire.Ext{}
			if i%4 == 0 {
				h.Ext = wire.Ext{Present: wire.ExtSeal, Seal: r.Uint64() >> (64 - wire.SealTagBits)}
			}
		}
		b := make([]byte, 512)
		n, err := wire.EncodeFrame(b, &a, &h, payload)
		require.NoError(f, err)
		f.Add(b[:n], false)
		f.Add(b[:n], true)
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

// TestFastTypesAreBodilessWithoutSourceCID pins the fast path's type set to
// the rule it stands for.
func TestFastTypesAreBodilessWithoutSourceCID(t *testing.T) {
	r := newRand(8)
	for typ := wire.Type(0); typ < 40; typ++ {
		want := false
		for _, f := range fastTypes {
			want = want || f == typ
		}
		h := sampleHeader()
		if typ.Valid() {
			h = randHeader(r, typ, 0)
		}
		h.Ext = wire.Ext{}
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
