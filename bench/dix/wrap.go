package dix

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/peregrine-net/peregrine/core/dix"
)

// WrapResult is what WrapCheck saw.
type WrapResult struct {
	Transactions uint64 // Sends completed at the receiver
	Packets      uint64
	Misplaced    uint64 // packets whose index decoded to another Send's WQE
	Refused      uint64 // packets the receiver refused (not posted, beyond, stale)
	Reordered    uint64 // packets that arrived before an earlier-sent one
}

// WrapCheck runs txns Sends through the delivery index cfg alone, at the
// level of core/dix: a sender (dix.Window) builds each packet when it
// leaves, with the base it has then; packets (1 to 4 per Send) arrive in
// a random order among those in flight (up to the window's worth of
// Sends); the receiver (dix.Queue, WQEs posted as fast as slots free up)
// decodes each against its head, binds and completes; its completions
// reach the sender late and out of order (each ACK waits a random number
// of steps). A packet whose index decodes to any number but its Send's is
// misplaced. With an 8-bit relative index the numbers wrap every 256
// Sends, and the base tag every 256 acknowledgements.
func WrapCheck(cfg dix.Config, txns uint64, seed uint64) (WrapResult, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return WrapResult{}, err
	}
	depth := 256
	if cfg.Kind == dix.Absolute {
		depth = cfg.Depth
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	start := ^uint32(0) - 100
	win, err := dix.NewWindow(cfg.Outstanding, start)
	if err != nil {
		return WrapResult{}, err
	}
	q, err := dix.NewQueue(depth, depth, start)
	if err != nil {
		return WrapResult{}, err
	}
	type send struct {
		k          uint32
		pkts, sent int
	}
	type pkt struct {
		k     uint32
		index uint32
		tag   uint8
		last  bool
	}
	type ack struct {
		k   uint32
		due uint64
	}
	var (
		res      WrapResult
		sending  []send // Sends with packets still to build
		inFlight []pkt
		acks     []ack
		left     = map[uint32]int{} // receiver: packets still to come per Send
		step     uint64
		started  uint64
		lastSent uint32
		anySent  bool
	)
	for res.Transactions < txns {
		step++
		for q.CanPost() {
			q.Post()
		}
		// Start a Send when the window has room.
		if started < txns && r.IntN(3) > 0 {
			if k, ok := win.Take(); ok {
				started++
				sending = append(sending, send{k: k, pkts: 1 + r.IntN(4)})
			}
		}
		// Build one packet of a random Send in progress.
		if len(sending) > 0 && r.IntN(4) > 0 {
			j := r.IntN(len(sending))
			s := &sending[j]
			idx, tag := cfg.Encode(s.k, win.Base())
			s.sent++
			inFlight = append(inFlight, pkt{k: s.k, index: idx, tag: tag, last: s.sent == s.pkts})
			if _, ok := left[s.k]; !ok {
				left[s.k] = s.pkts
			}
			if s.sent == s.pkts {
				sending[j] = sending[len(sending)-1]
				sending = sending[:len(sending)-1]
			}
		}
		// Deliver one packet in flight, chosen at random.
		if len(inFlight) > 0 && r.IntN(3) > 0 {
			j := r.IntN(len(inFlight))
			p := inFlight[j]
			inFlight[j] = inFlight[len(inFlight)-1]
			inFlight = inFlight[:len(inFlight)-1]
			res.Packets++
			if anySent && int32(p.k-lastSent) < 0 {
				res.Reordered++
			}
			lastSent, anySent = p.k, true
			k, ok := dix.Decode(cfg.Kind, cfg.Width, uint32(depth), p.index, p.tag, q.Head())
			if !ok || k != p.k {
				res.Misplaced++
				continue
			}
			switch q.Arrive(k, false) {
			case dix.Placed, dix.BoundDirect, dix.BoundElement:
			default:
				res.Refused++
				inFlight = append(inFlight, p) // it comes again (RNR)
				continue
			}
			left[k]--
			if left[k] == 0 {
				delete(left, k)
				q.Complete(k)
				res.Transactions++
				acks = append(acks, ack{k: k, due: step + uint64(r.IntN(64))})
			}
		}
		// ACKs reach the sender late and out of order.
		for j := 0; j < len(acks); {
			if acks[j].due <= step && r.IntN(2) == 0 {
				win.Done(acks[j].k)
				acks[j] = acks[len(acks)-1]
				acks = acks[:len(acks)-1]
				continue
			}
			j++
		}
	}
	return res, nil
}

// StackWrapProfile is the fabric of the full-stack wrap run: four paths
// of different delays, 5 % of frames held back 20 µs more (so they are
// overtaken), 1 % loss each way. No line rate: a rate-limited link moves
// the virtual clock for every frame, and the simulator then polls every
// stage about 7 times per Send (about 16 s for a million); without it the
// frames of the window move together and a million Sends take a few
// seconds.
const StackWrapProfile = "loss=1%,paths=4,spread=30us,delay=10us,reorder=5%/20us"

// StackWrapResult is what StackWrap saw.
type StackWrapResult struct {
	Sends     int
	Misplaced uint64 // WQEs holding another Send's bytes, plus packets whose index named another Send's WQE
	Elements  uint64 // Sends bound through an element (they arrived out of order)
	Stale     uint64 // packets for WQEs consumed already (dropped; duplicates)
	Retransmits,
	Polls uint64
	VirtualTime, RealTime time.Duration
}

// StackWrap runs sends one-packet Sends (1 KiB) through the whole stack —
// txn's Send and receive queue, core/rt, mem ports, the fabric emulator,
// the simulator's switch, on the virtual clock — with index cfg (an 8-bit
// relative one wraps its numbers and base tags every 256 Sends), 64
// outstanding, over StackWrapProfile. Each receive completion's WQE is
// checked against the bytes of the Send its posting order names (every
// Send's bytes are its own); any other outcome is misplaced.
func StackWrap(cfg dix.Config, sends int, seed uint64) (StackWrapResult, error) {
	t0 := time.Now()
	r, err := SimulateWorkload(Workload{Index: cfg, Profile: StackWrapProfile, Sends: sends, Window: 64, Min: 1024, Max: 1024, Seed: seed, NoTiming: true})
	if err != nil {
		return StackWrapResult{}, err
	}
	if r.CompletionErr > 0 {
		return StackWrapResult{}, fmt.Errorf("dix: stack wrap run: %d of %d Sends completed in error", r.CompletionErr, sends)
	}
	return StackWrapResult{
		Sends: sends, Misplaced: uint64(r.Mismatches) + r.Stats.Forged, Elements: r.Stats.BindsElement, Stale: r.Stats.Stale,
		Retransmits: r.Retransmits, Polls: r.Polls, VirtualTime: r.VirtualTime, RealTime: time.Since(t0),
	}, nil
}
