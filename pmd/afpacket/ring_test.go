package afpacket_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/pmd"
	"github.com/peregrine-net/peregrine/pmd/afpacket"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// jumboMTU is the largest MTU whose frames (plus the headroom) fit the
// largest mbuf frame, 16 KiB.
const jumboMTU = 16000

// TestRingModesRoundTripEverySize sends frames of every size from the
// smallest Ethernet frame to a jumbo frame of the veth's MTU, one at a
// time, through ports opened by spec with ring=v2 and ring=v3 and no
// sizes given: each arrives whole and unchanged, so the slots the driver
// sizes from the MTU hold a jumbo frame in both layouts.
func TestRingModesRoundTripEverySize(t *testing.T) {
	topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true, MTU: jumboMTU})
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: 1024, FrameSize: 16384, Debug: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pool.Close()) })
	maxFrame := jumboMTU + 14
	var sizes []int
	for size := 60; size < maxFrame; size += 61 {
		sizes = append(sizes, size)
	}
	sizes = append(sizes, 1514, 1515, 2048, 4096, 9014, maxFrame)
	for _, ring := range []string{"v2", "v3"} {
		t.Run(ring, func(t *testing.T) {
			env := &pmd.Env{Pool: pool}
			open := func(iface string, ns *netns.NS) *afpacket.Port {
				p, err := pmd.Open(env, "afpacket:"+iface+"?netns="+ns.Name+"&ring="+ring)
				require.NoError(t, err)
				t.Cleanup(func() { p.Close() })
				return p.(*afpacket.Port)
			}
			tx, rx := open(topo.IfA, topo.A), open(topo.IfB, topo.B)
			h := make([]mbuf.Handle, 1)
			for i, size := range sizes {
				makeFrames(t, pool, h, size, topo.MACB, topo.MACA, uint32(i))
				want := bytes.Clone(pool.Data(h[0]))
				require.Equal(t, 1, tx.TxBurst(0, h), "size %d", size)
				got := receiveN(t, pool, rx, 0, 1)
				require.Equal(t, [][]byte{want}, got, "size %d", size)
			}
			st := rx.Stats()
			require.Zero(t, st.RxDropped, "frames dropped at the receiver")
			require.Zero(t, tx.Stats().Errors, "frames refused at the sender")
			require.Zero(t, pool.InUse())
		})
	}
}
