package afpacket_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/afpacket"
	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
	"github.com/peregrine-net/peregrine/pmd/pmdtest"
)

func newPool(t testing.TB, frames int) *mbuf.Pool {
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: frames, Debug: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pool.Close()) })
	return pool
}

// openPair opens afpacket ports on both ends of a veth pair, tx in
// namespace A and rx in namespace B, and closes them when the test ends.
func openPair(t testing.TB, pool *mbuf.Pool, topo *netnstest.Topology, opts afpacket.Options) (tx, rx *afpacket.Port) {
	txOpts, rxOpts := opts, opts
	txOpts.Interface, txOpts.Netns = topo.IfA, topo.A.Name
	rxOpts.Interface, rxOpts.Netns = topo.IfB, topo.B.Name
	tx, err := afpacket.New(pool, txOpts)
	require.NoError(t, err)
	rx, err = afpacket.New(pool, rxOpts)
	if err != nil {
		tx.Close()
	}
	require.NoError(t, err)
	// Close is idempotent: tests that close a port themselves may.
	t.Cleanup(func() {
		tx.Close()
		rx.Close()
	})
	return tx, rx
}

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		bypass bool
		ring   afpacket.RingVersion
	}{{"qdisc", false, afpacket.RingV2}, {"bypass", true, afpacket.RingV2}, {"v3", false, afpacket.RingV3}} {
		bypass := c.bypass
		t.Run(c.name, func(t *testing.T) {
			topo := netnstest.TwoNS(t, netns.VethOptions{GRO: true})
			pool := newPool(t, 8192)
			var rx *afpacket.Port
			pmdtest.Run(t, pmdtest.Harness{
				Pool: pool,
				Open: func(t *testing.T) (port.Port, port.Port) {
					var tx *afpacket.Port
					tx, rx = openPair(t, pool, topo, afpacket.Options{QdiscBypass: bypass, Ring: c.ring})
					return tx, rx
				},
				MaxFrame: 1514,
				Lossy:    true, // a full receive ring drops (counted in RxDropped; see TestDropsAreCounted)
				// A V3 receive block reaches us when full or after the
				// block timeout; wait for it in poll(2) instead of spinning.
				Settle: func() {
					_, _ = rx.Wait(2 * time.Millisecond)
				},
				MaxEmptyPolls:    200,
				ConcurrentFrames: 5000,
			})
		})
	}
}
