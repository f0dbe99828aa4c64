package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestExtRoundTripAndForwardCompatibility(t *testing.T) {
	r := newRand(9)
	for range 1000 {
		e := randExt(r, false)
		b := make([]byte, e.Len())
		n, err := e.Encode(b)
		require.NoError(t, err)
		require.Equal(t, e.Len(), n)
		got, err := wire.DecodeExt(b)
		require.NoError(t, err)
		require.Equal(t, e, got)
	}

	// A later version appended a word to the placement extension and added
	// an unknown one: this version reads what it knows.
	chain := []byte{
		wire.ExtTypePlacement, 3, byte(wire.PlacementAbsolute), 0, 0, 0, 1, 0, 0xaa, 0xbb, 0xcc, 0xdd,
		77, 1, 0, 0,
		wire.ExtTypeSourceCID, 2, 0, 0, 0, 0, 0, 9,
	}
	got, err := wire.DecodeExt(chain)
	require.NoError(t, err)
	require.Equal(t, wire.Ext{
		Present:   wire.ExtPlacement | wire.ExtSourceCID,
		Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 256},
		SourceCID: 9,
	}, got)

	for _, bad := range [][]byte{{1}, {1, 2, 1}, {0, 0, 0, 0}, {5, 2, 0, 0}} {
		_, err := wire.DecodeExt(bad)
		require.ErrorIs(t, err, wire.ErrExtension, "%x", bad)
	}
	e, err := wire.DecodeExt(nil)
	require.NoError(t, err)
	require.Zero(t, e)
	_, err = (&wire.Ext{Present: wire.ExtQPN}).Encode(make([]byte, 7))
	require.ErrorIs(t, err, wire.ErrShort)
	require.Equal(t, "ext{placement=absolute:256 scid=0x000009}", got.String())
}

// The length of every set of extensions, unknown bits included (they add
// nothing), is the sum of the TLVs the wire format defines.
func TestExtLenEveryMask(t *testing.T) {
	lens := []struct {
		bit wire.ExtMask
		n   int
	}{
		{wire.ExtPlacement, 8}, {wire.ExtQPN, 8}, {wire.ExtSourceCID, 8},
		{wire.ExtRegion, 16}, {wire.ExtSeal, 8}, {wire.ExtSealKey, 20},
	}
	for m := 0; m < 256; m++ {
		want := 0
		for _, l := range lens {
			if wire.ExtMask(m)&l.bit != 0 {
				want += l.n
			}
		}
		e := wire.Ext{Present: wire.ExtMask(m)}
		require.Equal(t, want, e.Len(), "mask %#02x", m)
	}
}
