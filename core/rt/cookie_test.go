package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestAckHandlerReportsEveryCookieOnce(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	acked := map[uint64]int{}
	setAcked(h.a, func(c *Conn, w wire.Window, psn uint32, cookie uint64) {
		require.Same(t, ca, c)
		acked[cookie]++
	})
	for i := range 40 {
		typ := wire.TypePushUnsolicitedData
		if i%2 == 1 {
			typ = wire.TypePushSolicitedData
		}
		for {
			_, err := ca.Send(SendHeader{Type: typ, Cookie: uint64(1000 + i)}, payload(uint64(i), 16))
			if err == nil {
				break
			}
			require.ErrorIs(t, err, ErrBusy)
			h.poll()
		}
	}
	h.run(func() bool { return len(h.gotB) == 40 && h.quiet() }, time.Second)
	require.Len(t, acked, 40)
	for i := range 40 {
		require.Equal(t, 1, acked[uint64(1000+i)], "cookie %d", 1000+i)
	}
}

func TestULPErrorNacksOnceAndResyncs(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	acked := map[uint64]bool{}
	setAcked(h.a, func(_ *Conn, _ wire.Window, _ uint32, cookie uint64) { acked[cookie] = true })
	setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
		if hd.RSN%3 == 1 {
			if hd.RSN == 1 {
				return ULPError // code 0
			}
			return ULPErrorCode(uint8(hd.RSN)) // the ULP's own reason
		}
		h.gotB = append(h.gotB, record(c, hd, p))
		return Accept
	})
	for i := range 12 {
		_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i), Cookie: uint64(i)}, payload(uint64(i), 8))
		require.NoError(t, err)
	}
	h.run(func() bool { return len(h.gotB) == 8 && h.quiet() }, time.Second)

	nacks := eventsOf(h.evA, EventNack)
	got := map[uint64]int{}
	for _, ev := range nacks {
		require.True(t, ev.HasCookie)
		require.Equal(t, wire.NackULPError, ev.Nack.Code)
		if ev.Cookie != 1 {
			require.Equal(t, uint8(ev.Cookie), ev.Nack.ULPCode, "the ULP's code reaches the sender")
		} else {
			require.Zero(t, ev.Nack.ULPCode)
		}
		got[ev.Cookie]++
	}
	require.Equal(t, map[uint64]int{1: 1, 4: 1, 7: 1, 10: 1}, got, "each refused packet reported once")
	for i := range uint64(12) {
		require.Equal(t, i%3 != 1, acked[i], "cookie %d acked", i)
	}
	require.Empty(t, eventsOf(h.evA, EventAbandoned))
	require.Equal(t, uint64(4), h.b.Stats().RxResync, "a resync stood in for each refused packet")
	require.Equal(t, StateEstablished, ca.State())
	require.Zero(t, h.a.Stats().Internal)
}
