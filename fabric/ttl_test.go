package fabric

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

func ttlFrame(t *testing.T, src, dst string, ttl uint8) []byte {
	t.Helper()
	b := make([]byte, 256)
	a := wire.Addrs{SrcIP: netip.MustParseAddr(src), DstIP: netip.MustParseAddr(dst), TTL: ttl}
	n, err := wire.EncodeFrame(b, &a, &wire.Header{Version: wire.Version, DestCID: 7, Type: wire.TypePushUnsolicitedData}, []byte("payload"))
	require.NoError(t, err)
	return b[:n]
}

func TestLowerTTL(t *testing.T) {
	for _, c := range []struct{ src, dst string }{{"198.18.0.1", "198.18.0.2"}, {"2001:db8::1", "2001:db8::2"}} {
		for _, ttl := range []uint8{255, 64, 4, 1} {
			frame := ttlFrame(t, c.src, c.dst, ttl)
			ok := lowerTTL(frame, 3)
			require.Equal(t, ttl > 3, ok, "%s ttl %d: a router drops what it cannot forward", c.src, ttl)
			if !ok {
				continue
			}
			var f wire.Frame
			require.NoError(t, f.Decode(frame), "%s ttl %d: checksums still hold", c.src, ttl)
			require.Equal(t, ttl-3, f.Addrs.TTL)
		}
	}

	// Not IP, or too short to be: untouched.
	arp := make([]byte, 42)
	arp[12], arp[13], arp[22] = 0x08, 0x06, 1
	require.True(t, lowerTTL(arp, 3))
	require.Equal(t, byte(1), arp[22])
	require.True(t, lowerTTL(make([]byte, 20), 3))
	short6 := ttlFrame(t, "2001:db8::1", "2001:db8::2", 64)[:ethHeaderLen+30]
	require.True(t, lowerTTL(short6, 3))
}

// Every frame crosses Hops routers: it arrives with its TTL lowered by Hops
// and intact checksums, and frames with too little TTL are counted as
// expired, not lost.
func TestHopsLowerTTLAndExpire(t *testing.T) {
	pool := newPool(t, 1024)
	s := newSim(t, pool, Options{AtoB: Profile{Hops: 5}})
	var ttls []uint8
	s.onFrame = func(_ arrival, data []byte) {
		var f wire.Frame
		require.NoError(t, f.Decode(data))
		ttls = append(ttls, f.Addrs.TTL)
	}
	for i, ttl := range []uint8{64, 6, 5, 1, 128} {
		hs := make([]mbuf.Handle, 1)
		require.Equal(t, 1, pool.AllocBulk(hs))
		h := hs[0]
		frame := ttlFrame(t, "198.18.0.1", "198.18.0.2", ttl)
		copy(pool.Append(h, len(frame)), frame)
		s.advance(clock.Time(i) * us)
		require.Equal(t, 1, s.a.TxBurst(0, []mbuf.Handle{h}))
		s.pollAt(clock.Time(i) * us)
	}
	s.finish()
	require.Equal(t, []uint8{59, 1, 123}, ttls)
	st := s.f.Stats().AtoB
	require.EqualValues(t, 2, st.TTLExpired)
	require.EqualValues(t, 3, st.Sent)
	requireBalanced(t, st)
	require.Zero(t, pool.InUse())
}
