package mbuf

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// expect checks a count without boxing it on success (require.Equal would
// allocate for values above 255 and spoil AllocsPerRun).
func expect(t *testing.T, want, got int) {
	t.Helper()
	if got != want {
		t.Fatalf("got %d, want %d", got, want)
	}
}

// TestHotPathsDoNotAllocate covers the cache's fast paths and, with bulk
// sizes that force refills, flushes and bypasses, its slow paths too.
func TestHotPathsDoNotAllocate(t *testing.T) {
	for _, debug := range []bool{false, true} {
		p := newTestPool(t, Options{Name: fmt.Sprint("allocs", debug), Frames: 4096, CacheSize: 256, Debug: debug})
		c := p.NewCache()
		for _, bulk := range []int{1, 8, 32, 64, 200, 256, 300} {
			hs := make([]Handle, bulk)
			keep := make([]Handle, 0, 1024)
			for name, run := range map[string]func(){
				"GetBulk+PutBulk": func() {
					// Several gets before the puts push the stack across its
					// refill and flush thresholds.
					keep = keep[:0]
					for range 3 {
						expect(t, bulk, c.GetBulk(hs))
						keep = append(keep, hs...)
					}
					for i := 0; i < len(keep); i += bulk {
						c.PutBulk(keep[i : i+bulk])
					}
				},
				"AllocBulk+Free": func() {
					keep = keep[:0]
					for range 3 {
						expect(t, bulk, c.AllocBulk(hs))
						keep = append(keep, hs...)
					}
					for i := 0; i < len(keep); i += bulk {
						c.Free(keep[i : i+bulk])
					}
				},
				"AllocBurst+Free": func() {
					expect(t, bulk, c.AllocBurst(hs))
					c.Free(hs)
				},
				"Pool.AllocBulk+Free": func() {
					expect(t, bulk, p.AllocBulk(hs))
					p.Free(hs)
				},
				"Pool.AllocBurst+Free": func() {
					expect(t, bulk, p.AllocBurst(hs))
					p.Free(hs)
				},
			} {
				require.Zero(t, testing.AllocsPerRun(100, run), "%s bulk %d debug %v", name, bulk, debug)
			}
		}

		hs := make([]Handle, 1)
		require.Equal(t, 1, c.AllocBulk(hs))
		h := hs[0]
		var sink byte
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			m := p.Meta(h)
			m.DataLen = 0
			b := p.Append(h, 64)
			b[0] = 1
			sink += p.Data(h)[0] + p.Frame(h)[0]
			p.Prepend(h, 14)[0] = 2
			p.Adj(h, 14)
			p.Trim(h, 4)
			p.SetLen(h, 60)
			m.DataOff = uint16(p.Headroom())
		}))
		c.Free(hs)
		_ = sink
	}
}
