package fabric

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

func TestPathProfileSyntax(t *testing.T) {
	p, err := ParseProfile("delay=10us,paths=4,path-rate=1gbit,path-queue=50,path-loss=0%/0%/1%/0%,path-delay=0/2us/5us/10us,spray=adaptive")
	require.NoError(t, err)
	require.Equal(t, []uint64{1e9}, p.PathRate)
	require.Equal(t, []int{50}, p.PathQueue)
	require.Equal(t, []Percent{0, 0, 1, 0}, p.PathLoss)
	require.Equal(t, []time.Duration{0, 2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond}, p.PathDelay)
	require.Equal(t, SprayAdaptive, p.Spray)
	back, err := ParseProfile(p.String())
	require.NoError(t, err)
	require.Equal(t, p, back, p.String())
	for _, bad := range []string{
		"paths=4,path-rate=1gbit/1gbit",       // neither one nor four
		"paths=2,path-queue=10",               // a queue without a rate
		"paths=2,spread=5us,path-delay=0/5us", // two ways to say one thing
		"paths=2,path-loss=101%",              // out of range
		"paths=2,path-rate=fast",              // not a rate
	} {
		_, err := ParseProfile(bad)
		require.ErrorIs(t, err, ErrBadProfile, bad)
	}
}

// Four paths with their own 100 Mbit/s links carry four times what one
// does, and each path's counters say what it carried.
func TestPathsHaveTheirOwnCapacity(t *testing.T) {
	const (
		n    = 4000
		size = 1000
	)
	wire := clock.Time(size * 8 * 1e9 / 100e6) // 80us per frame on one path
	for _, spray := range []Spray{SprayRoundRobin, SprayAdaptive} {
		p := Profile{Paths: 4, PathRate: []uint64{100e6}, PathQueue: []int{n}, PathDelay: []time.Duration{0, 2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond}, Delay: 10 * time.Microsecond, Spray: spray, Limit: 2 * n}
		t.Run(p.String(), func(t *testing.T) {
			pool := newPool(t, 2*n)
			sprayAll := func([]byte) (uint32, bool) { return 1, false }
			s := newSim(t, pool, Options{Seed: 3, AtoB: p, Classify: sprayAll})
			s.sendBurst(s.a, 0, 0, 1, 1, size)
			for i := 1; i < n; i += 50 {
				s.sendBurst(s.a, 0, uint32(i), min(50, n-i), 1, size)
			}
			s.finish()
			require.Len(t, s.atB, n)
			last := s.atB[len(s.atB)-1].at
			// n frames over 4 links: n/4 serialisations, plus the slowest path's delay.
			require.LessOrEqual(t, last, clock.Time(n/4)*wire+clock.Time(20*time.Microsecond)+wire)
			require.Greater(t, last, clock.Time(n/4-1)*wire)
			st := s.f.Stats().AtoB
			require.Len(t, st.PathDetail, 4)
			for i, ps := range st.PathDetail {
				require.InDelta(t, n/4, ps.Frames, 2, "path %d", i)
				require.Equal(t, ps.Frames*size, ps.Bytes)
				require.Greater(t, ps.QueuePeak, uint64(n/8), "the burst queued on path %d", i)
			}
			requireBalanced(t, st)
		})
	}
}

// In-order frames keep their flow's path and its capacity alone; a full
// path queue tail-drops and counts the drop on that path.
func TestPathQueueAndInOrder(t *testing.T) {
	const size = 1000
	p := Profile{Paths: 4, PathRate: []uint64{100e6}, PathQueue: []int{10}}
	pool := newPool(t, 256)
	inOrder := func([]byte) (uint32, bool) { return 7, true }
	s := newSim(t, pool, Options{Seed: 3, AtoB: p, Classify: inOrder})
	s.sendBurst(s.a, 0, 0, 30, 1, size)
	s.finish()
	requireInOrder(t, s.atB)
	require.Len(t, s.atB, 10)
	st := s.f.Stats().AtoB
	require.EqualValues(t, 20, st.PathQueueFull)
	used := 0
	for _, ps := range st.PathDetail {
		if ps.Frames > 0 {
			used++
			require.EqualValues(t, 10, ps.QueuePeak)
			require.EqualValues(t, 20, ps.Drops)
		}
	}
	require.Equal(t, 1, used, "one flow, one path")
	requireBalanced(t, st)
}

func TestPathLoss(t *testing.T) {
	p := Profile{Paths: 2, PathLoss: []Percent{0, 100}}
	pool := newPool(t, 256)
	sprayAll := func([]byte) (uint32, bool) { return 1, false }
	s := newSim(t, pool, Options{Seed: 3, AtoB: p, Classify: sprayAll})
	s.sendBurst(s.a, 0, 0, 40, 1, 100)
	s.finish()
	require.Len(t, s.atB, 20, "round robin: every other frame takes the lossy path")
	st := s.f.Stats().AtoB
	require.EqualValues(t, 20, st.PathLossDrops)
	require.EqualValues(t, 20, st.PathDetail[1].Drops)
	requireBalanced(t, st)
}

// Entropy spraying follows the frame's own 5-tuple: one source port stays
// on one path, varied source ports spread.
func TestSprayEntropy(t *testing.T) {
	p := Profile{Paths: 4, Spray: SprayEntropy}
	pool := newPool(t, 1024)
	sprayAll := func([]byte) (uint32, bool) { return 1, false }
	s := newSim(t, pool, Options{Seed: 3, AtoB: p, Classify: sprayAll})
	for i := range 400 {
		s.send(s.a, 0, uint32(i), 7, 100)
	}
	s.finish()
	used := 0
	for _, n := range s.f.Stats().AtoB.Paths {
		if n > 0 {
			used++
		}
	}
	require.Equal(t, 1, used, "one source port, one path")
	s2 := newSim(t, pool, Options{Seed: 3, AtoB: p, Classify: sprayAll})
	for i := range 400 {
		s2.send(s2.a, 0, uint32(i), uint16(49152+i), 100)
	}
	s2.finish()
	for i, n := range s2.f.Stats().AtoB.Paths {
		require.InDelta(t, 100, n, 40, "path %d", i)
	}
}

func TestTransportClassifierDSCP(t *testing.T) {
	frame := make([]byte, 64)
	writeFrame(frame, 1, 5)
	classify := TransportClassifierDSCP(4791, 10)
	_, inOrder := classify(frame)
	require.True(t, inOrder, "not a transport packet: in order")
	frame[ethHeaderLen+1] = 10 << 2
	require.EqualValues(t, 10, frameDSCP(frame))
	_, inOrder = classify(frame)
	require.True(t, inOrder)
}

func TestPathDownSyntax(t *testing.T) {
	p, err := ParseProfile("paths=4,path-down=1/3")
	require.NoError(t, err)
	require.Equal(t, []int{1, 3}, p.PathDown)
	back, err := ParseProfile(p.String())
	require.NoError(t, err)
	require.Equal(t, p, back, p.String())
	for _, bad := range []string{
		"paths=4,path-down=4",  // no such path
		"path-down=0",          // one path: that is a link down
		"paths=2,path-down=-1", // not an index
		"paths=2,path-down=x",  // not a number
	} {
		_, err := ParseProfile(bad)
		require.ErrorIs(t, err, ErrBadProfile, bad)
	}
}

// Adaptive spraying cannot tell a black-holed path from a healthy one by
// its link (a switch does not see a failure beyond it), but it must not
// prefer it either: the dead path's frames take their time on its link
// like any other's, so it gets its quarter, not the most (before, its loss
// came before its link, the link always looked idle, and it took 57 %).
func TestAdaptiveSprayDoesNotFavourADeadPath(t *testing.T) {
	const (
		n    = 4000
		size = 1000
	)
	for _, p := range []Profile{
		{PathLoss: []Percent{0, 0, 100, 0}},
		{PathDown: []int{2}},
	} {
		p.Paths, p.PathRate, p.PathQueue, p.Spray, p.Limit = 4, []uint64{100e6}, []int{n}, SprayAdaptive, 2*n
		t.Run(p.String(), func(t *testing.T) {
			pool := newPool(t, 2*n)
			sprayAll := func([]byte) (uint32, bool) { return 1, false }
			s := newSim(t, pool, Options{Seed: 3, AtoB: p, Classify: sprayAll})
			// Bursts of 40 at the four paths' rate on average: queues form.
			gap := clock.Time(size * 8 * 1e9 / 400e6)
			for i := 0; i < n; i += 40 {
				s.sendBurst(s.a, clock.Time(i)*gap, uint32(i), 40, 1, size)
			}
			s.finish()
			st := s.f.Stats().AtoB
			dead := st.PathDetail[2]
			require.Zero(t, dead.Frames)
			share := float64(dead.Drops) / n
			require.InDelta(t, 0.25, share, 0.03, "the dead path's share of the frames")
			require.EqualValues(t, n-dead.Drops, len(s.atB))
			requireBalanced(t, st)
		})
	}
}

// A path taken down at run time loses what is sent down it from then on
// and carries traffic again once it is back; the rest flows throughout.
func TestSetPathDownAndUp(t *testing.T) {
	p := Profile{Paths: 4}
	pool := newPool(t, 1024)
	sprayAll := func([]byte) (uint32, bool) { return 1, false }
	s := newSim(t, pool, Options{Seed: 3, AtoB: p, Classify: sprayAll})
	require.NoError(t, s.f.Schedule(
		Change{At: clock.Time(100 * time.Microsecond), Dir: AtoB, Path: 1, PathDown: true},
		Change{At: clock.Time(200 * time.Microsecond), Dir: AtoB, Path: 1, PathUp: true}))
	require.ErrorIs(t, s.f.Schedule(Change{Dir: AtoB, Path: MaxPaths, PathDown: true}), ErrInvalidOptions)
	for i := range 300 {
		s.send(s.a, clock.Time(i)*clock.Time(time.Microsecond), uint32(i), 1, 100)
	}
	s.finish()
	st := s.f.Stats().AtoB
	// Round robin: 100 of the 300 frames go while path 1 is down, a
	// quarter of them down path 1.
	require.EqualValues(t, 25, st.PathDownDrops)
	require.EqualValues(t, 25, st.PathDetail[1].Drops)
	require.EqualValues(t, 50, st.PathDetail[1].Frames)
	require.Len(t, s.atB, 275)
	require.False(t, s.f.PathDown(AtoB, 1))
	require.NoError(t, s.f.SetPathDown(Both, 3, true))
	require.True(t, s.f.PathDown(BtoA, 3))
	requireBalanced(t, st)
}
