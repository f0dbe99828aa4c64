package mcsq_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/internal/testenv"
	"github.com/peregrine-net/peregrine/sched/mcsq"
	"github.com/peregrine-net/peregrine/sim"
)

// TestManyPosters: 64 goroutines post through one queue (PostWait) while
// two others poll its CQ and the poll loop runs; every WR is covered by
// exactly one CQE, in posting order, and each poster's flow reaches its
// target in the order the poster posted.
func TestManyPosters(t *testing.T) {
	const posters, per = 64, 40
	f := newFixture(t, sim.MCSQNetOptions{Seed: 11, Hosts: 8})
	ts := f.targets()
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 16})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true, Depth: 256})
	require.NoError(t, err)

	// The payloads are written before posting: each poster owns its own
	// slots of the source region.
	wrs := make([][]mcsq.WR, posters)
	for p := range posters {
		for j := range per {
			h := p % 8
			wrs[p] = append(wrs[p], f.push(mcsq.Flow(uint64(p)), ts[h], h, p*per+j, 32, uint64(j+1), uint64(p)))
		}
	}
	var covered atomic.Int64
	var mu sync.Mutex
	var all []mcsq.CQE
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var posting, reading sync.WaitGroup
	for p := range posters {
		posting.Add(1)
		go func() {
			defer posting.Done()
			for j := range wrs[p] {
				if err := q.PostWait(ctx, &wrs[p][j]); err != nil {
					t.Errorf("poster %d: %v", p, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	for range 2 {
		reading.Add(1)
		go func() {
			defer reading.Done()
			buf := make([]mcsq.CQE, 16)
			for {
				k := q.Completions(buf)
				if k > 0 {
					mu.Lock()
					all = append(all, buf[:k]...)
					mu.Unlock()
					for _, c := range buf[:k] {
						covered.Add(int64(c.Count))
					}
					continue
				}
				select {
				case <-done:
					return
				default:
					// Yield when idle: two readers spinning flat out on two
					// CPUs starve the 64 posters, whose slot grabs from the
					// free ring publish in ticket order — one descheduled
					// poster holds up every later one (a convoy that took
					// 30 s under -race on a loaded machine).
					runtime.Gosched()
				}
			}
		}()
	}
	ok := f.n.Run(func() bool { return covered.Load() == posters*per || ctx.Err() != nil }, time.Hour)
	close(done)
	posting.Wait()
	reading.Wait()
	require.True(t, ok)
	require.NoError(t, ctx.Err())
	// Two readers: the CQEs each took are in order, the merge is not.
	mu.Lock()
	defer mu.Unlock()
	sortCQEs(all)
	checkCoverage(t, all, posters*per, true)
	last := map[uint64]uint64{}
	for _, a := range f.got {
		require.Equal(t, last[a.flow]+1, a.seq, "poster %d: WR %d after %d", a.flow, a.seq, last[a.flow])
		last[a.flow] = a.seq
	}
	require.Len(t, f.got, posters*per)
}

func sortCQEs(c []mcsq.CQE) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].Seq < c[j-1].Seq; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// TestNoAllocsPerWR: posting a WR, distributing it to a bound SQ,
// executing it and polling its CQE allocates nothing.
func TestNoAllocsPerWR(t *testing.T) {
	if testenv.Race {
		t.Skip("allocation counts are not meaningful under -race")
	}
	f := newFixture(t, sim.MCSQNetOptions{Seed: 12, Hosts: 2})
	ts := f.targets()
	dc, err := f.n.Engine.NewPool(mcsq.PoolOptions{Kind: mcsq.DC, SQs: 4, IdleTimeout: time.Hour})
	require.NoError(t, err)
	q, err := f.n.Engine.NewQueue(mcsq.QueueOptions{DC: dc, Ordered: true})
	require.NoError(t, err)
	wr := f.push(mcsq.Flow(1), ts[1], 1, 1, 64, 1, 1)
	buf := make([]mcsq.CQE, 8)
	got := false
	done := func() bool {
		if q.Completions(buf) > 0 {
			got = true
		}
		return got
	}
	one := func() {
		got = false
		if err := q.Post(&wr); err != nil {
			panic(err)
		}
		if !f.n.Run(done, time.Second) {
			panic("WR did not complete")
		}
	}
	for range 200 {
		one() // warm up: connect, bind, grow whatever grows once
	}
	allocs := testing.AllocsPerRun(500, one)
	require.Zero(t, allocs, "allocations per WR")
}
