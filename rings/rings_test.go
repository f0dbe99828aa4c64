package rings

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/internal/testenv"
)

// ring is what the three kinds have in common, so tests can run over all.
type ring[T any] interface {
	EnqueueBulk(src []T) int
	EnqueueBurst(src []T) int
	DequeueBulk(dst []T) int
	DequeueBurst(dst []T) int
	Len() int
	Free() int
	Cap() int
}

var (
	_ ring[uint32] = (*SPSC[uint32])(nil)
	_ ring[uint32] = (*MPSC[uint32])(nil)
	_ ring[uint32] = (*MPMC[uint32])(nil)
)

type ringKind struct {
	name      string
	make      func(capacity int) (ring[uint32], error)
	producers int // goroutines the stress test may enqueue from
	consumers int
}

func wrap[R ring[uint32]](newRing func(int) (R, error)) func(int) (ring[uint32], error) {
	return func(capacity int) (ring[uint32], error) {
		r, err := newRing(capacity)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

var ringKinds = []ringKind{
	{name: "spsc", make: wrap(NewSPSC[uint32]), producers: 1, consumers: 1},
	{name: "mpsc", make: wrap(NewMPSC[uint32]), producers: 4, consumers: 1},
	{name: "mpmc", make: wrap(NewMPMC[uint32]), producers: 4, consumers: 4},
}

func newRing(t testing.TB, k ringKind, capacity int) ring[uint32] {
	t.Helper()
	r, err := k.make(capacity)
	require.NoError(t, err)
	return r
}

func TestBadCapacityRejected(t *testing.T) {
	cases := []struct {
		capacity int
		wantMsg  string // exact message when set, else it must name the value
		wantHint string
	}{
		{capacity: 0, wantHint: ">= 2"},
		{capacity: 1, wantHint: ">= 2"},
		{capacity: -4, wantHint: ">= 2"},
		{capacity: 3, wantMsg: "rings: capacity 3 is not a power of two (use 4)"},
		{capacity: 1000, wantMsg: "rings: capacity 1000 is not a power of two (use 1024)"},
		{capacity: 1<<31 - 1, wantMsg: "rings: capacity 2147483647 is not a power of two (use 2147483648)"},
		{capacity: 1<<31 + 1, wantHint: "<= 2147483648"},
		{capacity: 1 << 32, wantHint: "<= 2147483648"},
	}
	for _, k := range ringKinds {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", k.name, c.capacity), func(t *testing.T) {
				r, err := k.make(c.capacity)
				require.ErrorIs(t, err, ErrCapacity)
				require.Nil(t, r)
				if c.wantMsg != "" {
					require.EqualError(t, err, c.wantMsg)
				} else {
					require.Contains(t, err.Error(), "capacity "+strconv.Itoa(c.capacity)+" ")
					require.Contains(t, err.Error(), c.wantHint)
				}
			})
		}
	}
}

func TestGoodCapacityAccepted(t *testing.T) {
	for _, k := range ringKinds {
		for _, capacity := range []int{2, 4, 64, 1 << 16} {
			t.Run(fmt.Sprintf("%s/%d", k.name, capacity), func(t *testing.T) {
				r := newRing(t, k, capacity)
				require.Equal(t, capacity, r.Cap())
				require.Equal(t, 0, r.Len())
				require.Equal(t, capacity, r.Free())
			})
		}
	}
}

// TestMaxCapacityFullyUsable fills a ring of the largest capacity, where the
// distance between head and tail is 2^31 and uint32 arithmetic is at its
// edge. Zero-size elements keep it from needing memory.
func TestMaxCapacityFullyUsable(t *testing.T) {
	items := make([]struct{}, MaxCapacity)
	one := make([]struct{}, 1)
	rings := []struct {
		name string
		r    ring[struct{}]
	}{}
	s, err := NewSPSC[struct{}](MaxCapacity)
	require.NoError(t, err)
	m, err := NewMPSC[struct{}](MaxCapacity)
	require.NoError(t, err)
	mm, err := NewMPMC[struct{}](MaxCapacity)
	require.NoError(t, err)
	rings = append(rings, struct {
		name string
		r    ring[struct{}]
	}{"spsc", s}, struct {
		name string
		r    ring[struct{}]
	}{"mpsc", m}, struct {
		name string
		r    ring[struct{}]
	}{"mpmc", mm})
	for _, c := range rings {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			require.Equal(t, MaxCapacity, r.Cap())
			require.Equal(t, MaxCapacity, r.EnqueueBulk(items))
			require.Equal(t, MaxCapacity, r.Len())
			require.Equal(t, 0, r.Free())
			require.Equal(t, 0, r.EnqueueBurst(one))
			require.Equal(t, 1, r.DequeueBulk(one))
			require.Equal(t, 1, r.EnqueueBurst(one))
			require.Equal(t, MaxCapacity, r.DequeueBurst(items))
			require.Equal(t, 0, r.Len())
			require.Equal(t, 0, r.DequeueBurst(one))
		})
	}
}

func seq(from, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(from + i)
	}
	return s
}

func TestExactFullAndExactEmpty(t *testing.T) {
	const capacity = 16
	for _, k := range ringKinds {
		t.Run(k.name, func(t *testing.T) {
			r := newRing(t, k, capacity)
			for i := range capacity {
				require.Equal(t, 1, r.EnqueueBulk(seq(i, 1)), "item %d", i)
			}
			require.Equal(t, capacity, r.Len())
			require.Equal(t, 0, r.Free())
			require.Equal(t, 0, r.EnqueueBulk(seq(99, 1)), "bulk into a full ring")
			require.Equal(t, 0, r.EnqueueBurst(seq(99, 1)), "burst into a full ring")
			require.Equal(t, capacity, r.Len(), "failed enqueues changed Len")

			one := make([]uint32, 1)
			require.Equal(t, 1, r.DequeueBulk(one))
			require.Equal(t, uint32(0), one[0])
			require.Equal(t, 1, r.Free())
			require.Equal(t, 0, r.EnqueueBulk(seq(100, 2)), "bulk of 2 with 1 free")
			require.Equal(t, 1, r.EnqueueBurst(seq(100, 2)), "burst of 2 with 1 free")
			require.Equal(t, 0, r.Free())

			got := make([]uint32, capacity-1)
			require.Equal(t, capacity-1, r.DequeueBulk(got))
			require.Equal(t, seq(1, capacity-1), got)
			require.Equal(t, 1, r.Len())
			two := make([]uint32, 2)
			require.Equal(t, 0, r.DequeueBulk(two), "bulk of 2 with 1 held")
			require.Equal(t, 1, r.DequeueBurst(two), "burst of 2 with 1 held")
			require.Equal(t, uint32(100), two[0])

			require.Equal(t, 0, r.Len())
			require.Equal(t, capacity, r.Free())
			require.Equal(t, 0, r.DequeueBulk(one), "bulk from an empty ring")
			require.Equal(t, 0, r.DequeueBurst(one), "burst from an empty ring")
			require.Equal(t, 0, r.Len(), "failed dequeues changed Len")
		})
	}
}

func TestOversizedRequests(t *testing.T) {
	const capacity = 8
	for _, k := range ringKinds {
		t.Run(k.name, func(t *testing.T) {
			r := newRing(t, k, capacity)
			require.Equal(t, 0, r.EnqueueBulk(seq(0, capacity+1)), "bulk larger than the ring")
			require.Equal(t, 0, r.Len())
			require.Equal(t, capacity, r.EnqueueBurst(seq(0, capacity+5)), "burst larger than the ring")
			big := make([]uint32, capacity+3)
			require.Equal(t, 0, r.DequeueBulk(big), "bulk larger than the ring")
			require.Equal(t, capacity, r.Len())
			require.Equal(t, capacity, r.DequeueBurst(big))
			require.Equal(t, seq(0, capacity), big[:capacity])
		})
	}
}

func TestZeroLengthIsANoOp(t *testing.T) {
	for _, k := range ringKinds {
		t.Run(k.name, func(t *testing.T) {
			r := newRing(t, k, 4)
			require.Equal(t, 2, r.EnqueueBulk(seq(7, 2)))
			for _, s := range [][]uint32{nil, {}} {
				require.Equal(t, 0, r.EnqueueBulk(s))
				require.Equal(t, 0, r.EnqueueBurst(s))
				require.Equal(t, 0, r.DequeueBulk(s))
				require.Equal(t, 0, r.DequeueBurst(s))
			}
			require.Equal(t, 2, r.Len())
			got := make([]uint32, 2)
			require.Equal(t, 2, r.DequeueBulk(got))
			require.Equal(t, seq(7, 2), got)
		})
	}
}

// TestWrapAroundKeepsOrder cycles chunk sizes that do not divide the
// capacity through the ring hundreds of times, so every slot boundary is hit
// as a split copy, and checks every sequence number.
func TestWrapAroundKeepsOrder(t *testing.T) {
	const capacity = 8
	for _, k := range ringKinds {
		for _, chunk := range []int{1, 3, 5, 7, 8} {
			t.Run(fmt.Sprintf("%s/chunk=%d", k.name, chunk), func(t *testing.T) {
				r := newRing(t, k, capacity)
				// Keep the ring partly filled so head and tail sit at different offsets.
				require.Equal(t, 1, r.EnqueueBulk(seq(0, 1)))
				next, want := 1, 0
				got := make([]uint32, chunk)
				for round := range 800 {
					bulk := round%2 == 0
					var n int
					if bulk {
						n = r.EnqueueBulk(seq(next, chunk))
					} else {
						n = r.EnqueueBurst(seq(next, chunk))
					}
					if chunk+1 <= capacity {
						require.Equal(t, chunk, n, "round %d", round)
					}
					next += n
					if bulk {
						n = r.DequeueBurst(got)
					} else {
						n = r.DequeueBulk(got)
					}
					require.Equal(t, seq(want, n), got[:n], "round %d", round)
					want += n
					require.Equal(t, next-want, r.Len(), "round %d", round)
				}
				require.GreaterOrEqual(t, next, 100*capacity, "too few items moved to have wrapped the ring 100 times")
			})
		}
	}
}

// TestLenFreeMatchModel drives each ring with random calls and checks every
// result and Len/Free against a plain slice queue.
func TestLenFreeMatchModel(t *testing.T) {
	const capacity = 32
	for _, k := range ringKinds {
		t.Run(k.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			r := newRing(t, k, capacity)
			var model []uint32
			next := uint32(0)
			buf := make([]uint32, capacity+4)
			for op := range 5000 {
				n := rng.IntN(len(buf) + 1)
				switch rng.IntN(4) {
				case 0, 1:
					bulk := rng.IntN(2) == 0
					src := buf[:n]
					for i := range src {
						src[i] = next + uint32(i)
					}
					want := min(n, capacity-len(model))
					if bulk && want < n {
						want = 0
					}
					var got int
					if bulk {
						got = r.EnqueueBulk(src)
					} else {
						got = r.EnqueueBurst(src)
					}
					require.Equal(t, want, got, "op %d enqueue bulk=%v n=%d", op, bulk, n)
					model = append(model, src[:got]...)
					next += uint32(got)
				default:
					bulk := rng.IntN(2) == 0
					want := min(n, len(model))
					if bulk && want < n {
						want = 0
					}
					dst := buf[:n]
					var got int
					if bulk {
						got = r.DequeueBulk(dst)
					} else {
						got = r.DequeueBurst(dst)
					}
					require.Equal(t, want, got, "op %d dequeue bulk=%v n=%d", op, bulk, n)
					require.Equal(t, model[:got], dst[:got], "op %d", op)
					model = model[got:]
				}
				require.Equal(t, len(model), r.Len(), "op %d", op)
				require.Equal(t, capacity-len(model), r.Free(), "op %d", op)
			}
		})
	}
}

// TestLargerElements checks copies and wrap-around with an element type that
// is not 4 bytes wide.
func TestLargerElements(t *testing.T) {
	type pair struct{ a, b uint64 }
	r, err := NewMPMC[pair](4)
	require.NoError(t, err)
	s, err := NewSPSC[pair](4)
	require.NoError(t, err)
	for _, rr := range []ring[pair]{r, s} {
		out := make([]pair, 3)
		for i := range 10 {
			in := []pair{{uint64(i), 1}, {uint64(i), 2}, {uint64(i), 3}}
			require.Equal(t, 3, rr.EnqueueBulk(in))
			require.Equal(t, 3, rr.DequeueBulk(out))
			require.Equal(t, in, out)
		}
	}
}

// TestConcurrentEveryItemOnce has the kind's maximum of producers and
// consumers move a fixed number of items through a small ring with random
// bulk and burst sizes. Every item must arrive exactly once, and each
// consumer must see each producer's items in the order they were sent.
func TestConcurrentEveryItemOnce(t *testing.T) {
	const (
		capacity = 64
		maxChunk = 17
	)
	// Fewer items under the race detector, which slows every atomic and
	// copy several times over, to keep the package's tests well under 20 s
	// on a shared two-core machine.
	stressItems := 200_000
	if testenv.Race {
		stressItems = 100_000
	}
	for _, k := range ringKinds {
		t.Run(fmt.Sprintf("%s/%dp%dc", k.name, k.producers, k.consumers), func(t *testing.T) {
			r := newRing(t, k, capacity)
			perProducer := stressItems / k.producers
			var (
				wg       sync.WaitGroup
				consumed atomic.Int64
				badLen   atomic.Int64
				received = make([][]uint32, k.consumers)
			)
			for p := range k.producers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(p), 7))
					buf := make([]uint32, maxChunk)
					for sent := 0; sent < perProducer; {
						n := min(1+rng.IntN(maxChunk), perProducer-sent)
						src := buf[:n]
						for i := range src {
							src[i] = uint32(p*perProducer + sent + i)
						}
						var got int
						if rng.IntN(2) == 0 {
							got = r.EnqueueBulk(src)
						} else {
							got = r.EnqueueBurst(src)
						}
						sent += got
						if got == 0 {
							runtime.Gosched()
						}
					}
				})
			}
			want := int64(perProducer * k.producers)
			for c := range k.consumers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(c), 9))
					buf := make([]uint32, maxChunk)
					var mine []uint32
					for consumed.Load() < want {
						dst := buf[:1+rng.IntN(maxChunk)]
						var got int
						if rng.IntN(2) == 0 {
							got = r.DequeueBulk(dst)
						} else {
							got = r.DequeueBurst(dst)
						}
						if l := r.Len(); l < 0 || l > capacity {
							badLen.Add(1)
						}
						if got == 0 {
							runtime.Gosched()
							continue
						}
						mine = append(mine, dst[:got]...)
						consumed.Add(int64(got))
					}
					received[c] = mine
				})
			}
			wg.Wait()

			require.Zero(t, badLen.Load(), "Len outside [0, capacity]")
			require.Equal(t, 0, r.Len())
			seen := make([]bool, want)
			for c, items := range received {
				last := make([]int, k.producers)
				for i := range last {
					last[i] = -1
				}
				for _, v := range items {
					require.Less(t, int64(v), want, "consumer %d got a value never sent", c)
					require.False(t, seen[v], "item %d arrived twice", v)
					seen[v] = true
					p, i := int(v)/perProducer, int(v)%perProducer
					require.Greater(t, i, last[p], "consumer %d got producer %d's items out of order", c, p)
					last[p] = i
				}
			}
			for v, ok := range seen {
				require.True(t, ok, "item %d never arrived", v)
			}
		})
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	for _, k := range ringKinds {
		t.Run(k.name, func(t *testing.T) {
			r := newRing(t, k, 64)
			buf := make([]uint32, 32)
			allocs := testing.AllocsPerRun(1000, func() {
				r.EnqueueBulk(buf)
				r.DequeueBulk(buf)
				r.EnqueueBurst(buf)
				r.DequeueBurst(buf)
				r.Len()
				r.Free()
			})
			require.Zero(t, allocs)
		})
	}
}
