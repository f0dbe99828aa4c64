package txn

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// sendPair is a pair whose B side posts receive WQEs on the connection A
// opens.
type sendPair struct {
	*pair
	cb *Conn // B's handle of the connection
}

func newSendPair(t testing.TB, seed uint64, profile string, tweak func(a, b *Options)) *sendPair {
	return newSendPairOn(t, nil, seed, profile, tweak)
}

// newSendPairOn builds the pair on pool (nil: its own, checked and closed
// at cleanup; else the caller calls close).
func newSendPairOn(t testing.TB, pool *mbuf.Pool, seed uint64, profile string, tweak func(a, b *Options)) *sendPair {
	t.Helper()
	sp := &sendPair{}
	build := newPair
	if pool != nil {
		build = func(t testing.TB, seed uint64, profile string, tw func(a, b *Options)) *pair {
			return newPairOn(t, pool, seed, profile, tw)
		}
	}
	sp.pair = build(t, seed, profile, func(a, b *Options) {
		b.OnConnEvent = func(ev ConnEvent) {
			if ev.Kind == ConnEstablished {
				sp.cb = ev.Conn
			}
		}
		if tweak != nil {
			tweak(a, b)
		}
	})
	return sp
}

// open opens A→B with the index cfg and runs until B knows the connection.
func (sp *sendPair) open(cfg dix.Config) *Conn {
	sp.t.Helper()
	return sp.openWith(ConnOptions{Index: cfg})
}

// openWith opens A→B with opts and runs until B knows the connection.
func (sp *sendPair) openWith(opts ConnOptions) *Conn {
	sp.t.Helper()
	c, err := sp.a.Open(sp.peerB(), opts)
	require.NoError(sp.t, err)
	sp.run(func() bool {
		return sp.cb != nil && c.Transport() != nil && c.Transport().State() == rt.StateEstablished
	}, 100*time.Millisecond)
	return c
}

func (sp *sendPair) recvs() []Completion {
	var out []Completion
	for _, c := range sp.cqB {
		if c.Kind == OpRecv {
			out = append(out, c)
		}
	}
	return out
}

func TestSendLandsInPostedWQEsInOrder(t *testing.T) {
	for _, cfg := range []dix.Config{
		{},
		{Kind: dix.FreeRunning, Width: 8},
		{Kind: dix.Relative, Width: 8, Carry: dix.CarryUntilAcked},
		{Kind: dix.Absolute, Width: 16, Depth: 128, Where: dix.InExtension},
	} {
		t.Run(cfg.Kind.String(), func(t *testing.T) {
			sp := newSendPair(t, 7, "paths=4,spread=30us,delay=10us", func(a, b *Options) {
				a.Segment, b.Segment = 1024, 1024
				b.RecvDepth, b.HoldBytes = 128, 1<<20
			})
			c := sp.open(cfg)
			const n = 40
			src := pattern(1, n*8192)
			ra, err := sp.a.Register(src, 0)
			require.NoError(t, err)
			dst := make([]byte, n*8192+64)
			rb, err := sp.b.Register(dst, RemoteWrite)
			require.NoError(t, err)
			for k := range n {
				_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * 8192), Len: 8192, WRID: uint64(100 + k)})
				require.NoError(t, err)
			}
			sizes := make([]int, n)
			for k := range n {
				sizes[k] = 1 + (k*2654435761)%8192
				_, err := c.Send(Op{Local: ra, LocalAddr: uint64(k * 8192), Len: sizes[k], Tag: uint64(k)})
				require.NoError(t, err)
			}
			sp.run(func() bool { return len(sp.recvs()) == n && len(sp.cqA) == n }, time.Second)
			for _, cp := range sp.cqA {
				require.Equal(t, StatusOK, cp.Status, "send %d", cp.Tag)
				require.Equal(t, OpSend, cp.Kind)
			}
			seen := map[uint32]bool{}
			for _, cp := range sp.recvs() {
				require.Equal(t, StatusOK, cp.Status)
				k := int(cp.WQE)
				require.False(t, seen[cp.WQE], "WQE %d completed twice", k)
				seen[cp.WQE] = true
				require.Equal(t, uint64(100+k), cp.Tag)
				require.Equal(t, sizes[k], cp.Bytes)
				require.True(t, bytes.Equal(src[k*8192:k*8192+sizes[k]], dst[k*8192:k*8192+sizes[k]]), "WQE %d bytes", k)
			}
			st := sp.b.SendStats()
			require.Equal(t, uint64(n), st.RecvCompleted)
			require.Zero(t, st.Forged+st.Stale)
			if cfg.Kind == dix.None {
				require.Zero(t, st.BindsElement)
				require.Equal(t, st.Held, st.PlacedHeld, "every held packet placed once")
				require.GreaterOrEqual(t, st.BytesCopied, st.BytesPlaced)
				require.Zero(t, st.HeldBytes)
			} else {
				require.Zero(t, st.Held)
				require.Equal(t, st.BytesPlaced, st.BytesCopied, "one copy per byte")
			}
		})
	}
}

func TestSendRNRThenLatePost(t *testing.T) {
	sp := newSendPair(t, 8, "", func(a, b *Options) {
		a.Transport.RNRTimeout = 50 * time.Microsecond
		b.Transport.RNRTimeout = 50 * time.Microsecond
	})
	c := sp.open(dix.Config{Kind: dix.FreeRunning, Width: 16})
	src := pattern(2, 3000)
	ra, _ := sp.a.Register(src, 0)
	dst := make([]byte, 4096)
	rb, _ := sp.b.Register(dst, RemoteWrite)
	_, err := c.Send(Op{Local: ra, Len: 3000, Tag: 1})
	require.NoError(t, err)
	sp.run(func() bool { return sp.a.SendStats().RNRReceived > 0 }, 10*time.Millisecond)
	_, err = sp.cb.PostRecv(RecvWR{Local: rb, Len: 4096, WRID: 9})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.recvs()) == 1 && len(sp.cqA) == 1 }, 100*time.Millisecond)
	require.Equal(t, StatusOK, sp.cqA[0].Status)
	require.Equal(t, StatusOK, sp.recvs()[0].Status)
	require.Equal(t, src, dst[:3000])
	require.NotZero(t, sp.b.SendStats().RNRSent)
}

func TestSendRNRRetryExceededConsumesItsWQE(t *testing.T) {
	sp := newSendPair(t, 9, "", func(a, b *Options) {
		a.Transport.RNRTimeout = 20 * time.Microsecond
		b.Transport.RNRTimeout = 20 * time.Microsecond
		a.Transport.RetryLimit, b.Transport.RetryLimit = 3, 3
	})
	c := sp.open(dix.Config{Kind: dix.FreeRunning, Width: 8})
	src := pattern(3, 2000)
	ra, _ := sp.a.Register(src, 0)
	dst := make([]byte, 8192)
	rb, _ := sp.b.Register(dst, RemoteWrite)
	_, err := c.Send(Op{Local: ra, Len: 1000, Tag: 1})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.cqA) == 1 }, 100*time.Millisecond)
	require.Equal(t, StatusRNRRetryExceeded, sp.cqA[0].Status)
	require.NotZero(t, sp.a.SendStats().RNRExceeded)
	// WQE 0 belonged to the abandoned Send: it is consumed in error when
	// posted; the next Send takes WQE 1.
	sp.run(func() bool { return sp.b.SendStats().NoticesApplied == 1 }, 100*time.Millisecond)
	_, err = sp.cb.PostRecv(RecvWR{Local: rb, Len: 4096, WRID: 10})
	require.NoError(t, err)
	_, err = sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: 4096, Len: 4096, WRID: 11})
	require.NoError(t, err)
	_, err = c.Send(Op{Local: ra, LocalAddr: 1000, Len: 1000, Tag: 2})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.recvs()) == 2 && len(sp.cqA) == 2 }, 100*time.Millisecond)
	r := sp.recvs()
	require.Equal(t, StatusRemoteAbandoned, r[0].Status)
	require.Equal(t, uint64(10), r[0].Tag)
	require.Equal(t, StatusOK, r[1].Status)
	require.Equal(t, uint64(11), r[1].Tag)
	require.Equal(t, src[1000:2000], dst[4096:5096])
}

func TestSendLongerThanWQE(t *testing.T) {
	sp := newSendPair(t, 10, "", func(a, b *Options) { a.Segment, b.Segment = 512, 512 })
	c := sp.open(dix.Config{Kind: dix.FreeRunning, Width: 32})
	src := pattern(4, 4000)
	ra, _ := sp.a.Register(src, 0)
	dst := make([]byte, 2048)
	for i := range dst {
		dst[i] = 0xee
	}
	rb, _ := sp.b.Register(dst, RemoteWrite)
	_, err := sp.cb.PostRecv(RecvWR{Local: rb, Len: 1024, WRID: 5})
	require.NoError(t, err)
	_, err = c.Send(Op{Local: ra, Len: 4000, Tag: 1})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.recvs()) == 1 && len(sp.cqA) == 1 }, 100*time.Millisecond)
	require.Equal(t, StatusRemoteInvalid, sp.cqA[0].Status)
	require.Equal(t, StatusLocalLength, sp.recvs()[0].Status)
	for i, b := range dst {
		require.Equal(t, byte(0xee), b, "byte %d written", i)
	}
}

func TestSendIndexConfigRefused(t *testing.T) {
	sp := newSendPair(t, 11, "", nil)
	_, err := sp.a.Open(sp.peerB(), ConnOptions{Index: dix.Config{Kind: dix.Relative, Width: 32}})
	require.ErrorIs(t, err, dix.ErrConfig)
}

// Sends on an ordered connection, mixed with pushes, over a lossy,
// reordering fabric: every packet is still placed on arrival (by index,
// or held by the baseline), but the target's receive completions and push
// deliveries come in request order, and the initiator's completions in
// posting order.
func TestSendOnOrderedConnection(t *testing.T) {
	for _, cfg := range []dix.Config{{Kind: dix.FreeRunning, Width: 16}, {}, {Kind: dix.Relative, Width: 8, Carry: dix.CarryUntilAcked}} {
		t.Run(cfg.Kind.String(), func(t *testing.T) {
			var sp *sendPair
			type delivery struct {
				rsn   uint32
				recvs int // receive completions out before this push's delivery
			}
			var pushes []delivery
			sp = newSendPair(t, 21, "loss=2%,paths=4,spread=30us,delay=10us", func(a, b *Options) {
				a.Segment, b.Segment = 1024, 1024
				b.HoldBytes = 1 << 20
				b.OnRequest = func(r *Request) {
					pushes = append(pushes, delivery{r.RSN, len(sp.cqB) + sp.b.cq.size})
				}
			})
			c, err := sp.a.Open(sp.peerB(), ConnOptions{Ordered: true, Index: cfg})
			require.NoError(t, err)
			sp.run(func() bool {
				return sp.cb != nil && c.Transport() != nil && c.Transport().State() == rt.StateEstablished
			}, 100*time.Millisecond)
			const n, slot = 60, 6000
			src := pattern(9, n*slot)
			ra, err := sp.a.Register(src, 0)
			require.NoError(t, err)
			dst := make([]byte, n*slot)
			rb, err := sp.b.Register(dst, RemoteWrite)
			require.NoError(t, err)
			pushed, err := sp.b.Register(make([]byte, n*slot), RemoteWrite)
			require.NoError(t, err)
			for k := range n {
				_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * slot), Len: slot, WRID: uint64(k)})
				require.NoError(t, err)
			}
			isSend := make(map[uint32]int) // RSN -> the Send's number
			sends := 0
			for i := range n {
				size := 1 + (i*2654435761)%slot
				op := Op{Local: ra, LocalAddr: uint64(i * slot), Len: size, Tag: uint64(i)}
				if i%3 == 2 {
					op.Remote = wire.RegionRef{Key: pushed.Key, Addr: uint64(i * slot)}
					_, err := c.Push(op)
					require.NoError(t, err)
					continue
				}
				rsn, err := c.Send(op)
				require.NoError(t, err)
				isSend[rsn] = i
				sends++
			}
			sp.run(func() bool { return len(sp.cqA) == n && len(sp.recvs()) == sends }, time.Second)
			for j, cp := range sp.cqA {
				require.Equal(t, StatusOK, cp.Status, "op %d", cp.Tag)
				require.Equal(t, uint64(j), cp.Tag, "initiator completions in posting order")
			}
			var last uint32
			for j, cp := range sp.recvs() {
				require.Equal(t, StatusOK, cp.Status)
				require.Equal(t, uint32(j), cp.WQE-sp.recvs()[0].WQE, "receive completions in WQE order")
				if j > 0 {
					require.True(t, seqLT(last, cp.RSN), "receive completions in RSN order")
				}
				last = cp.RSN
				i := isSend[cp.RSN]
				size := 1 + (i*2654435761)%slot
				require.Equal(t, size, cp.Bytes)
				require.True(t, bytes.Equal(src[i*slot:i*slot+size], dst[j*slot:j*slot+size]), "WQE %d holds Send %d", j, i)
			}
			require.Len(t, pushes, n-sends)
			for _, p := range pushes {
				before := 0
				for rsn := range isSend {
					if seqLT(rsn, p.rsn) {
						before++
					}
				}
				require.Equal(t, before, p.recvs, "push RSN %d delivered after exactly the Sends before it", p.rsn)
			}
			st := sp.b.SendStats()
			require.Zero(t, st.Forged+st.HeldBytes)
			t.Logf("%v: %d Sends bound through elements, %d packets held, %d placed directly", cfg.Kind, st.BindsElement, st.Held, st.PlacedDirect)
		})
	}
}

// An absolute index counts modulo the receive queue's depth, configured at
// each end (ConnOptions.Index.Depth, Options.RecvDepth). Every packet
// carries the sender's depth; a target whose queue has another depth
// refuses it: the Sends fail with a refusal that names the mismatch, no
// receive WQE completes, nothing is written, and the target counts it.
func TestSendAbsoluteDepthMismatch(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sender, recvr int
		where         dix.Where
		carry         dix.Carry
	}{
		{"smaller-in-header", 64, 128, dix.InHeader, dix.CarryEvery},
		{"larger-in-extension", 256, 128, dix.InExtension, dix.CarryUntilAcked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newSendPair(t, 12, "paths=2,spread=20us", func(a, b *Options) {
				a.Segment, b.Segment = 1024, 1024
				b.RecvDepth = tc.recvr
			})
			c := sp.open(dix.Config{Kind: dix.Absolute, Width: 16, Depth: tc.sender, Where: tc.where, Carry: tc.carry})
			const n, slot = 6, 4096
			src := pattern(5, n*slot)
			ra, err := sp.a.Register(src, 0)
			require.NoError(t, err)
			dst := make([]byte, n*slot)
			for i := range dst {
				dst[i] = 0xee
			}
			rb, err := sp.b.Register(dst, RemoteWrite)
			require.NoError(t, err)
			for k := range n {
				_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * slot), Len: slot, WRID: uint64(k)})
				require.NoError(t, err)
			}
			for k := range n {
				_, err := c.Send(Op{Local: ra, LocalAddr: uint64(k * slot), Len: 500 + k*700, Tag: uint64(k)})
				require.NoError(t, err)
			}
			sp.run(func() bool { return len(sp.cqA) == n }, 100*time.Millisecond)
			for _, cp := range sp.cqA {
				require.Equal(t, StatusRemoteInvalid, cp.Status, "send %d", cp.Tag)
				require.Equal(t, RefusalIndexMismatch, cp.Refusal, "send %d", cp.Tag)
				require.Contains(t, cp.Refusal.String(), "RecvDepth")
			}
			require.Empty(t, sp.recvs(), "no WQE completes")
			for i, b := range dst {
				require.Equal(t, byte(0xee), b, "byte %d of the WQEs written", i)
			}
			st := sp.b.SendStats()
			require.NotZero(t, st.IndexMismatch)
			require.Zero(t, st.BytesPlaced+st.BytesCopied+st.BindsDirect+st.BindsElement)
		})
	}
}

// On an ordered connection a failed Send keeps its turn with a
// placeholder: the requests after it are delivered, in order, and do not
// wait for a Send that will never be placed (longer than its WQE, or an
// absolute index counted modulo another depth).
func TestSendFailureOnOrderedConnectionKeepsOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  dix.Config
		want Refusal
	}{
		{"too-long", dix.Config{Kind: dix.FreeRunning, Width: 16}, RefusalRecvTooSmall},
		{"depth-mismatch", dix.Config{Kind: dix.Absolute, Width: 16, Depth: 64}, RefusalIndexMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newSendPair(t, 22, "paths=2,spread=20us", func(a, b *Options) { a.Segment, b.Segment = 1024, 1024 })
			c := sp.openWith(ConnOptions{Ordered: true, Index: tc.cfg})
			src := pattern(11, 16384)
			ra, _ := sp.a.Register(src, 0)
			dst := make([]byte, 16384)
			rb, _ := sp.b.Register(dst, RemoteWrite)
			for k := range 2 {
				_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * 4096), Len: 2048, WRID: uint64(k)})
				require.NoError(t, err)
			}
			push := func(tag uint64) uint32 {
				rsn, err := c.Push(Op{Local: ra, Len: 3000, Remote: wire.RegionRef{Key: rb.Key, Addr: 8192}, Tag: tag})
				require.NoError(t, err)
				return rsn
			}
			p0 := push(0)
			_, err := c.Send(Op{Local: ra, Len: 4000, Tag: 1}) // too long for a 2 KiB WQE (or the wrong depth)
			require.NoError(t, err)
			p2 := push(2)
			_, err = c.Send(Op{Local: ra, LocalAddr: 100, Len: 1500, Tag: 3})
			require.NoError(t, err)
			p4 := push(4)
			sp.run(func() bool { return len(sp.cqA) == 5 }, 100*time.Millisecond)
			for j, cp := range sp.cqA {
				require.Equal(t, uint64(j), cp.Tag, "posting order")
				switch {
				case j == 1 || j == 3 && tc.want == RefusalIndexMismatch:
					require.Equal(t, StatusRemoteInvalid, cp.Status, "op %d", j)
					require.Equal(t, tc.want, cp.Refusal)
				default:
					require.Equal(t, StatusOK, cp.Status, "op %d", j)
				}
			}
			var got []uint32
			for _, r := range sp.reqB {
				got = append(got, r.RSN)
			}
			require.Equal(t, []uint32{p0, p2, p4}, got, "every push delivered, in order")
			if tc.want == RefusalRecvTooSmall {
				r := sp.recvs()
				require.Len(t, r, 2)
				require.Equal(t, StatusLocalLength, r[0].Status)
				require.Equal(t, StatusOK, r[1].Status)
				require.Equal(t, src[100:1600], dst[4096:4096+1500])
			} else {
				require.Empty(t, sp.recvs())
				require.NotZero(t, sp.b.SendStats().IndexMismatch)
			}
		})
	}
}
