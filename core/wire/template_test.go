package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestFrameTemplateMatchesEncodeFrame: every frame a template builds is
// byte for byte EncodeFrame's, over both IP versions, with and without the
// IPv4 UDP checksum, every type, and payloads around the padding limit and
// up to a full frame (long enough for the vector checksum's loop).
func TestFrameTemplateMatchesEncodeFrame(t *testing.T) {
	const seed = 41
	r := newRand(seed)
	for i := range 2000 {
		a := addrs4()
		if i%2 == 1 {
			a = addrs6()
		}
		a.NoUDPChecksum = i%3 == 0
		a.TOS, a.TTL = uint8(r.Uint32()), uint8(r.IntN(3)*50)
		if a.IPv6() {
			a.FlowLabel = r.Uint32() & 0xfffff
		}
		tmpl, err := wire.NewFrameTemplate(&a)
		require.NoError(t, err)
		typ := allTypes[r.IntN(len(allTypes))]
		payload := randBytes(r, r.IntN(100))
		if i%4 == 3 {
			payload = randBytes(r, r.IntN(1500))
		}
		h := randHeader(r, typ, len(payload))
		want := make([]byte, 1700)
		n, err := wire.EncodeFrame(want, &a, &h, payload)
		require.NoError(t, err)
		got := make([]byte, 1700)
		for j := range got {
			got[j] = 0xee // the template must write every byte of the frame
		}
		m, err := tmpl.Encode(got, &h, payload)
		require.NoError(t, err)
		require.Equal(t, want[:n], got[:m], "case %d (seed %d): %v %v", i, seed, typ, a)
		_, err = wire.DecodeFrame(got[:m])
		require.NoError(t, err)

		// Headers alone, then the payload and the padding appended by the
		// sender: the same frame.
		split := make([]byte, 1700)
		hl, fl, err := tmpl.EncodeHeaders(split, &h, len(payload))
		require.NoError(t, err)
		require.Zero(t, hl%2, "case %d (seed %d): odd header length %d", i, seed, hl)
		tmpl.AddPayloadSum(split, wire.CopyChecksum(split[hl:], payload, 0))
		clear(split[hl+len(payload) : fl])
		require.Equal(t, want[:n], split[:fl], "case %d (seed %d): EncodeHeaders %v %v", i, seed, typ, a)
	}
}

func TestFrameTemplateErrors(t *testing.T) {
	var zero wire.FrameTemplate
	h := sampleHeader()
	_, err := zero.Encode(make([]byte, 200), &h, nil)
	require.ErrorIs(t, err, wire.ErrAddr)

	bad := addrs4()
	bad.DstIP = addrs6().DstIP
	_, err = wire.NewFrameTemplate(&bad)
	require.ErrorIs(t, err, wire.ErrAddr)

	a := addrs4()
	tmpl, err := wire.NewFrameTemplate(&a)
	require.NoError(t, err)
	require.Equal(t, wire.EthHeaderLen+wire.IPv4HeaderLen+wire.UDPHeaderLen, tmpl.HeaderLen())
	_, err = tmpl.Encode(make([]byte, 50), &h, nil)
	require.ErrorIs(t, err, wire.ErrShort)
	h.Version = 0
	_, err = tmpl.Encode(make([]byte, 200), &h, nil)
	require.ErrorIs(t, err, wire.ErrVersion)
	h = sampleHeader()
	_, err = tmpl.Encode(make([]byte, 70000), &h, make([]byte, 0xfff0))
	require.ErrorIs(t, err, wire.ErrField)
}

func TestFrameTemplateDoesNotAllocate(t *testing.T) {
	a := addrs4()
	tmpl, err := wire.NewFrameTemplate(&a)
	require.NoError(t, err)
	h := sampleHeader()
	b := make([]byte, 256)
	p := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := tmpl.Encode(b, &h, p); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkEncodeAck(b *testing.B) {
	a := addrs4()
	h := wire.Header{Version: wire.Version, DestCID: 7, Type: wire.TypeAck, ReqEBSN: 1, DataEBSN: 2, TxTime: 3}
	buf := make([]byte, 256)
	b.Run("EncodeFrame", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := wire.EncodeFrame(buf, &a, &h, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	tmpl, err := wire.NewFrameTemplate(&a)
	require.NoError(b, err)
	b.Run("FrameTemplate", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := tmpl.Encode(buf, &h, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
