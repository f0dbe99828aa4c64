package perf

import (
	"fmt"
	"time"

	"github.com/peregrine-net/peregrine/core/mbuf"
)

// PoolCachedGetPutBulk measures, on the calling goroutine with one Cache, alloc+free of bulk-sized
// batches: it gets `keep` handles in bulks of `bulk` then puts them back in bulks of `bulk`,
// repeated until `elems` handles have been got and put, mirroring DPDK mempool_perf_autotest's
// inner loop (n_keep, n_get_bulk=n_put_bulk). Returns wall ns per handle (one get + one put).
//
// keep must be a multiple of bulk, and the pool must have keep frames free.
// One untimed round warms the cache first. The Cache is closed on return.
// For the `peregrine bench foundation` command and the mbuf benchmarks.
func PoolCachedGetPutBulk(p *mbuf.Pool, bulk, keep, elems int) (nsPerElem float64, err error) {
	switch {
	case bulk < 1:
		return 0, fmt.Errorf("perf: PoolCachedGetPutBulk: bulk %d must be >= 1", bulk)
	case keep < bulk || keep%bulk != 0:
		return 0, fmt.Errorf("perf: PoolCachedGetPutBulk: keep %d must be a positive multiple of bulk %d", keep, bulk)
	case elems < 1:
		return 0, fmt.Errorf("perf: PoolCachedGetPutBulk: elems %d must be >= 1", elems)
	case keep > p.Available():
		return 0, fmt.Errorf("perf: PoolCachedGetPutBulk: keep %d exceeds the %d free frames of pool %q", keep, p.Available(), p.Name())
	}
	c := p.NewCache()
	defer c.Close()
	table := make([]mbuf.Handle, keep)
	rounds := (elems+keep-1)/keep + 1 // the first round warms the cache, untimed
	var start time.Time
	// The loop is written out, like the autotest's, so the harness adds no
	// call per round to what is measured.
	for r := range rounds {
		if r == 1 {
			start = time.Now()
		}
		for i := 0; i < keep; i += bulk {
			if c.GetBulk(table[i:i+bulk]) != bulk {
				c.PutBulk(table[:i])
				return 0, fmt.Errorf("perf: PoolCachedGetPutBulk: pool %q ran out of frames (%d free)", p.Name(), p.Available())
			}
		}
		for i := 0; i < keep; i += bulk {
			c.PutBulk(table[i : i+bulk])
		}
	}
	elapsed := time.Since(start)
	return float64(elapsed.Nanoseconds()) / float64((rounds-1)*keep), nil
}
