package txn

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// injectPort hands its endpoint the frames a test queued before those
// that came through the port.
type injectPort struct {
	port.Port
	pool *mbuf.Pool
	q    [][]byte
}

func (p *injectPort) RxBurst(q int, hs []mbuf.Handle) int {
	n := 0
	for len(p.q) > 0 && n < len(hs) {
		h := make([]mbuf.Handle, 1)
		if p.pool.AllocBulk(h) != 1 {
			break
		}
		copy(p.pool.Append(h[0], len(p.q[0])), p.q[0])
		hs[n] = h[0]
		n++
		p.q = p.q[1:]
	}
	return n + p.Port.RxBurst(q, hs[n:])
}

// TestNackNamesItsPacket: a forged request with the live CID, the
// initiator's address and its next PSN reaches the target first and is
// refused there (its region is no region); the refusal reaches the
// initiator just after its own request with that PSN left. The NACK names
// the PSN, not the packet: the initiator must not take it for a refusal of
// its own request, which the target serves. Over pulls and pushes, and a
// forged request that the target refuses for want of memory access.
func TestNackNamesItsPacket(t *testing.T) {
	for _, kind := range []OpKind{OpPull, OpPush} {
		t.Run(kind.String(), func(t *testing.T) {
			pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: 8192, CacheSize: 128})
			require.NoError(t, err)
			defer pool.Close()
			prof, err := fabric.ParseProfile("delay=10us")
			require.NoError(t, err)
			pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: "nack", AtoB: prof, BtoA: prof, Seed: 5, LinkRing: 4096})
			require.NoError(t, err)
			inj := &injectPort{Port: pb, pool: pool}
			// Unsealed: the injected pull request carries no tag (a forger
			// with the key gets this far).
			p := buildPair(t, pool, pa, inj, fab, 5, func(a, b *Options) { a.SolicitThreshold = -1; a.Transport.NoSeal = true })
			defer p.close()
			const size = 4096
			src := pattern(3, size)
			ls, err := p.a.Register(src, 0)
			require.NoError(t, err)
			dst := make([]byte, size)
			ld, err := p.a.Register(dst, 0)
			require.NoError(t, err)
			tgt := make([]byte, 2*size)
			copy(tgt, src)
			rr, err := p.b.Register(tgt, RemoteRead|RemoteWrite)
			require.NoError(t, err)
			c := p.connect(ConnOptions{})
			tc := c.Transport()
			req := tc.Window(wire.WindowRequest)
			data := tc.Window(wire.WindowData)
			forged := wire.Header{Version: wire.Version, DestCID: tc.PeerCID(), Type: wire.TypePullRequest, PSN: req.TxNSN,
				RSN: 0x7777, ReqLen: size, ReqEBSN: req.RxBSN, DataEBSN: data.RxBSN, TxTime: 0x1234567,
				Flags: wire.FlagAckRequested, Ext: wire.Ext{Present: wire.ExtRegion, Region: wire.RegionRef{Key: rr.Key ^ 0x5a5a}}}
			if kind == OpPush {
				forged.Type = wire.TypePushUnsolicitedData
			}
			var payload []byte
			if kind == OpPush {
				payload = make([]byte, 64)
			}
			b := make([]byte, 2048)
			n, err := wire.EncodeFrame(b, &wire.Addrs{SrcMAC: [6]byte(p.pa.Info().MAC), DstMAC: [6]byte(p.pb.Info().MAC), SrcIP: ipA, DstIP: ipB}, &forged, payload)
			require.NoError(t, err)
			inj.q = append(inj.q, b[:n])
			op := Op{Local: ls, Len: size, Remote: wire.RegionRef{Key: rr.Key, Addr: size}}
			if kind == OpPull {
				op = Op{Local: ld, Len: size, Remote: wire.RegionRef{Key: rr.Key}}
				_, err = c.Pull(op)
			} else {
				_, err = c.Push(op)
			}
			require.NoError(t, err)
			p.run(func() bool { return len(p.cqA) == 1 }, time.Second)
			rs := p.b.Transport().Stats()
			require.NotZero(t, rs.RxRefused, "the target refused the forged request")
			require.Equal(t, StatusOK, p.cqA[0].Status, "the refusal of the forged packet is not the refusal of ours: %v", p.cqA[0])
			if kind == OpPull {
				require.True(t, bytes.Equal(dst, src), "the pull's bytes")
			} else {
				require.True(t, bytes.Equal(tgt[size:], src), "the push's bytes")
			}
			require.EqualValues(t, 1, p.a.Transport().Stats().NackForged, "the NACK that named another packet is counted")
		})
	}
}
