package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Every fuzz target checks two things: the decoder never panics, and
// whatever it accepts re-encodes to something that decodes to the same
// value.

func FuzzDecodeHeader(f *testing.F) {
	r := newRand(31)
	for _, typ := range allTypes {
		payload := randBytes(r, r.IntN(8))
		h := randHeader(r, typ, len(payload))
		b, err := encodePacket(&h, payload)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := wire.DecodeHeader(b)
		if err != nil {
			require.Zero(t, n)
			return
		}
		require.LessOrEqual(t, n, len(b))
		re := make([]byte, h.Len()+int(h.PayloadLen))
		m, err := h.Encode(re)
		require.NoError(t, err, "decoded header does not re-encode: %v", h.String())
		copy(re[m:], b[n:])
		h2, n2, err := wire.DecodeHeader(re)
		require.NoError(t, err)
		require.Equal(t, h, h2)
		require.Equal(t, m, n2)
		require.Equal(t, b[n:], re[n2:])
		require.NotEmpty(t, h.String())
	})
}

func FuzzDecodeFrame(f *testing.F) {
	r := newRand(32)
	for i, typ := range allTypes {
		a := addrs4()
		if i%2 == 1 {
			a = addrs6()
		}
		a.NoUDPChecksum = i%4 == 2
		payload := randBytes(r, r.IntN(40))
		h := randHeader(r, typ, len(payload))
		b := make([]byte, 512)
		n, err := wire.EncodeFrame(b, &a, &h, payload)
		require.NoError(f, err)
		f.Add(b[:n], false)
		f.Add(b[:n], true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			// Repair the checksums so the fuzzer reaches the transport
			// header instead of stopping at a checksum it cannot guess.
			b = append([]byte(nil), b...)
			fixChecksums(b)
		}
		fr, err := wire.DecodeFrame(b)
		if err != nil {
			require.Zero(t, fr.Len)
			return
		}
		require.LessOrEqual(t, fr.Len, len(b))
		require.Equal(t, fr.Payload, b[fr.PayloadOff:fr.PayloadOff+len(fr.Payload)])
		cid, ok := wire.PeekCID(b, fr.L4Off)
		require.True(t, ok)
		require.Equal(t, fr.Header.DestCID, cid)
		off, ok := wire.L4Offset(b)
		require.True(t, ok)
		require.Equal(t, fr.L4Off, off)

		re := make([]byte, fr.Len+64)
		n, err := wire.EncodeFrame(re, &fr.Addrs, &fr.Header, fr.Payload)
		require.NoError(t, err)
		fr2, err := wire.DecodeFrame(re[:n])
		require.NoError(t, err)
		want := fr.Addrs
		if want.TTL == 0 {
			want.TTL = wire.DefaultTTL
		}
		if want.SrcPort == 0 {
			want.SrcPort = wire.DefaultPort
		}
		if want.DstPort == 0 {
			want.DstPort = wire.DefaultPort
		}
		require.Equal(t, want, fr2.Addrs)
		require.Equal(t, fr.Header, fr2.Header)
		require.Equal(t, fr.Payload, fr2.Payload)
	})
}

func FuzzDecodeBTH(f *testing.F) {
	r := newRand(33)
	for range 8 {
		h := randBTH(r)
		b := make([]byte, wire.BTHLen+r.IntN(4))
		_, err := h.Encode(b)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := wire.DecodeBTH(b)
		if err != nil {
			return
		}
		require.Equal(t, wire.BTHLen, n)
		re := make([]byte, wire.BTHLen)
		_, err = h.Encode(re)
		require.NoError(t, err)
		h2, _, err := wire.DecodeBTH(re)
		require.NoError(t, err)
		require.Equal(t, h, h2)
		require.NotEmpty(t, h.String())
	})
}

func FuzzDecodeRoCEFrame(f *testing.F) {
	r := newRand(34)
	for i := range 6 {
		a := addrs4()
		if i%2 == 1 {
			a = addrs6()
		}
		a.DstPort = wire.RoCEv2Port
		h := randBTH(r)
		b := make([]byte, 256)
		n, err := wire.EncodeRoCEFrame(b, &a, &h, randBytes(r, 4*i))
		require.NoError(f, err)
		f.Add(b[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := wire.DecodeRoCEFrame(b)
		if err != nil {
			return
		}
		re := make([]byte, len(b)+64)
		n, err := wire.EncodeRoCEFrame(re, &fr.Addrs, &fr.BTH, fr.Payload)
		require.NoError(t, err)
		fr2, err := wire.DecodeRoCEFrame(re[:n])
		require.NoError(t, err)
		require.Equal(t, fr.BTH, fr2.BTH)
		require.Equal(t, fr.Payload, fr2.Payload)
	})
}

func FuzzExtensions(f *testing.F) {
	r := newRand(35)
	for range 8 {
		e := randExt(r, false)
		b := make([]byte, e.Len())
		_, err := e.Encode(b)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{200, 2, 0, 0, 1, 2, 0, 0})
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, chain []byte) {
		e, err := wire.DecodeExt(chain)
		if err == nil {
			re := make([]byte, e.Len())
			_, err := e.Encode(re)
			require.NoError(t, err)
			e2, err := wire.DecodeExt(re)
			require.NoError(t, err)
			require.Equal(t, e, e2)
		}

		// The same chain inside a header must decode the same way.
		if len(chain) == 0 || len(chain) > wire.MaxExtLen || len(chain)%4 != 0 {
			return
		}
		h := sampleHeader()
		pkt, encErr := encodePacket(&h, nil)
		require.NoError(t, encErr)
		pkt[5] |= byte(wire.FlagHasExtension)
		pkt[7] = byte(len(chain) / 4)
		pkt = append(pkt, chain...)
		got, _, herr := wire.DecodeHeader(pkt)
		if err != nil {
			require.ErrorIs(t, herr, wire.ErrExtension)
			return
		}
		require.NoError(t, herr)
		require.Equal(t, e, got.Ext)
	})
}
