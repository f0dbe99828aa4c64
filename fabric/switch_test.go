package fabric

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// sendTo makes n test frames of size bytes addressed to dst and sends them
// from station port i.
func sendTo(t *testing.T, pool *mbuf.Pool, s *Switch, i int, dst netip.Addr, n, size int) {
	t.Helper()
	hs := make([]mbuf.Handle, n)
	require.Equal(t, n, pool.AllocBulk(hs))
	for k, h := range hs {
		b := pool.Append(h, size)
		writeFrame(b, uint32(k), uint16(i))
		d := dst.As4()
		copy(b[ethHeaderLen+16:], d[:])
	}
	require.Equal(t, n, s.Port(i).TxBurst(0, hs))
}

// TestSwitchIncast: two stations send to a third at once; its egress port
// serialises them at its rate and tail-drops what its queue cannot hold,
// and every frame is accounted for.
func TestSwitchIncast(t *testing.T) {
	pool := newPool(t, 1024)
	ips := []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.3")}
	const rate = 1_000_000_000 // 1 Gbit/s: a 1000-byte frame (+24) takes 8192 ns
	s, err := NewSwitch(pool, SwitchOptions{IPs: ips, Rate: rate, QueueFrames: 16, Delay: time.Microsecond})
	require.NoError(t, err)
	sendTo(t, pool, s, 0, ips[2], 20, 1000)
	sendTo(t, pool, s, 1, ips[2], 20, 1000)
	sendTo(t, pool, s, 0, netip.MustParseAddr("198.18.9.9"), 1, 100)
	now := clock.Time(1_000_000)
	s.Poll(now)
	st := s.PortStats(2)
	require.Equal(t, uint64(24), st.QueueFull, "40 frames, 16 queued")
	require.Equal(t, uint64(1), s.PortStats(0).Unknown)
	require.Equal(t, uint64(16), st.MaxQueue)
	// One frame leaves per 8192 ns after the 1 µs delay.
	buf := make([]mbuf.Handle, 64)
	var got []clock.Time
	for at := now; len(got) < 16 && at < now+clock.Time(time.Millisecond); at += 1000 {
		s.Poll(at)
		n := s.Port(2).RxBurst(0, buf)
		for range n {
			got = append(got, at)
		}
		pool.Free(buf[:n])
	}
	require.Len(t, got, 16)
	require.InDelta(t, float64(8192+1000), float64(got[0]-now), 1000)
	require.InDelta(t, float64(15*8192), float64(got[15]-got[0]), 2000)
	tot := s.Stats()
	require.Equal(t, uint64(41), tot.Rx)
	require.Equal(t, uint64(16), tot.Tx)
	s.Stop(now)
	require.NoError(t, s.Close())
	for i := range 3 {
		require.NoError(t, s.Port(i).Close())
	}
}

func TestSwitchOptionsErrors(t *testing.T) {
	pool := newPool(t, 64)
	_, err := NewSwitch(pool, SwitchOptions{IPs: []netip.Addr{netip.MustParseAddr("198.18.0.1")}})
	require.ErrorIs(t, err, ErrInvalidOptions)
	a := netip.MustParseAddr("198.18.0.1")
	_, err = NewSwitch(pool, SwitchOptions{IPs: []netip.Addr{a, a}})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorContains(t, err, "given twice")
}
