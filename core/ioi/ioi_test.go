package ioi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// run drives one message of total packets through a Sender with a window
// of w packets, acknowledging the oldest outstanding packet rtt after it
// was sent, and returns the marks in send order and the UPC seen when the
// last packet went.
func run(t *testing.T, total uint32, w int, est *Estimator) (marks []Mark, upcAtLast int32) {
	t.Helper()
	var s Sender
	now := clock.Time(0)
	s.Begin(ModeIOI, total, uint64(total)*1000, true, est, now, 7)
	type out struct {
		m  Mark
		at clock.Time
	}
	var flight []out
	const rtt = 10 * time.Microsecond
	for s.sent < total || len(flight) > 0 {
		if s.sent < total && len(flight) < w && !s.Holding() {
			if s.sent+1 == total && s.MustHold() {
				continue
			}
			m := s.Next()
			if s.sent+1 == total {
				upcAtLast = s.UPC()
			}
			s.Sent(m, 1000)
			marks = append(marks, m)
			flight = append(flight, out{m, now})
			require.GreaterOrEqual(t, s.OPC(), int32(0))
			require.GreaterOrEqual(t, s.UPC(), int32(0))
			continue
		}
		now = max(now, flight[0].at.Add(rtt))
		o := flight[0]
		flight = flight[1:]
		s.Resolved(o.m.Flagged, true, now, est)
	}
	require.Zero(t, s.OPC())
	require.Zero(t, s.UPC())
	return marks, upcAtLast
}

func TestSenderHeadMiddleTail(t *testing.T) {
	var est Estimator
	marks, upcAtLast := run(t, 200, 16, &est)
	require.Len(t, marks, 200)
	// Head, middle, tail: contiguous, in that order, never overlapping.
	phase := wire.PhaseHead
	var ordinal uint32
	counts := map[wire.Phase]int{}
	for i, m := range marks {
		require.GreaterOrEqual(t, m.Phase, phase, "packet %d went back to %v", i, m.Phase)
		phase = m.Phase
		counts[m.Phase]++
		require.Equal(t, m.Phase != wire.PhaseMiddle, m.Flagged, "packet %d", i)
		if m.Flagged {
			require.Equal(t, ordinal, m.Ordinal, "in-order sequence numbers count the flagged packets")
			ordinal++
			require.Zero(t, m.Entropy)
		} else {
			require.GreaterOrEqual(t, m.Entropy, uint16(0xc000))
		}
	}
	require.Equal(t, wire.PhaseTail, marks[len(marks)-1].Phase, "the last packet goes in order")
	require.Zero(t, upcAtLast, "the last packet waits for UPC == 0")
	require.Equal(t, 16, counts[wire.PhaseHead], "the head lasts until the first response: one window")
	require.Positive(t, counts[wire.PhaseMiddle])
	require.LessOrEqual(t, counts[wire.PhaseTail], 17, "the tail is at most what was outstanding, plus the last")
	th, ok := est.Threshold()
	require.True(t, ok)
	require.EqualValues(t, 2*16*1000, th, "2 × RTT × (16 packets of 1000 B per RTT)")
}

func TestSenderSmallMessageStaysInOrder(t *testing.T) {
	est := Estimator{Override: 100_000}
	var s Sender
	require.False(t, s.Begin(ModeIOI, 50, 50_000, true, &est, 0, 1))
	require.True(t, s.InOrder())
	m := s.Next()
	require.True(t, m.Flagged)
	require.Equal(t, wire.PhaseNone, m.Phase)

	// Unknown threshold: IOI starts, and the first response finds the rest small.
	var fresh Estimator
	marks, _ := run(t, 40, 16, &fresh)
	for _, m := range marks {
		require.True(t, m.Flagged)
		require.Equal(t, wire.PhaseHead, m.Phase)
	}
}

func TestSenderModes(t *testing.T) {
	var est Estimator
	for _, c := range []struct {
		mode       Mode
		idempotent bool
		flagged    bool
		entropy    bool
	}{
		{ModeOff, true, false, false},
		{ModeInOrder, true, true, false},
		{ModeSprayed, true, false, true},
		{ModeSprayed, false, true, false}, // non-idempotent: in order
		{ModeIOI, false, true, false},
	} {
		var s Sender
		s.Begin(c.mode, 100, 100_000, c.idempotent, &est, 0, 3)
		m := s.Next()
		require.Equal(t, c.flagged, m.Flagged, "%v", c)
		require.Equal(t, c.entropy, m.Entropy != 0, "%v", c)
		require.Equal(t, wire.PhaseNone, m.Phase)
	}
	est.Override = 1
	var s Sender
	require.True(t, s.Begin(ModeIOI, 100, 100_000, true, &est, 0, 3))
}

func TestCheckCombo(t *testing.T) {
	for _, c := range []struct {
		data, flagged bool
		p             wire.Phase
		ok            bool
	}{
		{true, false, wire.PhaseNone, true}, {true, true, wire.PhaseNone, true},
		{true, true, wire.PhaseHead, true}, {true, false, wire.PhaseHead, false},
		{true, false, wire.PhaseMiddle, true}, {true, true, wire.PhaseMiddle, false},
		{true, true, wire.PhaseTail, true}, {true, false, wire.PhaseTail, false},
		{false, true, wire.PhaseHead, false}, {false, false, wire.PhaseMiddle, false}, {false, true, wire.PhaseNone, true},
		{true, true, 4, false},
	} {
		require.Equal(t, c.ok, CheckCombo(c.data, c.flagged, c.p), "%+v", c)
	}
}

func TestReceiverInSequence(t *testing.T) {
	var r Receiver
	r.Init(make([]uint64, 2))
	require.EqualValues(t, 128, r.Window())
	require.Equal(t, Place, r.Admit(false, 99))
	require.Equal(t, InSequence, r.Admit(true, 0))
	require.Equal(t, Buffered, r.Admit(true, 2))
	require.Equal(t, Buffered, r.Admit(true, 3))
	require.Equal(t, Stale, r.Admit(true, 3))
	_, ok := r.Release()
	require.False(t, ok, "1 is missing")
	require.Equal(t, InSequence, r.Admit(true, 1))
	for _, want := range []uint32{2, 3} {
		got, ok := r.Release()
		require.True(t, ok)
		require.Equal(t, want, got)
	}
	_, ok = r.Release()
	require.False(t, ok)
	require.Equal(t, Stale, r.Admit(true, 0))
	require.Equal(t, OutOfSequence, r.Admit(true, 4+r.Window()))
	require.EqualValues(t, 4, r.Next())
}

// TestReceiverWindowWraps: a window wider than one word buffers packets
// up to its far edge, across the slots' wrap, and hands them over in
// sequence; the zero Receiver buffers nothing.
func TestReceiverWindowWraps(t *testing.T) {
	var z Receiver
	require.Equal(t, InSequence, z.Admit(true, 0))
	require.Equal(t, OutOfSequence, z.Admit(true, 2))
	var r Receiver
	r.Init(make([]uint64, 3)) // 192: not a power of two
	w := r.Window()
	next := uint32(0)
	for round := range 5 {
		// The one the receiver waits for is lost; every later one up to
		// the window's far edge arrives first, in reverse.
		for o := next + w - 1; o > next; o-- {
			require.Equal(t, Buffered, r.Admit(true, o), "round %d ordinal %d", round, o)
		}
		require.Equal(t, OutOfSequence, r.Admit(true, next+w))
		require.Equal(t, InSequence, r.Admit(true, next))
		for want := next + 1; want < next+w; want++ {
			got, ok := r.Release()
			require.True(t, ok)
			require.Equal(t, want, got)
		}
		_, ok := r.Release()
		require.False(t, ok)
		next += w
		require.Equal(t, next, r.Next())
	}
}

func TestSenderAllocatesNothing(t *testing.T) {
	var est Estimator
	var s Sender
	allocs := testing.AllocsPerRun(100, func() {
		s.Begin(ModeIOI, 10, 10_000, true, &est, 0, 1)
		for range 10 {
			m := s.Next()
			s.Sent(m, 1000)
			s.Resolved(m.Flagged, true, 5, &est)
		}
	})
	require.Zero(t, allocs)
}

// FuzzReceiver feeds arbitrary (flag, phase, sequence number) packets: the
// receiver never hands a flagged packet over out of sequence and never
// panics.
func FuzzReceiver(f *testing.F) {
	f.Add([]byte{1, 0, 0, 1, 1, 0, 0, 2, 2, 5})
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Receiver
		r.Init(make([]uint64, 1+len(in)%3))
		next := uint32(0)
		buffered := map[uint32]bool{}
		for i := 0; i+2 < len(in); i += 3 {
			flagged := in[i]&1 != 0
			p := wire.Phase(in[i+1] & 3)
			ord := uint32(in[i+2])
			if !CheckCombo(in[i]&2 == 0, flagged, p) {
				continue
			}
			switch r.Admit(flagged, ord) {
			case InSequence:
				require.Equal(t, next, ord)
				next++
				for {
					o, ok := r.Release()
					if !ok {
						break
					}
					require.Equal(t, next, o)
					next++
				}
			case Buffered:
				require.Greater(t, ord, next)
				require.False(t, buffered[ord], "buffered twice")
				buffered[ord] = true
			case Place:
				require.False(t, flagged)
			case OutOfSequence:
				require.GreaterOrEqual(t, ord, next+r.Window())
			case Stale:
				require.True(t, ord < next || buffered[ord], "stale %d with next %d", ord, next)
			}
		}
	})
}
