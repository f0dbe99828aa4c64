package xsk

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fakeRing is a ring on the Go heap, with the test playing the kernel.
func fakeAddrRing(size uint32, producer bool) (*AddrRing, *uint32, *uint32) {
	var prod, cons, flags uint32
	r := &AddrRing{
		ring:  ring{producer: &prod, consumer: &cons, flags: &flags, mask: size - 1, size: size},
		addrs: make([]uint64, size),
	}
	if producer {
		r.initProducer()
	} else {
		r.initConsumer()
	}
	return r, &prod, &cons
}

func TestProducerRingWraps(t *testing.T) {
	r, prod, cons := fakeAddrRing(8, true)
	require.Equal(t, uint32(8), r.Free(1), "an empty ring is all free")
	next := uint64(0)
	seen := uint32(0)
	for round := range 20 {
		n := r.Free(3)
		require.GreaterOrEqual(t, n, uint32(3), "round %d", round)
		idx := r.ProdIndex()
		for i := range uint32(3) {
			r.Set(idx+i, next)
			next++
		}
		r.Submit(3)
		require.Equal(t, r.ProdIndex(), *prod, "Submit publishes the producer index")
		// The "kernel" consumes everything published, checking order.
		for ; seen < *prod; seen++ {
			require.Equal(t, uint64(seen), r.addrs[seen&r.mask])
		}
		*cons = seen
	}
}

func TestProducerRingFull(t *testing.T) {
	r, _, cons := fakeAddrRing(8, true)
	r.Submit(8)
	require.Zero(t, r.Free(1), "exactly full")
	require.Equal(t, uint32(8), r.Pending())
	*cons = 5
	require.Equal(t, uint32(5), r.Free(1), "the consumer index is re-read when the cached view is short")
	require.Equal(t, uint32(3), r.Pending())
}

func TestConsumerRing(t *testing.T) {
	r, prod, cons := fakeAddrRing(8, false)
	require.Zero(t, r.Avail(4), "exactly empty")
	for i := range uint64(6) {
		r.addrs[i] = 100 + i
	}
	*prod = 6
	require.Equal(t, uint32(4), r.Avail(4), "capped at want")
	idx := r.ConsIndex()
	for i := range uint32(4) {
		require.Equal(t, uint64(100+i), r.Get(idx+i))
	}
	r.Release(4)
	require.Equal(t, uint32(4), *cons, "Release publishes the consumer index")
	require.Equal(t, uint32(2), r.Avail(8))
	r.Release(2)
	// Wrap: the producer index runs past the ring size.
	for i := uint32(6); i < 14; i++ {
		r.addrs[i&r.mask] = uint64(i)
	}
	*prod = 14
	require.Equal(t, uint32(8), r.Avail(16), "exactly full")
	for i := range uint32(8) {
		require.Equal(t, uint64(6+i), r.Get(r.ConsIndex()+i))
	}
	r.Release(8)
	require.Zero(t, r.Avail(1))
}

func TestNeedWakeup(t *testing.T) {
	r, _, _ := fakeAddrRing(8, true)
	require.False(t, r.NeedWakeup())
	*r.flags = unix.XDP_RING_NEED_WAKEUP
	require.True(t, r.NeedWakeup())
}

func TestParseXDPAttr(t *testing.T) {
	attr := func(typ uint16, v []byte) []byte {
		b := make([]byte, 4, 8+len(v))
		binary.NativeEndian.PutUint16(b[0:], uint16(4+len(v)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	id := binary.NativeEndian.AppendUint32(nil, 42)
	b := append(attr(unix.IFLA_XDP_ATTACHED, []byte{XDPAttachedDrv}), attr(unix.IFLA_XDP_PROG_ID, id)...)
	mode, prog := parseXDPAttr(b)
	require.Equal(t, uint8(XDPAttachedDrv), mode)
	require.Equal(t, uint32(42), prog)
	mode, prog = parseXDPAttr(attr(unix.IFLA_XDP_ATTACHED, []byte{XDPAttachedNone}))
	require.Zero(t, mode)
	require.Zero(t, prog)
	mode, prog = parseXDPAttr([]byte{200, 0, 1, 0}) // length beyond the buffer
	require.Zero(t, mode)
	require.Zero(t, prog)
}

func TestLinksListsLoopback(t *testing.T) {
	links, err := Links()
	require.NoError(t, err)
	for _, l := range links {
		if l.Name == "lo" {
			require.Positive(t, l.Index)
			require.Positive(t, l.MTU)
			require.Positive(t, l.Queues)
			return
		}
	}
	t.Fatalf("no lo among %d links", len(links))
}
