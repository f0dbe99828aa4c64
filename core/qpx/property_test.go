package qpx_test

import (
	"math/rand/v2"
	"testing"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// seeds is how many seeds the property suite runs: PEREGRINE_SEEDS, else
// 1000 (100 under -short or -race).
var seeds = testenv.Seeds{Full: 1000, Short: 100, Race: 100}

// packet is one packet in flight: the number it carries and the QP
// incarnation (owner) that sent or is meant to get it.
type packet struct {
	qpn   uint32
	owner uint64
}

// TestPropertyChurnWithStalePackets opens and closes QPs at random while
// packets for them are in flight, delivered late and out of order, with
// jumps of the rotation counter (across the wrap, through whole rotations
// when nothing is in flight) and forged numbers. Invariants, per seed:
//   - no packet ever reaches a QP other than the incarnation it was sent
//     to: a stale packet matches nothing;
//   - every counter is exactly the model's;
//   - a full table refuses Open with ErrFull and evicts nothing;
//   - within a rotation no number is handed out twice.
func TestPropertyChurnWithStalePackets(t *testing.T) {
	if seed, ok := testenv.Replay(t); ok {
		churn(t, seed)
		return
	}
	n := seeds.N(t)
	for seed := range n {
		if !churn(t, uint64(seed)) {
			t.Fatalf("seed %d failed (replay: go test ./core/qpx -run TestPropertyChurnWithStalePackets -seed=%d)", seed, seed)
		}
	}
}

func churn(t *testing.T, seed uint64) bool {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	slots := 1 + r.IntN(64)
	start := uint32(0)
	if r.IntN(4) == 0 {
		start = qpx.LastQPN - uint32(r.IntN(200)) // begin near the wrap
	}
	tb, err := qpx.New(qpx.Options{Slots: slots, Seed: seed, Start: start})
	if err != nil {
		t.Error(err)
		return false
	}
	var (
		owners   = map[uint32]uint64{} // live qpn -> incarnation
		inFlight []packet
		nextOwn  uint64 = 1
		// Handed out since the last full rotation: a repeat is a bug.
		handed = map[uint32]bool{}
		// Expected counters.
		translated, retired, unknown, opened, closed, full uint64
	)
	fail := func(format string, args ...any) bool {
		t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
		return false
	}
	steps := 200 + r.IntN(400)
	for range steps {
		switch op := r.IntN(100); {
		case op < 25: // open
			q, l, err := tb.Open(qpx.Context{Ref: nextOwn})
			if len(owners) == slots {
				full++
				if err == nil {
					return fail("Open succeeded with %d of %d slots live", len(owners), slots)
				}
				continue
			}
			if err != nil {
				return fail("Open: %v", err)
			}
			if _, live := owners[q]; live {
				return fail("Open handed out live number %#x", q)
			}
			if handed[q] {
				return fail("Open reused %#x within a rotation", q)
			}
			handed[q] = true
			if tb.Context(l).Ref != nextOwn {
				return fail("context not initialised")
			}
			owners[q] = nextOwn
			nextOwn++
			opened++
		case op < 40: // close a random live QP
			for q := range owners {
				if err := tb.Close(q); err != nil {
					return fail("Close %#x: %v", q, err)
				}
				delete(owners, q)
				closed++
				break
			}
		case op < 75: // a packet for a live QP goes in flight
			for q, o := range owners {
				inFlight = append(inFlight, packet{q, o})
				break
			}
		case op < 78: // a forged or reserved number
			bad := []uint32{0, 1, qpx.MaxQPN, 1 << 24, 0xffffffff}[r.IntN(5)]
			inFlight = append(inFlight, packet{bad, 0})
		case op < 97: // deliver a random packet in flight (late, out of order)
			if len(inFlight) == 0 {
				continue
			}
			i := r.IntN(len(inFlight))
			p := inFlight[i]
			inFlight[i] = inFlight[len(inFlight)-1]
			inFlight = inFlight[:len(inFlight)-1]
			l, ok := tb.Translate(p.qpn)
			cur, live := owners[p.qpn]
			switch {
			case p.owner == 0:
				unknown++
				if ok {
					return fail("forged number %#x matched local %d", p.qpn, l)
				}
			case live && cur == p.owner:
				translated++
				if !ok || tb.Context(l).Ref != p.owner {
					return fail("packet for live QP %#x lost or misrouted", p.qpn)
				}
			default:
				retired++
				if ok {
					return fail("stale packet for %#x (incarnation %d) reached incarnation %d", p.qpn, p.owner, tb.Context(l).Ref)
				}
			}
		default: // jump the counter
			if len(inFlight) > 0 && r.IntN(2) == 0 {
				// Packets never outlive a rotation: a short jump only.
				to := uint32(qpx.FirstQPN + (uint64(tb.Next()-qpx.FirstQPN)+uint64(r.IntN(1000)))%qpx.Space)
				if err := tb.FastForward(to); err != nil {
					return fail("%v", err)
				}
				continue
			}
			// Nothing in flight can be stale now: run a whole rotation
			// (or most of one) through.
			inFlight = inFlight[:0]
			to := uint32(qpx.FirstQPN + r.IntN(qpx.Space))
			before := tb.Stats().Rotations
			if err := tb.FastForward(to); err != nil {
				return fail("%v", err)
			}
			if to <= tb.Next() && tb.Stats().Rotations < before {
				return fail("rotations went back")
			}
			clear(handed)
			for q := range owners {
				handed[q] = true
			}
		}
	}
	s := tb.Stats()
	want := qpx.Stats{
		Live: len(owners), Slots: slots, Opened: opened, Closed: closed, RefusedFull: full,
		Translated: translated, DropRetired: retired, DropUnknown: unknown,
		Rotations: s.Rotations, SkippedLive: s.SkippedLive, Next: s.Next,
	}
	if s != want {
		return fail("counters\n got %v\nwant %v", s, want)
	}
	return true
}

// TestFullRotation runs the counter through all 2^24 - 3 numbers by real
// opens and closes (no fast-forward) with one QP held throughout: every
// number is handed out exactly once, the held one never, and then the
// first number comes round again.
func TestFullRotation(t *testing.T) {
	if testing.Short() || testenv.Race {
		t.Skip("16 million opens: not under -short or -race")
	}
	tb := newTable(t, qpx.Options{Slots: 2})
	held, _, err := tb.Open(qpx.Context{})
	if err != nil {
		t.Fatal(err)
	}
	prev := held
	for i := 1; i < qpx.Space; i++ {
		q, _, err := tb.Open(qpx.Context{})
		if err != nil {
			t.Fatal(err)
		}
		if q != prev+1 {
			t.Fatalf("open %d: got %#x after %#x", i, q, prev)
		}
		prev = q
		if err := tb.Close(q); err != nil {
			t.Fatal(err)
		}
	}
	if prev != qpx.LastQPN {
		t.Fatalf("rotation ended at %#x", prev)
	}
	q, _, err := tb.Open(qpx.Context{})
	if err != nil {
		t.Fatal(err)
	}
	if q != qpx.FirstQPN+1 {
		t.Fatalf("after a rotation the first reuse is %#x, want %#x (FirstQPN is held)", q, qpx.FirstQPN+1)
	}
	s := tb.Stats()
	if s.Rotations != 1 || s.SkippedLive != 1 {
		t.Fatalf("stats %v", s)
	}
}
