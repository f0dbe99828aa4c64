package fabric

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/mem"
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

// TestSwitchOnCallersLinks: on ports the caller made (SwitchOptions.Ports)
// the switch routes by destination MAC before IP, Drop loses what it
// picks (Filtered), Observe sees the rest, Inject sends past the queue,
// and Close leaves the caller's ports open.
func TestSwitchOnCallersLinks(t *testing.T) {
	pool := newPool(t, 256)
	var stations, sides []port.Port
	for i := range 3 {
		a, b, err := mem.NewPair(pool, mem.PairOptions{Name: fmt.Sprintf("l%d", i), Size: 64})
		require.NoError(t, err)
		stations, sides = append(stations, a), append(sides, b)
	}
	ips := []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.3")}
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}}
	s, err := NewSwitch(pool, SwitchOptions{IPs: ips, MACs: macs, Ports: sides})
	require.NoError(t, err)
	require.Nil(t, s.Port(0))
	var seen []int
	s.Observe = func(from, to int, _ []byte) { seen = append(seen, to) }
	s.Drop = func(_, to int, _ []byte) bool { return to == 2 }
	send := func(from int, mac [6]byte, ip netip.Addr) {
		hs := make([]mbuf.Handle, 1)
		require.Equal(t, 1, pool.AllocBulk(hs))
		b := pool.Append(hs[0], 100)
		writeFrame(b, 0, uint16(from))
		copy(b[:6], mac[:])
		d := ip.As4()
		copy(b[ethHeaderLen+16:], d[:])
		require.Equal(t, 1, stations[from].TxBurst(0, hs))
	}
	send(0, macs[1], ips[2])                                              // MAC says 1, IP says 2: MAC wins
	send(0, [6]byte{2, 9, 9, 9, 9, 9}, ips[1])                            // unknown MAC: by IP
	send(1, macs[2], ips[2])                                              // to 2: dropped by Drop
	send(1, [6]byte{2, 9, 9, 9, 9, 9}, netip.MustParseAddr("198.18.9.9")) // nowhere
	s.Poll(clock.Time(1000))
	require.Equal(t, []int{1, 1}, seen)
	buf := make([]mbuf.Handle, 8)
	n := stations[1].RxBurst(0, buf)
	require.Equal(t, 2, n, "delivered in the Poll that took them (no rate, no delay)")
	pool.Free(buf[:n])
	st := s.Stats()
	require.Equal(t, uint64(4), st.Rx)
	require.Equal(t, uint64(2), st.Tx)
	require.Equal(t, uint64(1), st.Filtered)
	require.Equal(t, uint64(1), st.Unknown)
	require.True(t, s.Inject(0, make([]byte, 60)))
	require.Equal(t, uint64(1), s.Stats().Injected)
	require.Equal(t, 1, stations[0].RxBurst(0, buf))
	pool.Free(buf[:1])
	s.Stop(clock.Time(2000))
	require.NoError(t, s.Close())
	for i := range 3 {
		require.NoError(t, stations[i].Close())
		require.NoError(t, sides[i].Close(), "the caller's port was still open")
	}
	require.Zero(t, pool.InUse())
}
