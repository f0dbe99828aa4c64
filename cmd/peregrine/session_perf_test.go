package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// cachePort is a mem port that records the caches UseCaches hands it, as
// afxdp and afpacket ports take them.
type cachePort struct {
	port.Port
	rx, tx map[int]*mbuf.Cache
}

func (p *cachePort) UseCaches(queue int, rx, tx *mbuf.Cache) error {
	p.rx[queue], p.tx[queue] = rx, tx
	return nil
}

// newCachePipeline is fwd's pipeline on unpinned loops with two cachePorts
// of queues queues each.
func newCachePipeline(t *testing.T, loops, queues int) (p *app.Pipeline, a, b *cachePort) {
	lcs := make([]app.Lcore, loops)
	for i := range lcs {
		lcs[i].CPU = -1
	}
	p, err := app.New(app.Options{Pool: mbuf.Options{Name: "peregrine", Frames: 1024}, Lcores: lcs})
	require.NoError(t, err)
	pa, pb, err := mem.NewPair(p.Pool(), mem.PairOptions{Name: t.Name(), Queues: queues})
	require.NoError(t, err)
	a = &cachePort{Port: pa, rx: map[int]*mbuf.Cache{}, tx: map[int]*mbuf.Cache{}}
	b = &cachePort{Port: pb, rx: map[int]*mbuf.Cache{}, tx: map[int]*mbuf.Cache{}}
	p.AddPort(a)
	p.AddPort(b)
	return p, a, b
}

// TestFwdGivesEachLoopOneCache: `peregrine fwd` io with two ports on two
// lcores: each forwarder allocates and frees through its loop's cache, and
// each port queue half uses the cache of the loop that drives it — the
// receive half of port A and the transmit half of port B belong to the
// A→B forwarder's loop, and the other way round — so frames return to the
// cache of the loop that received them.
func TestFwdGivesEachLoopOneCache(t *testing.T) {
	p, a, b := newCachePipeline(t, 2, 1)
	fw, err := p.AddForwarders(app.ForwarderOptions{Mode: "io", Burst: 32})
	require.NoError(t, err)
	require.Len(t, fw.Stages, 2)
	require.NoError(t, p.Start())
	loop0, loop1 := p.Cache(0), p.Cache(1)
	require.NotSame(t, loop0, loop1)
	require.Same(t, loop0, a.rx[0], "A→B receives on A")
	require.Same(t, loop0, b.tx[0], "A→B sends on B")
	require.Same(t, loop1, b.rx[0], "B→A receives on B")
	require.Same(t, loop1, a.tx[0], "B→A sends on A")
	require.NoError(t, p.Stop())
}

// TestFwdOneLcoreSharesOneCache: on one lcore every stage and every queue
// half of both ports (two queues each) use the one cache; in txonly mode
// the generators' ports get it for their transmit halves only.
func TestFwdOneLcoreSharesOneCache(t *testing.T) {
	for _, mode := range []string{"io", "txonly"} {
		t.Run(mode, func(t *testing.T) {
			p, a, b := newCachePipeline(t, 1, 2)
			fw, err := p.AddForwarders(app.ForwarderOptions{Mode: mode, Burst: 32, Flows: 1, Sizes: traffic.FixedSize(64)})
			require.NoError(t, err)
			require.Len(t, fw.Stages, 4)
			require.NoError(t, p.Start())
			only := p.Cache(0)
			for _, pt := range []*cachePort{a, b} {
				for q := range 2 {
					require.Same(t, only, pt.tx[q], "queue %d transmit half", q)
					if mode == "txonly" {
						require.Nil(t, pt.rx[q], "queue %d: nothing receives", q)
					} else {
						require.Same(t, only, pt.rx[q], "queue %d receive half", q)
					}
				}
			}
			require.NoError(t, p.Stop())
		})
	}
}
