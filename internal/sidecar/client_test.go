package sidecar

import (
	"context"
	"errors"
	"testing"

	"github.com/peregrine-net/peregrine/host/shm"
)

func testClient(buffers int) *Client {
	return &Client{Ch: &shm.Channel{Layout: shm.Layout{RingSize: 2, Buffers: buffers, BufSize: 64}},
		taken: make([]uint64, (buffers+63)/64), deadCh: make(chan struct{})}
}

// Runs of consecutive buffers are taken first fit, across the free map's
// words, never overlapping, and come back with Free.
func TestRunAllocator(t *testing.T) {
	c := testClient(150)
	owner := make([]int, 150)
	take := func(id, k int, want uint32, ok bool) {
		t.Helper()
		b, got := c.TryAlloc(k)
		if got != ok || ok && b != want {
			t.Fatalf("TryAlloc(%d) = %d, %v; want %d, %v", k, b, got, want, ok)
		}
		for i := int(b); ok && i < int(b)+k; i++ {
			if owner[i] != 0 {
				t.Fatalf("buffer %d given twice", i)
			}
			owner[i] = id
		}
	}
	free := func(b, k int) {
		c.Free(uint32(b), k)
		for i := b; i < b+k; i++ {
			owner[i] = 0
		}
	}
	take(1, 1, 0, true)
	take(2, 62, 1, true)
	take(3, 3, 63, true)  // across the first word's end
	take(4, 80, 66, true) // a run over whole words
	take(5, 4, 146, true) // the pool's last four
	take(6, 1, 0, false)  // full
	free(1, 62)           // a hole of 62 at 1
	take(7, 63, 0, false) // too big for it
	take(8, 62, 1, true)
	free(66, 80)
	take(9, 100, 0, false)
	take(10, 80, 66, true)
	if _, ok := c.TryAlloc(0); ok {
		t.Fatal("a run of 0 buffers")
	}
	if _, ok := c.TryAlloc(151); ok {
		t.Fatal("a run longer than the pool")
	}
	// Alloc waits for a Free, and gives up with its context or the
	// client's death.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Alloc(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Alloc on a full pool with its context ended: %v", err)
	}
	got := make(chan uint32, 1)
	go func() {
		b, err := c.Alloc(context.Background(), 2)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	c.Free(66, 80)
	if b := <-got; b != 66 {
		t.Fatalf("Alloc after a Free took %d, want 66", b)
	}
	c.die()
	if _, err := c.Alloc(context.Background(), 1000); err == nil {
		t.Fatal("Alloc of more than the pool succeeded")
	}
	if _, err := c.Alloc(context.Background(), 100); !errors.Is(err, ErrGone) {
		t.Fatalf("Alloc on a dead client: %v, want ErrGone", err)
	}
}
