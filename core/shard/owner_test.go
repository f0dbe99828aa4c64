package shard_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/core/wire"
)

// encode returns a transport frame with header h and payload p.
func encode(t testing.TB, h wire.Header, p []byte) []byte {
	t.Helper()
	a := wire.Addrs{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2")}
	h.Version = wire.Version
	b := make([]byte, 512)
	n, err := wire.EncodeFrame(b, &a, &h, p)
	require.NoError(t, err)
	return b[:n]
}

// opener is a ConnOpen from source CID src with the extensions ext holds
// besides it.
func opener(t testing.TB, src uint32, ext wire.Ext) []byte {
	ext.Present |= wire.ExtSourceCID
	ext.SourceCID = src
	return encode(t, wire.Header{Type: wire.TypeConnOpen, Ext: ext}, nil)
}

// TestOwner: a frame's owner comes from its destination CID, or for CID 0
// from the source CID wherever it stands in the first MaxOpenerExts
// extensions; frames that name no shard have none.
func TestOwner(t *testing.T) {
	const bits, n = 2, 4
	src := cidOf(3, bits, 5)
	withTLVs := func(k int) []byte {
		// A ConnOpen whose source CID follows k unknown 4-byte TLVs.
		b := opener(t, src, wire.Ext{})
		l4, _ := wire.L4Offset(b)
		h := l4 + wire.UDPHeaderLen
		tlv := make([]byte, 0, 4*k)
		for range k {
			tlv = append(tlv, 0x7f, 1, 0, 0)
		}
		out := append(append(append([]byte(nil), b[:h+wire.BaseHeaderLen]...), tlv...), b[h+wire.BaseHeaderLen:]...)
		out[h+7] += byte(k)
		return out
	}
	hdrAt := func(b []byte) int { l4, _ := wire.L4Offset(b); return l4 + wire.UDPHeaderLen }
	for _, c := range []struct {
		name  string
		frame []byte
		owner int
		ok    bool
	}{
		{"CID of shard 2", encode(t, wire.Header{Type: wire.TypePushUnsolicitedData, DestCID: cidOf(2, bits, 9)}, []byte{1}), 2, true},
		{"ConnOpen", opener(t, src, wire.Ext{}), 3, true},
		{"ConnOpen of an opener of shard 1", opener(t, cidOf(1, bits, 1), wire.Ext{}), 1, true},
		{"ConnOpen with a sealing key", opener(t, src, wire.Ext{Present: wire.ExtSealKey, SealKey: wire.SealKey{1, 2}}), 3, true},
		{"early data after placement and QPN", encode(t, wire.Header{Type: wire.TypeSend, Desc: 1, Ext: wire.Ext{Present: wire.ExtPlacement | wire.ExtQPN | wire.ExtSourceCID,
			Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 3}, DstQPN: 1, SrcQPN: 2, SourceCID: src}}, []byte{1, 2}), 3, true},
		{"source CID after 7 other extensions", withTLVs(7), 3, true},
		{"source CID after 8 other extensions", withTLVs(8), 0, false},
		{"CID 0 without a source CID", encode(t, wire.Header{Type: wire.TypePushUnsolicitedData}, []byte{1}), 0, false},
		{"CID 0 ack with a source CID", encode(t, wire.Header{Type: wire.TypeAck, Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: src}}, nil), 0, false},
		{"truncated source CID", func() []byte { b := opener(t, src, wire.Ext{}); return b[:hdrAt(b)+wire.BaseHeaderLen+6] }(), 0, false},
		{"zero-length TLV", func() []byte { b := opener(t, src, wire.Ext{}); b[hdrAt(b)+wire.BaseHeaderLen+1] = 0; return b }(), 0, false},
		{"TLV longer than the chain", func() []byte { b := opener(t, src, wire.Ext{}); b[hdrAt(b)+wire.BaseHeaderLen+1] = 3; return b }(), 0, false},
		{"short source-CID TLV", func() []byte {
			b := opener(t, src, wire.Ext{Present: wire.ExtSealKey})
			b[hdrAt(b)+wire.BaseHeaderLen+1] = 1
			return b
		}(), 0, false},
		{"other version", func() []byte { b := opener(t, src, wire.Ext{}); b[hdrAt(b)] = 0x20; return b }(), 0, false},
		{"not UDP", func() []byte { b := opener(t, src, wire.Ext{}); b[wire.EthHeaderLen+9] = 6; return b }(), 0, false},
	} {
		got, ok := shard.Owner(c.frame, bits, n)
		require.Equal(t, c.ok, ok, c.name)
		if ok {
			require.Equal(t, c.owner, got, c.name)
		}
	}
	// Three shards in two bits: a source CID naming shard 3 wraps to 0,
	// a destination CID naming shard 3 names none.
	got, ok := shard.Owner(opener(t, src, wire.Ext{}), bits, 3)
	require.True(t, ok)
	require.Equal(t, 0, got)
	_, ok = shard.Owner(encode(t, wire.Header{Type: wire.TypeAck, DestCID: cidOf(3, bits, 1)}, nil), bits, 3)
	require.False(t, ok)
}

// TestConnOpenHandOff: copies of ConnOpens sent on every queue of a
// 4-queue port reach the shard their source CID names, once each.
func TestConnOpenHandOff(t *testing.T) {
	const n = 4
	set, pool, dev, peer := newSet(t, n, 0, 1024)
	for q := range n {
		for j := range n {
			hs := []mbuf.Handle{put(t, pool, opener(t, cidOf(j, set.Bits(), uint32(16*q+j)), wire.Ext{}))}
			require.Equal(t, 1, peer.TxBurst(q, hs))
		}
	}
	got := map[uint32]int{}
	buf := make([]mbuf.Handle, 8)
	for range 3 {
		for i := range n {
			for m := set.Port(i).RxBurst(i, buf); m > 0; m = set.Port(i).RxBurst(i, buf) {
				for _, h := range buf[:m] {
					var f wire.Frame
					require.NoError(t, f.Decode(pool.Data(h)))
					require.Equal(t, i, rt.CIDShard(f.Header.Ext.SourceCID, set.Bits()), "ConnOpen from %#x reached shard %d", f.Header.Ext.SourceCID, i)
					got[f.Header.Ext.SourceCID]++
				}
				pool.Free(buf[:m])
			}
		}
	}
	require.Len(t, got, n*n)
	for src, c := range got {
		require.Equal(t, 1, c, "%#x", src)
	}
	require.Equal(t, uint64(n*(n-1)), set.Total().SteeredOut)
	closeAll(t, set, pool, dev, peer)
}

// FuzzOwner: Owner never panics, and where the frame decodes it agrees
// with the decoder: the destination CID's shard, or for CID 0 the source
// CID's.
func FuzzOwner(f *testing.F) {
	f.Add(opener(f, cidOf(1, 1, 3), wire.Ext{}), uint8(1))
	f.Add(opener(f, cidOf(2, 2, 3), wire.Ext{Present: wire.ExtSealKey | wire.ExtQPN}), uint8(2))
	f.Add(encode(f, wire.Header{Type: wire.TypePushUnsolicitedData, DestCID: cidOf(1, 1, 2)}, []byte{1}), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, bits uint8) {
		bits = bits%rt.MaxShardBits + 1
		n := 1 << bits
		got, ok := shard.Owner(b, uint(bits), n)
		var fr wire.Frame
		if fr.Decode(b) != nil {
			return
		}
		switch h := fr.Header; {
		case h.DestCID != 0:
			require.True(t, ok)
			require.Equal(t, rt.CIDShard(h.DestCID, uint(bits)), got)
		case ok:
			require.NotZero(t, h.Ext.Present&wire.ExtSourceCID, "an owner for CID 0 only from a source CID")
			require.Equal(t, rt.CIDShard(h.Ext.SourceCID, uint(bits)), got)
		}
	})
}

// TestHandOffAllocates: receiving and handing over data frames and
// ConnOpens allocates nothing.
func TestHandOffAllocates(t *testing.T) {
	set, pool, dev, peer := newSet(t, 2, 0, 1024)
	frames := [][]byte{opener(t, cidOf(1, 1, 7), wire.Ext{Present: wire.ExtSealKey}),
		encode(t, wire.Header{Type: wire.TypePushUnsolicitedData, DestCID: cidOf(1, 1, 3)}, []byte{1, 2})}
	hs := make([]mbuf.Handle, 16)
	buf := make([]mbuf.Handle, 32)
	got := 0
	allocs := testing.AllocsPerRun(100, func() {
		require.Equal(t, len(hs), pool.AllocBulk(hs))
		for k, h := range hs {
			b := frames[k%len(frames)]
			pool.SetLen(h, len(b))
			copy(pool.Data(h), b)
		}
		peer.TxBurst(0, hs)
		for i := range 2 {
			m := set.Port(i).RxBurst(i, buf)
			got += m
			pool.Free(buf[:m])
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, 101*len(hs), got, "every frame reached shard 1")
	closeAll(t, set, pool, dev, peer)
}
