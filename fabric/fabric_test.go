package fabric

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
)

const us = clock.Time(time.Microsecond)

// requireInOrder checks that arrivals come in sequence order.
func requireInOrder(t *testing.T, got []arrival) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1].seq, got[i].seq, "arrival %d out of order", i)
	}
}

// late counts arrivals that come after a frame sent later.
func late(got []arrival) int {
	n := 0
	var highest uint32
	for i, a := range got {
		if i > 0 && a.seq < highest {
			n++
		}
		highest = max(highest, a.seq)
	}
	return n
}

func TestZeroProfileForwardsBothWaysAtOnce(t *testing.T) {
	pool := newPool(t, 1024)
	s := newSim(t, pool, Options{})
	for i := range 1000 {
		s.send(s.a, clock.Time(i)*us, uint32(i), 1, 64+i%100)
		s.send(s.b, clock.Time(i)*us, uint32(i), 2, 64)
	}
	s.finish()
	require.Len(t, s.atB, 1000)
	require.Len(t, s.atA, 1000)
	for i, a := range s.atB {
		require.Equal(t, uint32(i), a.seq)
		require.Equal(t, clock.Time(i)*us, a.at, "no delay configured: delivered in the Poll that took it")
		require.Equal(t, 64+i%100, a.size)
	}
	st := s.f.Stats()
	require.EqualValues(t, 1000, st.AtoB.Sent)
	require.EqualValues(t, 1000, st.BtoA.Received)
	require.Zero(t, st.AtoB.Delayed)
	requireBalanced(t, st.AtoB)
	requireBalanced(t, st.BtoA)
	require.Zero(t, pool.InUse())
}

func TestRandomLoss(t *testing.T) {
	const n = 100_000
	pool := newPool(t, 1024)
	s := newSim(t, pool, Options{Seed: 1, AtoB: Profile{Loss: 1}})
	for i := 0; i < n; i += 32 {
		s.sendBurst(s.a, clock.Time(i)*us, uint32(i), 32, 1, 64)
	}
	s.finish()
	lost := n - len(s.atB)
	require.InDelta(t, 0.01, ratio(lost, n), 0.002, "1%% loss")
	st := s.f.Stats().AtoB
	require.EqualValues(t, lost, st.LossRandom)
	require.Zero(t, st.LossBurst)
	requireBalanced(t, st)
	requireInOrder(t, s.atB)
}

func TestBurstLossRuns(t *testing.T) {
	const n = 100_000
	for _, tc := range []struct {
		burst    GilbertElliott
		meanRun  float64
		lossRate float64
	}{
		// Bad state loses everything: runs are the bad sojourns, mean 1/R.
		{GilbertElliott{P: 1, R: 25, BadLoss: 100}, 4, 1.0 / 26},
		{GilbertElliott{P: 0.5, R: 10, BadLoss: 100}, 10, 0.5 / 10.5},
	} {
		t.Run(fmt.Sprintf("%v", Profile{Burst: tc.burst}), func(t *testing.T) {
			pool := newPool(t, 1024)
			s := newSim(t, pool, Options{Seed: 7, AtoB: Profile{Burst: tc.burst}})
			for i := 0; i < n; i += 32 {
				s.sendBurst(s.a, clock.Time(i)*us, uint32(i), 32, 1, 64)
			}
			s.finish()
			got := make([]bool, n)
			for _, a := range s.atB {
				got[a.seq] = true
			}
			var runs, lost, run int
			for i := range n + 1 {
				if i < n && !got[i] {
					run++
					lost++
					continue
				}
				if run > 0 {
					runs++
					run = 0
				}
			}
			mean := float64(lost) / float64(runs)
			t.Logf("loss %.2f%% in %d runs of mean length %.2f", 100*ratio(lost, n), runs, mean)
			require.InEpsilon(t, tc.meanRun, mean, 0.12, "mean loss run ≈ 1/R")
			require.InEpsilon(t, tc.lossRate, ratio(lost, n), 0.15, "stationary loss = P/(P+R)")
			st := s.f.Stats().AtoB
			require.EqualValues(t, lost, st.LossBurst)
			require.Zero(t, st.LossRandom)
			requireBalanced(t, st)
		})
	}
}

func TestDelayAndJitter(t *testing.T) {
	const (
		n      = 10_000
		gap    = 2 * us
		delay  = 50 * us
		jitter = 10 * us
	)
	for _, tc := range []struct {
		dist  Dist
		order Order
	}{{DistUniform, OrderFIFO}, {DistUniform, OrderFree}, {DistNormal, OrderFIFO}, {DistNormal, OrderFree}} {
		p := Profile{Delay: time.Duration(delay), Jitter: time.Duration(jitter), Dist: tc.dist, Order: tc.order}
		t.Run(p.String(), func(t *testing.T) {
			pool := newPool(t, 1024)
			s := newSim(t, pool, Options{Seed: 3, AtoB: p})
			for i := range n {
				s.send(s.a, clock.Time(i)*gap, uint32(i), 1, 64)
			}
			s.finish()
			require.Len(t, s.atB, n)
			var sum, sumSq float64
			lo, hi := clock.Time(math.MaxInt64), clock.Time(0)
			for _, a := range s.atB {
				extra := a.at - clock.Time(a.seq)*gap - delay
				require.GreaterOrEqual(t, extra, clock.Time(0), "frame %d arrived before send+delay", a.seq)
				require.LessOrEqual(t, extra, jitter, "frame %d arrived after send+delay+jitter", a.seq)
				lo, hi = min(lo, extra), max(hi, extra)
				sum += float64(extra)
				sumSq += float64(extra) * float64(extra)
			}
			require.Less(t, lo, us, "the jitter reaches down to 0")
			require.Greater(t, hi, jitter-us, "the jitter reaches up to its bound")
			mean := sum / n
			sd := math.Sqrt(sumSq/n - mean*mean)
			t.Logf("extra delay mean %v sd %v, %d late", time.Duration(mean), time.Duration(sd), late(s.atB))
			if tc.order == OrderFIFO {
				requireInOrder(t, s.atB)
			} else {
				require.Positive(t, late(s.atB), "free order: jitter reorders")
				// Without the FIFO clamp the draws show their distribution.
				require.InEpsilon(t, float64(jitter)/2, mean, 0.03)
				wantSD := float64(jitter) / math.Sqrt(12) // uniform
				if tc.dist == DistNormal {
					wantSD = 0.88 * float64(jitter) / 4 // normal truncated at ±2σ
				}
				require.InEpsilon(t, wantSD, sd, 0.05)
			}
			st := s.f.Stats().AtoB
			require.EqualValues(t, n, st.Delayed)
			requireBalanced(t, st)
		})
	}
}

func TestReorder(t *testing.T) {
	const n = 100_000
	pool := newPool(t, 1024)
	s := newSim(t, pool, Options{Seed: 5, AtoB: Profile{Reorder: 5, ReorderDelay: 200 * time.Microsecond}})
	for i := range n {
		s.send(s.a, clock.Time(i)*us, uint32(i), 1, 64)
	}
	s.finish()
	require.Len(t, s.atB, n)
	st := s.f.Stats().AtoB
	held := 0
	for _, a := range s.atB {
		switch a.at - clock.Time(a.seq)*us {
		case 0:
		case 200 * us:
			held++
		default:
			t.Fatalf("frame %d delayed by %v: neither 0 nor the reorder delay", a.seq, a.at-clock.Time(a.seq)*us)
		}
	}
	require.EqualValues(t, held, st.Reordered)
	require.InDelta(t, 0.05, ratio(held, n), 0.005)
	// Every held frame is overtaken by the 200 frames sent behind it (bar
	// the last ones).
	require.InDelta(t, held, late(s.atB), 2)
	requireBalanced(t, st)
}

func TestCorruptFlipsOneBit(t *testing.T) {
	const n = 100_000
	for _, anywhere := range []bool{false, true} {
		p := Profile{Corrupt: 1, CorruptL2: anywhere}
		t.Run(p.String(), func(t *testing.T) {
			pool := newPool(t, 1024)
			s := newSim(t, pool, Options{Seed: 11, AtoB: p})
			corrupted, inHeader, frames := 0, 0, 0
			want := make([]byte, 64)
			s.onFrame = func(_ arrival, data []byte) {
				// No reordering: the i-th arrival is frame i.
				writeFrame(want, uint32(frames), 1)
				flipped, at := 0, -1
				for j := range want {
					if d := bits.OnesCount8(want[j] ^ data[j]); d > 0 {
						flipped += d
						at = j
					}
				}
				if flipped > 1 {
					t.Fatalf("frame %d has %d bits flipped", frames, flipped)
				}
				if flipped == 1 {
					corrupted++
					if at < ethHeaderLen {
						inHeader++
					}
				}
				frames++
			}
			for i := 0; i < n; i += 32 {
				s.sendBurst(s.a, clock.Time(i)*us, uint32(i), 32, 1, 64)
			}
			s.finish()
			require.Equal(t, n, frames)
			require.EqualValues(t, corrupted, s.f.Stats().AtoB.Corrupted)
			require.InDelta(t, 0.01, ratio(corrupted, n), 0.002)
			if anywhere {
				// 14 of 64 bytes are the Ethernet header.
				require.InDelta(t, 14.0/64, ratio(inHeader, corrupted), 0.05)
			} else {
				require.Zero(t, inHeader, "the Ethernet header is spared")
			}
		})
	}
}

func TestDuplicate(t *testing.T) {
	const n = 100_000
	pool := newPool(t, 1024)
	s := newSim(t, pool, Options{Seed: 13, AtoB: Profile{Dup: 1}})
	want := make([]byte, 128)
	size := func(seq uint32) int { return 64 + int(seq/32)%64 }
	s.onFrame = func(a arrival, data []byte) {
		w := want[:size(a.seq)]
		writeFrame(w, a.seq, 1)
		if string(w) != string(data) {
			t.Fatalf("frame %d changed", a.seq)
		}
	}
	for i := 0; i < n; i += 32 {
		s.sendBurst(s.a, clock.Time(i)*us, uint32(i), 32, 1, size(uint32(i)))
	}
	s.finish()
	st := s.f.Stats().AtoB
	dups := len(s.atB) - n
	require.EqualValues(t, dups, st.Duplicated)
	require.InDelta(t, 0.01, ratio(dups, n), 0.002)
	seen := make([]int, n)
	for i, a := range s.atB {
		seen[a.seq]++
		if seen[a.seq] == 2 {
			prev := s.atB[i-1]
			require.Equal(t, prev, a, "the copy follows its original, byte-identical (same hash), at the same time")
		}
	}
	for seq, c := range seen {
		if c != 1 && c != 2 {
			t.Fatalf("frame %d seen %d times", seq, c)
		}
	}
	requireBalanced(t, st)
	s.f.Stop(s.now)
	require.Zero(t, pool.InUse(), "every original and copy went back to the pool")
	ps := pool.Stats()
	require.Equal(t, ps.Allocs, ps.Frees)
	require.EqualValues(t, n+dups, ps.Allocs, "n sends plus one alloc per copy")
}

func TestDuplicateWithoutBuffers(t *testing.T) {
	const frames = 64
	pool := newPool(t, frames)
	s := newSim(t, pool, Options{AtoB: Profile{Dup: 100}})
	hs := make([]mbuf.Handle, frames)
	require.Equal(t, frames, pool.AllocBulk(hs), "take every frame")
	for i, h := range hs {
		writeFrame(pool.Append(h, 64), uint32(i), 1)
	}
	require.Equal(t, frames, s.a.TxBurst(0, hs))
	for s.f.Poll(0) > 0 { // no draining in between: the pool stays empty
	}
	s.drain()
	require.Len(t, s.atB, frames)
	st := s.f.Stats().AtoB
	require.EqualValues(t, frames, st.DupNoBuf)
	require.Zero(t, st.Duplicated)
	requireBalanced(t, st)
}

func TestRateLimit(t *testing.T) {
	const (
		n    = 10_000
		size = 1000
		gap  = 40 * us // 200 Mbit/s offered
	)
	for _, p := range []Profile{
		{Rate: 100e6, QueuePackets: 100},
		{Rate: 100e6, QueuePackets: 100, Overhead: 24},
		{Rate: 100e6, QueueBytes: 100 * size},
		{Rate: 100e6, QueuePackets: 100, Delay: time.Millisecond},
	} {
		t.Run(p.String(), func(t *testing.T) {
			pool := newPool(t, 1024)
			s := newSim(t, pool, Options{Seed: 17, AtoB: p})
			for i := range n {
				s.send(s.a, clock.Time(i)*gap, uint32(i), 1, size)
			}
			s.finish()
			got := s.atB
			st := s.f.Stats().AtoB
			first, last := got[0], got[len(got)-1]
			bitsOut := float64(len(got)-1) * (size + float64(p.Overhead)) * 8
			rate := bitsOut / (float64(last.at-first.at) / 1e9)
			t.Logf("%d of %d delivered at %.2f Mbit/s, %d tail-dropped", len(got), n, rate/1e6, st.QueueFull)
			require.InEpsilon(t, float64(p.Rate), rate, 0.02, "output rate")
			require.EqualValues(t, n-len(got), st.QueueFull, "every drop is a queue overflow")
			// Half the offered load fits; the queue absorbs about 100 more.
			wantDelivered := n*float64(p.Rate)/(float64(8*(size+p.Overhead))*1e9/float64(gap)) + 100
			require.InEpsilon(t, wantDelivered, float64(len(got)), 0.02)
			// The first frame meets an empty link: serialisation + delay.
			wire := clock.Time(uint64(8*(size+p.Overhead)) * 1e9 / p.Rate)
			require.Equal(t, wire+clock.Time(p.Delay), got[0].at)
			requireInOrder(t, got)
			requireBalanced(t, st)
		})
	}
}

func TestMultipath(t *testing.T) {
	const n = 20_000
	classify := func(frame []byte) (uint32, bool) { return FlowHash(frame), frameFlow(frame) == 1 }
	for _, spray := range []Spray{SprayRoundRobin, SprayRandom} {
		p := Profile{Delay: 10 * time.Microsecond, Paths: 4, Spread: 20 * time.Microsecond, Spray: spray}
		t.Run(p.String(), func(t *testing.T) {
			pool := newPool(t, 1024)
			s := newSim(t, pool, Options{Seed: 19, AtoB: p, Classify: classify})
			for i := range n {
				s.send(s.a, clock.Time(i)*us, uint32(i), uint16(1+i%2), 64) // flows 1 and 2 alternate
			}
			s.finish()
			require.Len(t, s.atB, n)
			var inOrder, sprayed []arrival
			latencies := map[clock.Time]int{}
			for _, a := range s.atB {
				lat := a.at - clock.Time(a.seq)*us
				if a.flow == 1 {
					inOrder = append(inOrder, a)
					require.Equal(t, inOrder[0].at-clock.Time(inOrder[0].seq)*us, lat, "an in-order flow keeps one path")
				} else {
					sprayed = append(sprayed, a)
					latencies[lat]++
				}
			}
			requireInOrder(t, inOrder)
			require.Positive(t, late(sprayed), "sprayed frames overtake each other across paths")
			require.Len(t, latencies, 4, "sprayed frames use every path")
			for path := range 4 {
				c := latencies[clock.Time(10+20*path)*us]
				if spray == SprayRoundRobin {
					require.Equal(t, n/2/4, c, "round robin deals evenly")
				} else {
					require.InEpsilon(t, n/2/4, c, 0.1)
				}
			}
			st := s.f.Stats().AtoB
			var total uint64
			for _, c := range st.Paths {
				total += c
			}
			require.EqualValues(t, n, total)
			requireBalanced(t, st)
		})
	}

	t.Run("default classifier keeps every flow on one path", func(t *testing.T) {
		pool := newPool(t, 1024)
		p := Profile{Delay: 10 * time.Microsecond, Paths: 4, Spread: 20 * time.Microsecond}
		s := newSim(t, pool, Options{AtoB: p})
		const flows = 64
		for i := range n {
			s.send(s.a, clock.Time(i)*us, uint32(i), uint16(1+i%flows), 64)
		}
		s.finish()
		pathOf := map[uint16]clock.Time{}
		byFlow := map[uint16][]arrival{}
		for _, a := range s.atB {
			lat := a.at - clock.Time(a.seq)*us
			if want, ok := pathOf[a.flow]; ok {
				require.Equal(t, want, lat, "flow %d changed path", a.flow)
			}
			pathOf[a.flow] = lat
			byFlow[a.flow] = append(byFlow[a.flow], a)
		}
		for _, got := range byFlow {
			requireInOrder(t, got)
		}
		for i, c := range s.f.Stats().AtoB.Paths {
			require.Positive(t, c, "the flow hash spreads %d flows over every path (path %d unused)", flows, i)
		}
	})
}

func TestDeterministic(t *testing.T) {
	profile, err := ParseProfile("loss=1%,burst=0.5%/30%/50%,dup=1%,reorder=5%/200us,corrupt=1%,delay=50us," +
		"jitter=10us,dist=normal,order=free,rate=1gbit,queue=100,paths=4,spread=20us,spray=random")
	require.NoError(t, err)
	back, err := ParseProfile("loss=2%,delay=30us,jitter=30us,dup=2%")
	require.NoError(t, err)
	run := func(seed uint64) (atB, atA []arrival, st Stats) {
		pool := newPool(t, 2048)
		s := newSim(t, pool, Options{Seed: seed, AtoB: profile, BtoA: back,
			Classify: func(frame []byte) (uint32, bool) { return 0, frameFlow(frame)%3 == 0 }})
		for i := range 10_000 {
			at := clock.Time(i) * 700 // 700ns: beyond 1 Gbit/s for large frames
			s.send(s.a, at, uint32(i), uint16(i%7), 64+(i*37)%1400)
			if i%3 == 0 {
				s.send(s.b, at, uint32(i), 9, 64)
			}
		}
		s.finish()
		return s.atB, s.atA, s.f.Stats()
	}
	b1, a1, st1 := run(42)
	b2, a2, st2 := run(42)
	require.Equal(t, b1, b2, "same seed, same input, same Poll times: same output")
	require.Equal(t, a1, a2)
	require.Equal(t, st1, st2)
	require.Positive(t, st1.AtoB.LossRandom)
	require.Positive(t, st1.AtoB.LossBurst)
	require.Positive(t, st1.AtoB.Duplicated)
	require.Positive(t, st1.AtoB.Corrupted)
	require.Positive(t, st1.AtoB.Reordered)
	require.Positive(t, st1.AtoB.QueueFull)
	requireBalanced(t, st1.AtoB)
	requireBalanced(t, st1.BtoA)

	b3, a3, _ := run(43)
	require.NotEqual(t, b1, b3, "another seed, another output")
	require.NotEqual(t, a1, a3)
}

// TestDirectionsIndependent checks that the directions draw from their own
// streams: traffic one way does not change what happens the other way.
func TestDirectionsIndependent(t *testing.T) {
	p := Profile{Loss: 5, Jitter: 10 * time.Microsecond, Order: OrderFree}
	run := func(reverse bool) []arrival {
		pool := newPool(t, 1024)
		s := newSim(t, pool, Options{Seed: 9, AtoB: p, BtoA: p})
		for i := range 5000 {
			s.send(s.a, clock.Time(i)*us, uint32(i), 1, 64)
			if reverse {
				s.send(s.b, clock.Time(i)*us, uint32(i), 1, 64)
			}
		}
		s.finish()
		return s.atB
	}
	require.Equal(t, run(false), run(true))
}

func TestLimitTailDrops(t *testing.T) {
	pool := newPool(t, 1024)
	s := newSim(t, pool, Options{AtoB: Profile{Delay: time.Millisecond, Limit: 100}})
	for i := range 300 {
		s.send(s.a, clock.Time(i)*us, uint32(i), 1, 64)
	}
	st := s.f.Stats().AtoB
	require.EqualValues(t, 100, st.Held)
	require.EqualValues(t, 200, st.LimitFull)
	s.finish()
	require.Len(t, s.atB, 100)
	require.Equal(t, uint32(99), s.atB[99].seq, "the first 100 were kept")
	requireBalanced(t, s.f.Stats().AtoB)
}

func TestStopAndCloseFreeHeldFrames(t *testing.T) {
	p := Profile{Delay: time.Millisecond, Jitter: 100 * time.Microsecond, Order: OrderFree, Reorder: 10, ReorderDelay: time.Millisecond}
	pool := newPool(t, 4096)
	s := newSim(t, pool, Options{AtoB: p, BtoA: p, Seed: 1})
	for i := range 1000 {
		s.send(s.a, clock.Time(i)*100, uint32(i), 1, 64)
		s.send(s.b, clock.Time(i)*100, uint32(i), 1, 64)
	}
	require.Equal(t, 2000, pool.InUse(), "the fabric holds every frame")
	s.f.Stop(s.now)
	require.Zero(t, pool.InUse(), "Stop frees every held frame")
	st := s.f.Stats()
	for _, d := range []DirStats{st.AtoB, st.BtoA} {
		require.EqualValues(t, 1000, d.Flushed)
		require.Zero(t, d.Held)
		requireBalanced(t, d)
	}
	_, ok := s.f.NextDeadline()
	require.False(t, ok)

	// The fabric still works after Stop.
	s.send(s.a, s.now, 5000, 1, 64)
	s.finish()
	require.Len(t, s.atB, 1)

	for i := range 100 {
		s.send(s.a, s.now+clock.Time(i), uint32(i), 1, 64)
	}
	require.Equal(t, 100, pool.InUse())
	require.NoError(t, s.f.Close())
	require.NoError(t, s.f.Close(), "Close is idempotent")
	require.Zero(t, pool.InUse(), "Close frees every held frame")
	require.Zero(t, s.f.Poll(s.now+clock.Time(time.Hour)), "a closed fabric does nothing")
}

// TestOutputRefusalRetries fills the output ring: frames the output port
// refuses are kept and offered again, not lost.
func TestOutputRefusalRetries(t *testing.T) {
	pool := newPool(t, 1024)
	a, b, f, err := Link(pool, Options{LinkRing: 64, Burst: 32})
	require.NoError(t, err)
	defer func() {
		require.NoError(t, f.Close())
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	}()
	hs := make([]mbuf.Handle, 32)
	for i := range 4 {
		require.Equal(t, 32, pool.AllocBulk(hs))
		for j, h := range hs {
			writeFrame(pool.Append(h, 64), uint32(i*32+j), 1)
		}
		require.Equal(t, 32, a.TxBurst(0, hs))
		for f.Poll(0) > 0 {
		}
	}
	st := f.Stats().AtoB
	require.EqualValues(t, 64, st.Sent, "the output ring holds 64")
	require.Positive(t, st.TxRefused)
	at, ok := f.NextDeadline()
	require.True(t, ok)
	require.Equal(t, clock.Time(0), at, "refused frames are due now")
	var got []uint32
	rx := make([]mbuf.Handle, 64)
	for len(got) < 128 {
		n := b.RxBurst(0, rx)
		for _, h := range rx[:n] {
			got = append(got, frameSeq(pool.Data(h)))
		}
		pool.Free(rx[:n])
		f.Poll(0)
	}
	require.True(t, slices.IsSorted(got), "retried frames keep their order")
	requireBalanced(t, f.Stats().AtoB)
}

func TestNewRejectsBadOptions(t *testing.T) {
	pool := newPool(t, 256)
	a, b, f, err := Link(pool, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()); a.Close(); b.Close() }()
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{B: b, Pool: pool}, "Options.A and Options.B are required"},
		{Options{A: a, B: b}, "Options.Pool is nil"},
		{Options{A: a, B: b, Pool: pool, Burst: 300}, "Options.Burst 300 is out of range (use 1..256, or 0 for 32)"},
		{Options{A: a, B: b, Pool: pool, QueueA: 1}, "Options.QueueA 1 is out of range"},
		{Options{A: a, B: a, Pool: pool}, "same port and queue"},
		{Options{A: a, B: b, Pool: pool, AtoB: Profile{Loss: 101}}, "Options.AtoB: fabric: bad profile: Loss 101% is out of range"},
		{Options{A: a, B: b, Pool: pool, BtoA: Profile{Paths: 65}}, "Options.BtoA: fabric: bad profile: Paths 65 is out of range"},
	} {
		_, err := New(tc.opts)
		require.ErrorIs(t, err, ErrInvalidOptions)
		require.ErrorContains(t, err, tc.want)
	}
	_, err = New(Options{A: a, B: b, Pool: pool, AtoB: Profile{Dup: -1}})
	require.ErrorIs(t, err, ErrBadProfile)

	_, _, _, err = Link(pool, Options{A: a})
	require.ErrorContains(t, err, "must be nil")
	_, _, _, err = Link(pool, Options{LinkRing: 1000})
	require.ErrorContains(t, err, "not a power of two (use 1024)")
	require.Zero(t, pool.InUse())
}
