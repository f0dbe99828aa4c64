package mcsq_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/internal/testenv"
	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

// propertySeeds is 1,000 by default, 100 under -short, 40 under -race;
// PEREGRINE_SEEDS overrides both.
var propertySeeds = testenv.Seeds{Full: 1000, Short: 100, Race: 40}

// host failure modes of a property run.
const (
	healthy = iota
	refuses // its Accept says no: CauseRefused
	dies    // vanishes part-way: retries run out
	badKey  // some WRs to it name a region it does not have: CauseRemoteError
)

// TestProperty posts WRs for flows (DC) and QPNs (RC) to targets that
// fail at random, and checks: nothing is lost (every WR is covered by
// exactly one CQE), the ordered CQ is strictly in posting order, every
// identifier's pushes reach their target in posting order, a blacklisted
// WR never executes, a WR that succeeded was placed, and every DC SQ is
// released (and reused) at the end; the pool is back to zero in use.
// Replay one seed with -seed=N.
func TestProperty(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "mcsq-property", Frames: 16384, CacheSize: 256})
	require.NoError(t, err)
	defer pool.Close()
	if seed, ok := testenv.Replay(t); ok {
		runProperty(t, pool, seed)
		return
	}
	start := time.Now()
	n := propertySeeds.N(t)
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if !runProperty(t, pool, seed) {
			t.Fatalf("seed %d failed: replay with go test ./sched/mcsq -run TestProperty -seed=%d", seed, seed)
		}
	}
	t.Logf("%d seeds in %v", n, time.Since(start))
}

func runProperty(t *testing.T, pool *mbuf.Pool, seed uint64) bool {
	return t.Run(fmt.Sprint(seed), func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 0x6d637371))
		hosts := 2 + rng.IntN(5)
		mode := make([]int, hosts)
		for i := range mode {
			switch r := rng.IntN(10); {
			case r == 0:
				mode[i] = refuses
			case r == 1:
				mode[i] = dies
			case r == 2:
				mode[i] = badKey
			}
		}
		f := newFixture(t, sim.MCSQNetOptions{Seed: seed, Hosts: hosts, Pool: pool,
			Accept: func(h int, _ rt.PeerAddr) bool { return mode[h] != refuses }})
		ts := f.targets()
		sqs := 1 + rng.IntN(4)
		idle := time.Duration(0)
		if rng.IntN(2) == 0 {
			idle = time.Duration(10+rng.IntN(100)) * time.Microsecond
		}
		dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: sqs, IdleTimeout: idle, SQDepth: 1 + rng.IntN(16)})
		require.NoError(t, err)
		useRC := rng.IntN(2) == 0
		qo := mcsq.QueueOptions{DC: dc, Ordered: rng.IntN(2) == 0, Depth: 512, MaxCoalesce: 1 + rng.IntN(8)}
		var rc *mcsq.Pool
		if useRC {
			rc, err = f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.RC, SQs: hosts})
			require.NoError(t, err)
			for h := range hosts {
				require.NoError(t, rc.AddRC(uint32(1000+h), f.n.Peers[h]))
			}
			qo.RC = rc
		}
		switch rng.IntN(3) {
		case 0:
			qo.StrictHOL = true
		case 1:
			qo.Lookahead = 1 + rng.IntN(8)
		}
		q, err := f.n.Engine.NewQueue(qo)
		require.NoError(t, err)

		n := 100 + rng.IntN(150)
		flows := 1 + rng.IntN(12)
		killAt := rng.IntN(n)
		idOf := make([]uint64, n+1) // the identifier each WR named, as its payload's flow field
		hostOf := make([]int, n+1)
		for k := 1; k <= n; k++ {
			var wr mcsq.WR
			if useRC && rng.IntN(10) < 3 {
				h := rng.IntN(hosts)
				wr = f.push(mcsq.QPN(uint32(1000+h)), 0, h, k, 16+rng.IntN(200), uint64(k), uint64(1000+h))
				idOf[k], hostOf[k] = uint64(1000+h), h
			} else {
				fl := rng.IntN(flows)
				h := fl % hosts
				wr = f.push(mcsq.Flow(uint64(fl)), ts[h], h, k, 16+rng.IntN(200), uint64(k), uint64(fl))
				idOf[k], hostOf[k] = uint64(fl), h
			}
			if mode[hostOf[k]] == badKey && rng.IntN(4) == 0 {
				wr.Remote.Key ^= 0x50000 // another generation: not registered there
			}
			require.NoError(t, q.Post(&wr))
			if k == killAt {
				for h := range hosts {
					if mode[h] == dies {
						f.n.Kill(h)
					}
				}
			}
			if rng.IntN(8) == 0 {
				for range rng.IntN(20) {
					f.n.Step()
				}
			}
		}
		f.runUntilCovered(q, n, 10*time.Second)
		// Let the targets' ordered delivery and the idle timeouts finish.
		f.n.Run(func() bool { return false }, 5*time.Millisecond)
		f.drain(q)
		checkCoverage(t, f.cqes, n, qo.Ordered)

		status := make([]mcsq.Status, n+1)
		for _, c := range f.cqes {
			for s := c.Seq - uint64(c.Count) + 1; s <= c.Seq; s++ {
				status[s] = c.Status
			}
			if c.Status != mcsq.StatusOK {
				require.Equal(t, 1, c.Count, "an error has a CQE of its own")
			}
			require.NotEqual(t, mcsq.StatusUnknownID, c.Status)
			require.NotEqual(t, mcsq.StatusFlushed, c.Status)
		}
		arrived := make([]int, n+1)
		last := map[uint64]uint64{}
		for _, a := range f.got {
			require.LessOrEqual(t, a.seq, uint64(n))
			arrived[a.seq]++
			require.Greater(t, a.seq, last[a.flow], "identifier %d: WR %d reached its target after WR %d", a.flow, a.seq, last[a.flow])
			last[a.flow] = a.seq
			require.NotEqual(t, mcsq.StatusBlacklisted, status[a.seq], "blacklisted WR %d executed", a.seq)
		}
		for k := 1; k <= n; k++ {
			require.LessOrEqual(t, arrived[k], 1, "WR %d placed twice", k)
			if status[k] == mcsq.StatusOK && mode[hostOf[k]] != dies {
				require.Equal(t, 1, arrived[k], "WR %d completed OK but its target never saw it", k)
			}
			if mode[hostOf[k]] == healthy {
				require.Equal(t, mcsq.StatusOK, status[k], "WR %d to a healthy target", k)
			}
		}
		free, idleN := dc.Idle()
		require.Equal(t, sqs, free, "every DC SQ released (%d idle)", idleN)
		ps := dc.Stats()
		if flows > sqs {
			require.Greater(t, ps.Binds, uint64(sqs), "SQs reused")
		}
	})
}
