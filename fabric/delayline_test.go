package fabric

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

// TestDelayLineOrder checks the delay line against a sorted model: random
// pushes (to paths and heap, in and out of order) and pops of what is due
// must come out in (release time, sequence) order, and the line never
// holds more than its limit.
func TestDelayLineOrder(t *testing.T) {
	const limit, paths = 256, 5
	rng := rand.New(rand.NewPCG(3, 4))
	d := newDelayLine(limit)
	var model []heldFrame
	var seq uint64
	var now clock.Time
	tails := make([]clock.Time, paths)
	for step := range 20_000 {
		if rng.IntN(3) > 0 && !d.full() {
			path := rng.IntN(paths)
			at := now + clock.Time(rng.IntN(100))
			fifo := rng.IntN(4) > 0
			if fifo && rng.IntN(2) == 0 {
				at = max(at, tails[path]) // mostly in order, as OrderFIFO makes it
			}
			if fifo {
				tails[path] = max(tails[path], at)
			}
			f := heldFrame{at: at, seq: seq, h: mbuf.Handle(seq)}
			seq++
			d.push(f, path, fifo)
			model = append(model, f)
		} else {
			now += clock.Time(rng.IntN(20))
			slices.SortFunc(model, func(a, b heldFrame) int {
				if a.before(&b) {
					return -1
				}
				return 1
			})
			for len(model) > 0 && model[0].at <= now {
				f, from, ok := d.peek()
				require.True(t, ok, "step %d", step)
				require.Equal(t, model[0], *f, "step %d", step)
				require.Equal(t, model[0].h, d.pop(from))
				model = model[1:]
			}
			if f, _, ok := d.peek(); ok {
				require.Greater(t, f.at, now)
			}
		}
		require.Equal(t, len(model), d.len())
		require.LessOrEqual(t, d.len(), limit)
	}
	d.reset()
	_, _, ok := d.peek()
	require.False(t, ok)
	require.Zero(t, d.len())
}
