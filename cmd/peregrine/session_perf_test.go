package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app/traffic"
	"github.com/peregrine-net/peregrine/core/fwd"
	"github.com/peregrine-net/peregrine/core/lcore"
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

func newCachePorts(t *testing.T, s *session, queues int) (a, b *cachePort) {
	pa, pb, err := mem.NewPair(s.pool, mem.PairOptions{Name: t.Name(), Queues: queues})
	require.NoError(t, err)
	a = &cachePort{Port: pa, rx: map[int]*mbuf.Cache{}, tx: map[int]*mbuf.Cache{}}
	b = &cachePort{Port: pb, rx: map[int]*mbuf.Cache{}, tx: map[int]*mbuf.Cache{}}
	s.ports = append(s.ports, a, b)
	return a, b
}

// TestFwdGivesEachLoopOneCache: `peregrine fwd` io with two ports on two
// lcores: each forwarder allocates and frees through its loop's cache, and
// each port queue half uses the cache of the loop that drives it — the
// receive half of port A and the transmit half of port B belong to the
// A→B forwarder's loop, and the other way round — so frames return to the
// cache of the loop that received them.
func TestFwdGivesEachLoopOneCache(t *testing.T) {
	s, err := newSession(1024, 0)
	require.NoError(t, err)
	a, b := newCachePorts(t, s, 1)
	cpus := []int{-1, -1} // two loops, unpinned
	stages, err := fwdStages(s, fwdConfig{mode: "io", burst: 32}, cpus, fwd.ModeIO, traffic.Sizes{}, 0, nil)
	require.NoError(t, err)
	require.Len(t, stages, 2)
	require.NoError(t, s.loops(cpus, lcore.IdleSleep, stages))
	require.Len(t, s.caches, 2)
	loop0, loop1 := s.caches[0], s.caches[1]
	require.NotNil(t, loop0)
	require.NotNil(t, loop1)
	require.NotSame(t, loop0, loop1)
	require.Same(t, loop0, a.rx[0], "A→B receives on A")
	require.Same(t, loop0, b.tx[0], "A→B sends on B")
	require.Same(t, loop1, b.rx[0], "B→A receives on B")
	require.Same(t, loop1, a.tx[0], "B→A sends on A")
	require.NoError(t, s.group.StartAll())
	require.NoError(t, s.stop())
}

// TestFwdOneLcoreSharesOneCache: on one lcore every stage and every queue
// half of both ports (two queues each) use the one cache; in txonly mode
// the generators' ports get it for their transmit halves only.
func TestFwdOneLcoreSharesOneCache(t *testing.T) {
	for _, mode := range []string{"io", "txonly"} {
		t.Run(mode, func(t *testing.T) {
			s, err := newSession(1024, 0)
			require.NoError(t, err)
			a, b := newCachePorts(t, s, 2)
			cpus := []int{-1}
			stages, err := fwdStages(s, fwdConfig{mode: mode, burst: 32, flows: 1}, cpus, fwd.ModeIO, traffic.FixedSize(64), 0, nil)
			require.NoError(t, err)
			require.Len(t, stages, 4)
			require.NoError(t, s.loops(cpus, lcore.IdleSleep, stages))
			require.Len(t, s.caches, 1)
			only := s.caches[0]
			for _, p := range []*cachePort{a, b} {
				for q := range 2 {
					require.Same(t, only, p.tx[q], "queue %d transmit half", q)
					if mode == "txonly" {
						require.Nil(t, p.rx[q], "queue %d: nothing receives", q)
					} else {
						require.Same(t, only, p.rx[q], "queue %d receive half", q)
					}
				}
			}
			require.NoError(t, s.group.StartAll())
			require.NoError(t, s.stop())
		})
	}
}
