package fwd

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

type rig struct {
	pool              *mbuf.Pool
	inTx, inRx        *mem.Port // frames are sent on inTx, the forwarder reads inRx
	outTx, outRx      *mem.Port // the forwarder writes outTx, the test reads outRx
	src, dst, payload []byte
}

func newRig(t *testing.T, ringSize int) *rig {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: "fwd", Frames: 1024, CacheSize: 64, Debug: true})
	require.NoError(t, err)
	r := &rig{pool: pool}
	r.inTx, r.inRx, err = mem.NewPair(pool, mem.PairOptions{Name: "in", Size: ringSize})
	require.NoError(t, err)
	r.outTx, r.outRx, err = mem.NewPair(pool, mem.PairOptions{Name: "out", Size: ringSize})
	require.NoError(t, err)
	r.dst = []byte{0x02, 0xdd, 0, 0, 0, 1}
	r.src = []byte{0x02, 0x55, 0, 0, 0, 2}
	r.payload = []byte("0123456789abcdef")
	t.Cleanup(func() {
		for _, p := range []*mem.Port{r.inTx, r.inRx, r.outTx, r.outRx} {
			require.NoError(t, p.Close())
		}
		require.NoError(t, pool.CheckLeaks())
	})
	return r
}

// send puts n frames (dst, src, payload with its index) on the input link.
func (r *rig) send(t *testing.T, n int) {
	t.Helper()
	hs := make([]mbuf.Handle, n)
	require.Equal(t, n, r.pool.AllocBulk(hs))
	for i, h := range hs {
		d := r.pool.Append(h, 12+len(r.payload)+1)
		copy(d, r.dst)
		copy(d[6:], r.src)
		copy(d[12:], r.payload)
		d[len(d)-1] = byte(i)
	}
	require.Equal(t, n, r.inTx.TxBurst(0, hs))
}

// receive drains the output link, returning copies of the frames.
func (r *rig) receive() [][]byte {
	var out [][]byte
	hs := make([]mbuf.Handle, 64)
	for {
		n := r.outRx.RxBurst(0, hs)
		if n == 0 {
			return out
		}
		for _, h := range hs[:n] {
			out = append(out, append([]byte(nil), r.pool.Data(h)...))
		}
		r.pool.Free(hs[:n])
	}
}

func TestModesRewriteAsTestpmd(t *testing.T) {
	peer := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 9}
	for _, mode := range []Mode{ModeIO, ModeMAC, ModeMACSwap} {
		t.Run(mode.String(), func(t *testing.T) {
			r := newRig(t, 64)
			f, err := New(Options{Mode: mode, In: r.inRx, Out: r.outTx, Pool: r.pool, PeerMAC: peer})
			require.NoError(t, err)
			r.send(t, 10)
			require.Equal(t, 10, f.Poll(0))
			f.Stop(0)
			got := r.receive()
			require.Len(t, got, 10)
			for i, frame := range got {
				wantDst, wantSrc := r.dst, r.src
				switch mode {
				case ModeMAC:
					wantDst, wantSrc = peer, r.outTx.Info().MAC
				case ModeMACSwap:
					wantDst, wantSrc = r.src, r.dst
				}
				require.Equal(t, []byte(wantDst), frame[0:6], "frame %d dst", i)
				require.Equal(t, []byte(wantSrc), frame[6:12], "frame %d src", i)
				require.Equal(t, r.payload, frame[12:12+len(r.payload)], "frame %d payload", i)
				require.Equal(t, byte(i), frame[len(frame)-1], "frame %d order", i)
			}
			require.Equal(t, Stats{Rx: 10, Tx: 10}, f.Stats())
		})
	}
}

func TestRxOnlyFreesEverything(t *testing.T) {
	r := newRig(t, 64)
	f, err := New(Options{Mode: ModeRxOnly, In: r.inRx, Pool: r.pool})
	require.NoError(t, err)
	r.send(t, 40)
	require.Equal(t, 32, f.Poll(0))
	require.Equal(t, 8, f.Poll(0))
	require.Zero(t, f.Poll(0))
	f.Stop(0)
	require.Zero(t, r.pool.InUse())
	require.Equal(t, Stats{Rx: 40}, f.Stats())
}

func TestFullOutputDropOrRetry(t *testing.T) {
	t.Run("drop frees and counts", func(t *testing.T) {
		r := newRig(t, 16)
		f, err := New(Options{Mode: ModeIO, In: r.inRx, Out: r.outTx, Pool: r.pool})
		require.NoError(t, err)
		r.send(t, 16)
		f.Poll(0)
		r.send(t, 16)
		f.Poll(0) // output ring already holds 16: all 16 refused
		f.Stop(0)
		require.Equal(t, Stats{Rx: 32, Tx: 16, Dropped: 16, Short: 1}, f.Stats())
		require.Len(t, r.receive(), 16)
	})
	t.Run("retry keeps order and loses nothing", func(t *testing.T) {
		r := newRig(t, 16)
		f, err := New(Options{Mode: ModeIO, In: r.inRx, Out: r.outTx, Pool: r.pool, OnFull: FullRetry, Burst: 12})
		require.NoError(t, err)
		// Occupy 10 of the output ring's 16 slots so the first burst of 12
		// is taken only in part.
		filler := make([]mbuf.Handle, 10)
		require.Equal(t, 10, r.pool.AllocBulk(filler))
		require.Equal(t, 10, r.outTx.TxBurst(0, filler))
		r.send(t, 16)

		require.Equal(t, 12, f.Poll(0), "received 12, sent 6, holds 6")
		require.Zero(t, f.Poll(0), "output still full: nothing new is received")
		require.Len(t, r.receive(), 16, "filler plus the first 6")
		f.Poll(0) // the held 6
		f.Poll(0) // the last 4
		got := r.receive()
		require.Len(t, got, 10)
		for i, frame := range got {
			require.Equal(t, byte(6+i), frame[len(frame)-1], "order after retry")
		}
		f.Stop(0)
		require.Equal(t, Stats{Rx: 16, Tx: 16, Short: 1}, f.Stats())
	})
}

func TestPollDoesNotAllocate(t *testing.T) {
	r := newRig(t, 64)
	f, err := New(Options{Mode: ModeMACSwap, In: r.inRx, Out: r.outTx, Pool: r.pool})
	require.NoError(t, err)
	hs := make([]mbuf.Handle, 32)
	require.Equal(t, 32, r.pool.AllocBulk(hs))
	for _, h := range hs {
		r.pool.Append(h, 64)
	}
	back := make([]mbuf.Handle, 32)
	allocs := testing.AllocsPerRun(200, func() {
		r.inTx.TxBurst(0, hs)
		f.Poll(0)
		r.outRx.RxBurst(0, back)
		copy(hs, back)
	})
	require.Zero(t, allocs)
	r.pool.Free(hs)
	f.Stop(0)
}

func TestOptionErrors(t *testing.T) {
	r := newRig(t, 16)
	_, err := ParseMode("flood")
	require.ErrorContains(t, err, "io, mac, macswap, rxonly")
	_, err = New(Options{Mode: ModeIO, In: r.inRx, Pool: r.pool})
	require.ErrorContains(t, err, "Out")
	_, err = New(Options{Mode: ModeIO, In: r.inRx, Out: r.outTx, Pool: r.pool, Burst: 999})
	require.ErrorContains(t, err, "burst 999")
	_, err = New(Options{Mode: ModeIO, In: r.inRx, Out: r.outTx, Pool: r.pool, OutQueue: 3})
	require.ErrorContains(t, err, "output queue 3 out of range")
	_, err = New(Options{Mode: ModeMAC, In: r.inRx, Out: r.outTx, Pool: r.pool})
	require.ErrorContains(t, err, "PeerMAC")
}

func TestSharedCacheReceivesDroppedFrames(t *testing.T) {
	r := newRig(t, 64)
	loopCache := r.pool.NewCache()
	defer loopCache.Close()
	f, err := New(Options{Mode: ModeRxOnly, In: r.inRx, Pool: r.pool, Cache: loopCache})
	require.NoError(t, err)
	r.send(t, 20)
	require.Equal(t, 20, f.Poll(0))
	require.Equal(t, 20, loopCache.Len(), "rxonly freed into the loop's cache, not a private one")
	f.Stop(0)
}
