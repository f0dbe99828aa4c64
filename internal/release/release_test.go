package release

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPublishedDataIsVisible is message passing: the writer fills a slot and
// then publishes its index; a reader that sees the index must see the slot.
// The race detector checks the race build (atomic.Store); the plain-MOV build
// relies on x86-TSO, which this checks by value across many rounds.
func TestPublishedDataIsVisible(t *testing.T) {
	const rounds = 200000
	slots := make([]uint64, 1024)
	var published, consumed atomic.Uint64
	done := make(chan error, 1)
	go func() {
		var seen uint64
		for seen < rounds {
			n := published.Load()
			for ; seen < n; seen++ {
				if got := atomicLoadPlain(&slots[seen%uint64(len(slots))]); got != seen+1 {
					done <- errMismatch{seen, got}
					return
				}
			}
			consumed.Store(seen)
			CPURelax()
		}
		done <- nil
	}()
	for i := uint64(0); i < rounds; i++ {
		for i-consumed.Load() >= uint64(len(slots)) {
			CPURelax() // wait for the reader: the slot is about to be reused
		}
		slots[i%uint64(len(slots))] = i + 1
		Store64(&published, i+1)
	}
	require.NoError(t, <-done)
	require.Equal(t, uint64(rounds), published.Load())
}

type errMismatch struct{ index, got uint64 }

func (e errMismatch) Error() string { return "slot published before its data was written" }

// atomicLoadPlain reads a slot the writer owns until publication; the read
// is ordered after the index load by the index load itself.
func atomicLoadPlain(p *uint64) uint64 { return *p }
