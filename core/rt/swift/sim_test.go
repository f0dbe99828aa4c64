package swift_test

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/internal/testenv"
)

// The closed-loop test runs N backlogged Swift senders through one FIFO
// bottleneck in virtual time. A packet leaves its sender, reaches the
// bottleneck after the flow's forward propagation delay, waits its turn,
// takes one service time on the link and returns as an ACK after the
// flow's reverse delay (plus a little seeded jitter). The ACK's RTT sample
// is the whole fabric round trip, so it includes the queueing delay the
// controller is steering.

type simEventKind uint8

const (
	evArrive simEventKind = iota // packet reaches the bottleneck queue
	evAck                        // ACK reaches the sender
	evWake                       // pacing timer of a sender
)

type simEvent struct {
	at     clock.Time
	seq    uint64 // ties broken by scheduling order: deterministic
	kind   simEventKind
	flow   int
	sentAt clock.Time
}

type eventHeap []simEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type simFlow struct {
	cc          swift.Controller
	fwd, rev    time.Duration
	start       clock.Time
	inflight    int
	lastSend    clock.Time
	sentAny     bool
	wakePending bool
	delivered   int // ACKs in the measurement interval
}

type simConfig struct {
	flows   int
	seed    uint64
	service time.Duration // link time per packet: capacity is 1/service
	length  time.Duration // virtual time simulated; the second half is measured
	// lateStart, if set, holds back the second half of the flows until
	// then, so they must win their share from flows already converged.
	lateStart time.Duration
}

type simResult struct {
	utilisation float64 // link busy fraction in the measured half
	meanDelay   time.Duration
	meanTarget  time.Duration // flows' targets at the same ACKs
	p99Delay    time.Duration
	jain        float64 // Jain's fairness index over the flows' delivered packets
	minMaxShare float64 // least / greatest delivered
	meanCwnd    float64
	shares      []int
	pacedAcks   int // ACKs seen while the flow's window was below one packet
}

func (r simResult) String() string {
	return fmt.Sprintf("util %.3f delay mean %v p99 %v target mean %v jain %.3f min/max %.2f mean cwnd %.2f paced acks %d",
		r.utilisation, r.meanDelay, r.p99Delay, r.meanTarget, r.jain, r.minMaxShare, r.meanCwnd, r.pacedAcks)
}

type sim struct {
	cfg      simConfig
	rng      *rand.Rand
	flows    []simFlow
	events   eventHeap
	seq      uint64
	linkFree clock.Time
	measure  clock.Time

	busy             time.Duration
	delaySum, tgtSum float64
	cwndSum          float64
	samples          int
	delayHist        []int // per µs
	pacedAcks        int
}

func (s *sim) push(at clock.Time, kind simEventKind, flow int, sentAt clock.Time) {
	s.seq++
	heap.Push(&s.events, simEvent{at: at, seq: s.seq, kind: kind, flow: flow, sentAt: sentAt})
}

// trySend sends what flow f's window and pacing allow at now.
func (s *sim) trySend(f int, now clock.Time) {
	fl := &s.flows[f]
	for fl.inflight < fl.cc.Window() {
		if gap := fl.cc.PacingGap(); gap > 0 && fl.sentAny && now < fl.lastSend.Add(gap) {
			if !fl.wakePending {
				fl.wakePending = true
				s.push(fl.lastSend.Add(gap), evWake, f, 0)
			}
			return
		}
		fl.inflight++
		fl.lastSend, fl.sentAny = now, true
		s.push(now.Add(fl.fwd), evArrive, f, now)
	}
}

func runSim(cfg simConfig) simResult {
	s := &sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed)), delayHist: make([]int, 4096)}
	s.flows = make([]simFlow, cfg.flows)
	s.measure = clock.Time(cfg.length / 2)
	for i := range s.flows {
		fl := &s.flows[i]
		if err := fl.cc.Init(swift.DefaultParams()); err != nil {
			panic(err)
		}
		// Base round trips of 8-12µs, starts spread over the first 200µs.
		fl.fwd = time.Duration(4000 + s.rng.IntN(2000))
		fl.rev = time.Duration(4000 + s.rng.IntN(2000))
		fl.start = clock.Time(s.rng.IntN(200_000))
		if cfg.lateStart > 0 && i >= cfg.flows/2 {
			fl.start += clock.Time(cfg.lateStart)
		}
		s.push(fl.start, evWake, i, 0)
		fl.wakePending = true
	}
	end := clock.Time(cfg.length)
	for s.events.Len() > 0 {
		ev := heap.Pop(&s.events).(simEvent)
		if ev.at > end {
			break
		}
		now := ev.at
		switch ev.kind {
		case evArrive:
			depart := max(now, s.linkFree).Add(cfg.service)
			s.linkFree = depart
			if depart > s.measure && depart <= end {
				s.busy += cfg.service
			}
			jitter := time.Duration(s.rng.IntN(300))
			s.push(depart.Add(s.flows[ev.flow].rev+jitter), evAck, ev.flow, ev.sentAt)
		case evAck:
			fl := &s.flows[ev.flow]
			rtt := now.Sub(ev.sentAt)
			if now > s.measure {
				fl.delivered++
				s.delaySum += float64(rtt)
				s.tgtSum += float64(fl.cc.TargetDelay())
				s.cwndSum += fl.cc.Cwnd()
				s.samples++
				s.delayHist[min(int(rtt/time.Microsecond), len(s.delayHist)-1)]++
				if fl.cc.Cwnd() < 1 {
					s.pacedAcks++
				}
			}
			fl.cc.OnAck(now, rtt, 1)
			fl.inflight--
			s.trySend(ev.flow, now)
		case evWake:
			s.flows[ev.flow].wakePending = false
			s.trySend(ev.flow, now)
		}
	}

	r := simResult{
		utilisation: float64(s.busy) / float64(end-s.measure),
		meanDelay:   time.Duration(s.delaySum / float64(s.samples)),
		meanTarget:  time.Duration(s.tgtSum / float64(s.samples)),
		meanCwnd:    s.cwndSum / float64(s.samples),
		pacedAcks:   s.pacedAcks,
	}
	for i, seen := 0, 0; i < len(s.delayHist); i++ {
		seen += s.delayHist[i]
		if seen*100 >= s.samples*99 {
			r.p99Delay = time.Duration(i+1) * time.Microsecond
			break
		}
	}
	var sum, sumSq float64
	lo, hi := math.MaxInt, 0
	for i := range s.flows {
		d := s.flows[i].delivered
		r.shares = append(r.shares, d)
		sum += float64(d)
		sumSq += float64(d) * float64(d)
		lo, hi = min(lo, d), max(hi, d)
	}
	r.jain = sum * sum / (float64(len(s.flows)) * sumSq)
	r.minMaxShare = float64(lo) / float64(hi)
	return r
}

// simSeed is 1 unless -seed replays another run.
func simSeed(t *testing.T) uint64 {
	if seed, ok := testenv.Replay(t); ok {
		return seed
	}
	return 1
}

func TestClosedLoopConvergence(t *testing.T) {
	seed := simSeed(t)
	for _, n := range []int{1, 4, 16, 64} {
		t.Run(fmt.Sprintf("flows=%d", n), func(t *testing.T) {
			cfg := simConfig{flows: n, seed: seed, service: time.Microsecond, length: 40 * time.Millisecond}
			r := runSim(cfg)
			msg := fmt.Sprintf("replay with -seed=%d: %v", seed, r)
			t.Logf("seed %d flows %d: %v", seed, n, r)

			// The link stays busy: the flows together send at capacity.
			require.GreaterOrEqual(t, r.utilisation, 0.95, msg)
			require.LessOrEqual(t, r.utilisation, 1.0+1e-9, msg)
			// The fabric delay settles near the flows' target.
			require.InDelta(t, float64(r.meanTarget), float64(r.meanDelay), 0.2*float64(r.meanTarget), msg)
			require.Less(t, r.p99Delay, 2*r.meanTarget, msg)
			// Flows share the link fairly.
			if n > 1 {
				require.GreaterOrEqual(t, r.jain, 0.95, msg)
				require.GreaterOrEqual(t, r.minMaxShare, 0.6, msg)
			}
			if n == 64 {
				require.Positive(t, r.pacedAcks, "64 flows on a 10-packet pipe must run windows below 1: %s", msg)
			}
		})
	}
}

// TestClosedLoopLateJoiners starts half the flows once the others have
// converged: the newcomers, starting at InitialCwnd into a standing queue,
// must still end up with a fair share.
func TestClosedLoopLateJoiners(t *testing.T) {
	seed := simSeed(t)
	r := runSim(simConfig{flows: 8, seed: seed, service: time.Microsecond, length: 40 * time.Millisecond, lateStart: 10 * time.Millisecond})
	msg := fmt.Sprintf("replay with -seed=%d: %v shares %v", seed, r, r.shares)
	t.Logf("seed %d: %v shares %v", seed, r, r.shares)
	require.GreaterOrEqual(t, r.utilisation, 0.95, msg)
	require.InDelta(t, float64(r.meanTarget), float64(r.meanDelay), 0.2*float64(r.meanTarget), msg)
	require.GreaterOrEqual(t, r.jain, 0.95, msg)
	require.GreaterOrEqual(t, r.minMaxShare, 0.6, msg)
}

// TestClosedLoopSeeds checks that convergence does not hinge on one seed.
func TestClosedLoopSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("several seeds; skipped with -short")
	}
	base := simSeed(t)
	for k := range uint64(4) {
		seed := base*1000 + k + 2
		r := runSim(simConfig{flows: 16, seed: seed, service: time.Microsecond, length: 20 * time.Millisecond})
		msg := fmt.Sprintf("seed %d: %v", seed, r)
		require.GreaterOrEqual(t, r.utilisation, 0.95, msg)
		require.InDelta(t, float64(r.meanTarget), float64(r.meanDelay), 0.2*float64(r.meanTarget), msg)
		require.GreaterOrEqual(t, r.jain, 0.95, msg)
	}
}
