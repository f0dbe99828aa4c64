package sim

import (
	"sort"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Direction names one way through the network.
type Direction uint8

// Directions.
const (
	AtoB Direction = iota
	BtoA
)

func (d Direction) String() string {
	if d == AtoB {
		return "a→b"
	}
	return "b→a"
}

// Action is what a Tap's hook decides for one frame.
type Action struct {
	Drop   bool          // lose the frame
	Copies int           // extra identical copies to send after it
	Delay  time.Duration // held this much longer than Tap.Delay (later frames overtake it)
}

// TapStats count what a Tap did.
type TapStats struct {
	Passed, Dropped, Duplicated, Injected uint64
}

// Tap is a scripted network for scenario tests: every frame meets a hook
// that may drop, duplicate or delay it, and the test may inject frames of
// its own (forgeries). Frames leave in (release time, arrival) order. It is
// the deterministic, hand-driven sibling of the fabric.
type Tap struct {
	// Delay is the one-way delay of every frame.
	Delay time.Duration
	// Hook sees each frame, decoded (f is nil when it does not decode), and
	// its bytes; nil passes everything.
	Hook func(dir Direction, f *wire.Frame, raw []byte) Action

	sides [2]port.Port // sides[AtoB] reads a's frames and writes b's
	pool  *mbuf.Pool
	held  []heldFrame
	seq   uint64
	now   clock.Time
	buf   []mbuf.Handle
	out   []mbuf.Handle
	stats TapStats
}

type heldFrame struct {
	at  clock.Time
	seq uint64
	dir Direction
	h   mbuf.Handle
}

func newTap(pool *mbuf.Pool, sideA, sideB port.Port) *Tap {
	return &Tap{sides: [2]port.Port{sideA, sideB}, pool: pool, buf: make([]mbuf.Handle, 64), out: make([]mbuf.Handle, 0, 64)}
}

// Name implements lcore.Stage.
func (t *Tap) Name() string { return "tap" }

// Stats returns the tap's counters.
func (t *Tap) Stats() TapStats { return t.stats }

// Poll takes every frame from both sides through the hook and releases the
// frames that are due.
func (t *Tap) Poll(now clock.Time) int {
	t.now = max(now, t.now)
	work := 0
	for dir := range 2 {
		n := t.sides[dir].RxBurst(0, t.buf)
		for _, h := range t.buf[:n] {
			work++
			raw := t.pool.Data(h)
			var f wire.Frame
			fp := &f
			if f.Decode(raw) != nil {
				fp = nil
			}
			act := Action{}
			if t.Hook != nil {
				act = t.Hook(Direction(dir), fp, raw)
			}
			if act.Drop {
				t.stats.Dropped++
				t.pool.Free([]mbuf.Handle{h})
				continue
			}
			at := t.now.Add(t.Delay + act.Delay)
			for range act.Copies {
				d := make([]mbuf.Handle, 1)
				if t.pool.AllocBulk(d) == 1 {
					copy(t.pool.Append(d[0], len(raw)), raw)
					t.hold(at, Direction(dir), d[0])
					t.stats.Duplicated++
				}
			}
			t.hold(at, Direction(dir), h)
		}
	}
	return work + t.release()
}

func (t *Tap) hold(at clock.Time, dir Direction, h mbuf.Handle) {
	t.seq++
	hf := heldFrame{at: at, seq: t.seq, dir: dir, h: h}
	i := sort.Search(len(t.held), func(i int) bool {
		x := t.held[i]
		return x.at > at || (x.at == at && x.seq > hf.seq)
	})
	t.held = append(t.held, heldFrame{})
	copy(t.held[i+1:], t.held[i:])
	t.held[i] = hf
}

// release sends the due frames, in order, each to the far side of its
// direction.
func (t *Tap) release() int {
	sent := 0
	for len(t.held) > 0 && t.held[0].at <= t.now {
		hf := t.held[0]
		out := t.sides[1-hf.dir]
		t.out = append(t.out[:0], hf.h)
		if out.TxBurst(0, t.out) == 0 {
			break // the ring is full: next Poll
		}
		t.held = t.held[1:]
		t.stats.Passed++
		sent++
	}
	return sent
}

// Inject sends raw toward the endpoint at the far end of dir (AtoB: to b)
// as if it had come through the network, after Delay.
func (t *Tap) Inject(dir Direction, raw []byte) {
	d := make([]mbuf.Handle, 1)
	if t.pool.AllocBulk(d) != 1 {
		panic("sim: Tap.Inject: pool empty")
	}
	copy(t.pool.Append(d[0], len(raw)), raw)
	t.hold(t.now.Add(t.Delay), dir, d[0])
	t.stats.Injected++
}

// Held returns the number of frames in flight.
func (t *Tap) Held() int { return len(t.held) }

// NextDeadline returns when the next held frame is due.
func (t *Tap) NextDeadline() (clock.Time, bool) {
	if len(t.held) == 0 {
		return 0, false
	}
	return t.held[0].at, true
}

// Stop frees every frame in flight.
func (t *Tap) Stop(now clock.Time) {
	for _, hf := range t.held {
		t.pool.Free([]mbuf.Handle{hf.h})
	}
	t.held = t.held[:0]
	for dir := range 2 {
		for {
			n := t.sides[dir].RxBurst(0, t.buf)
			if n == 0 {
				break
			}
			t.pool.Free(t.buf[:n])
		}
	}
}

// Close stops the tap and closes its two ports.
func (t *Tap) Close() error {
	t.Stop(t.now)
	err1 := t.sides[0].Close()
	err2 := t.sides[1].Close()
	if err1 != nil {
		return err1
	}
	return err2
}
