package fabric

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
)

// TestSetProfileAtRunTime changes a direction's profile between Polls: the
// new one applies to frames taken afterwards, the held ones keep their
// release times, and the other direction is untouched.
func TestSetProfileAtRunTime(t *testing.T) {
	pool := newPool(t, 4096)
	s := newSim(t, pool, Options{AtoB: Profile{Delay: 100 * time.Microsecond}, Seed: 1})
	for i := range 10 {
		s.send(s.a, clock.Time(i)*us, uint32(i), 1, 64)
	}
	// Everything later is lost, and takes four paths and a longer delay.
	require.NoError(t, s.f.SetProfile(AtoB, Profile{Loss: 100, Paths: 4, Delay: time.Millisecond}))
	for i := range 10 {
		s.send(s.a, 10*us+clock.Time(i)*us, uint32(10+i), 1, 64)
		s.send(s.b, 10*us+clock.Time(i)*us, uint32(i), 2, 64)
	}
	s.finish()
	require.Len(t, s.atB, 10, "the frames held before the change still arrive")
	for i, a := range s.atB {
		require.Equal(t, uint32(i), a.seq)
		require.Equal(t, clock.Time(i)*us+100*us, a.at, "held frames keep their release time")
	}
	require.Len(t, s.atA, 10, "the other direction is untouched")
	st := s.f.Stats()
	require.EqualValues(t, 10, st.AtoB.LossRandom)
	require.Len(t, st.AtoB.Paths, 4, "the path counters grew with the profile")
	requireBalanced(t, st.AtoB)
	requireBalanced(t, st.BtoA)

	// Back to a lossless four-path profile with a small Limit: the delay
	// line is rebuilt and keeps what it held, in order.
	require.NoError(t, s.f.SetProfile(AtoB, Profile{Paths: 4, Spread: 10 * time.Microsecond, Delay: 50 * time.Microsecond}))
	base := s.now + us
	for i := range 20 {
		s.send(s.a, base+clock.Time(i)*us, uint32(100+i), uint16(i), 64)
	}
	require.NoError(t, s.f.SetProfile(AtoB, Profile{Limit: 8}))
	for i := range 20 {
		s.send(s.a, base+20*us+clock.Time(i)*us, uint32(200+i), 1, 64)
	}
	s.finish()
	st = s.f.Stats()
	require.EqualValues(t, 20, st.AtoB.LimitFull, "while the 20 held frames exceed the new limit of 8, new ones are tail-dropped")
	got := s.atB[10:]
	require.Len(t, got, 20)
	for i := 1; i < len(got); i++ {
		require.LessOrEqual(t, got[i-1].at, got[i].at, "the rebuilt line releases in time order")
	}
	requireBalanced(t, st.AtoB)

	require.ErrorIs(t, s.f.SetProfile(AtoB, Profile{Loss: 200}), ErrBadProfile)
	require.ErrorIs(t, s.f.SetProfile(Dir(7), Profile{}), ErrInvalidOptions)
}

// TestLinkDownAndUp takes a link down in one direction, then both, and
// back up: frames taken while down and frames due while down are dropped
// and counted, the rest arrive, and the conservation law holds.
func TestLinkDownAndUp(t *testing.T) {
	pool := newPool(t, 4096)
	s := newSim(t, pool, Options{AtoB: Profile{Delay: 10 * time.Microsecond}, BtoA: Profile{Delay: 10 * time.Microsecond}})
	// Frames 0-4 are on the wire when a→b goes down; the ones due while it
	// is down are cut.
	for i := range 5 {
		s.send(s.a, clock.Time(i)*us, uint32(i), 1, 64)
	}
	s.f.SetLinkDown(AtoB, true)
	require.True(t, s.f.LinkDown(AtoB))
	require.False(t, s.f.LinkDown(BtoA))
	require.True(t, s.f.LinkDown(Both))
	for i := range 5 {
		s.send(s.a, 5*us+clock.Time(i)*us, uint32(5+i), 1, 64)
		s.send(s.b, 5*us+clock.Time(i)*us, uint32(i), 2, 64)
	}
	s.advance(30 * us)
	require.Empty(t, s.atB)
	require.Len(t, s.atA, 5, "b→a stays up")
	s.f.SetLinkDown(Both, false)
	for i := range 5 {
		s.send(s.a, 40*us+clock.Time(i)*us, uint32(10+i), 1, 64)
	}
	s.finish()
	require.Len(t, s.atB, 5)
	require.Equal(t, uint32(10), s.atB[0].seq)
	st := s.f.Stats().AtoB
	require.EqualValues(t, 5, st.LinkDown, "taken while down")
	require.EqualValues(t, 5, st.LinkCut, "on the wire when it went down")
	requireBalanced(t, st)
	requireBalanced(t, s.f.Stats().BtoA)

	// A short outage cuts only what was due within it.
	s.send(s.a, s.now+us, 99, 1, 64)
	s.f.SetLinkDown(Both, true)
	s.advance(s.now + 2*us)
	s.f.SetLinkDown(Both, false)
	s.finish()
	require.Len(t, s.atB, 6, "the frame due after the outage arrives")
}

// TestScheduleChanges scripts profile and link changes at virtual times:
// NextDeadline stops the clock at each, and the Poll at or after it
// applies it before moving frames.
func TestScheduleChanges(t *testing.T) {
	pool := newPool(t, 4096)
	s := newSim(t, pool, Options{})
	lossy := Profile{Loss: 100}
	require.NoError(t, s.f.Schedule(
		Change{At: 30 * us, Dir: Both, Up: true},
		Change{At: 10 * us, Dir: AtoB, Profile: &lossy},
		Change{At: 20 * us, Dir: AtoB, Profile: &Profile{}},
		Change{At: 20 * us, Dir: Both, Down: true},
	))
	at, ok := s.f.NextDeadline()
	require.True(t, ok)
	require.Equal(t, 10*us, at, "the first change is the next deadline")
	for i := range 40 {
		s.send(s.a, clock.Time(i)*us, uint32(i), 1, 64)
	}
	s.finish()
	st := s.f.Stats().AtoB
	require.EqualValues(t, 10, st.LossRandom, "lossy from 10µs to 20µs")
	require.EqualValues(t, 10, st.LinkDown, "down from 20µs to 30µs")
	require.Len(t, s.atB, 20)
	require.Equal(t, uint32(30), s.atB[10].seq)
	requireBalanced(t, st)
	_, ok = s.f.NextDeadline()
	require.False(t, ok, "nothing left to do")

	require.ErrorIs(t, s.f.Schedule(Change{Dir: AtoB, Down: true, Up: true}), ErrInvalidOptions)
	require.ErrorIs(t, s.f.Schedule(Change{Dir: AtoB, Profile: &Profile{Loss: -1}}), ErrBadProfile)
}

// TestRunTimeChangesDoNotAllocatePerFrame: a down link and a profile
// changed at run time (same Limit and queue) keep Poll allocation-free.
func TestRunTimeChangesDoNotAllocatePerFrame(t *testing.T) {
	p, err := ParseProfile(typicalProfile)
	require.NoError(t, err)
	pool := newPool(t, 4096)
	pp := newPump(t, pool, 32, Options{AtoB: p, BtoA: p, Seed: 1})
	for range 500 {
		pp.step(5 * us)
	}
	flip := false
	allocs := testing.AllocsPerRun(1000, func() {
		flip = !flip
		pp.f.SetLinkDown(AtoB, flip)
		pp.step(5 * us)
	})
	require.Zero(t, allocs, "a link going down and up allocates nothing")
	q := p
	q.Loss, q.Paths, q.Spread = 5, 4, 10*time.Microsecond
	require.NoError(t, pp.f.SetProfile(AtoB, q))
	for range 100 {
		pp.step(5 * us)
	}
	allocs = testing.AllocsPerRun(1000, func() { pp.step(5 * us) })
	require.Zero(t, allocs, "after a run-time profile change Poll allocates nothing")
	st := pp.f.Stats().AtoB
	require.Positive(t, st.LinkDown+st.LinkCut)
	requireBalanced(t, st)
}

// TestScheduleDeterministic: a run with scheduled changes of profile
// (paths, rate, limit included) and link state replays exactly.
func TestScheduleDeterministic(t *testing.T) {
	p1, err := ParseProfile("loss=2%,dup=1%,reorder=5%/100us,delay=20us,jitter=10us,order=free")
	require.NoError(t, err)
	p2, err := ParseProfile("loss=1%,burst=1%/30%,delay=40us,rate=1gbit,queue=50,paths=3,spread=10us,limit=500")
	require.NoError(t, err)
	run := func() ([]arrival, []arrival, Stats) {
		pool := newPool(t, 4096)
		s := newSim(t, pool, Options{Seed: 9, AtoB: p1, BtoA: p1})
		require.NoError(t, s.f.Schedule(
			Change{At: 500 * us, Dir: AtoB, Profile: &p2},
			Change{At: 800 * us, Dir: Both, Down: true},
			Change{At: 900 * us, Dir: Both, Up: true},
			Change{At: 1200 * us, Dir: Both, Profile: &p1},
		))
		for i := range 3000 {
			at := clock.Time(i) * 500
			s.send(s.a, at, uint32(i), uint16(i%5), 64+(i*31)%1000)
			s.send(s.b, at, uint32(i), 9, 64)
		}
		s.finish()
		return s.atB, s.atA, s.f.Stats()
	}
	b1, a1, st1 := run()
	b2, a2, st2 := run()
	require.Equal(t, b1, b2)
	require.Equal(t, a1, a2)
	require.Equal(t, st1, st2)
	require.Positive(t, st1.AtoB.LinkDown)
	require.Positive(t, st1.AtoB.QueueFull, "the rate-limited profile was in force")
	require.Len(t, st1.AtoB.Paths, 3)
	requireBalanced(t, st1.AtoB)
	requireBalanced(t, st1.BtoA)
}
