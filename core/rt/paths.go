package rt

import (
	"math/bits"
	"sync/atomic"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Multipath health: how a connection steers its packets around a path
// that lost them, as Falcon's protective reroute and UET's entropy values
// do. The transport cannot see the fabric's paths, only what picks them:
// a packet's UDP source port, which an ECMP switch hashes with the rest
// of the 5-tuple.
//
// Sprayed packets (a SendHeader.SrcPort in IOIEntropyPorts: IOI's middle,
// or a wholly sprayed message) leave on one of the connection's numEV
// entropy values, dealt in turn over the ones in good standing; the port
// the ULP gave only says that the packet may be sprayed. A value whose
// packets are lost twice without one acknowledged in between is suspect:
// no new packet takes it, except one probe per retransmit timeout, and a
// probe acknowledged restores it. A resend never takes the value its
// packet was lost on, so the resend of a packet lost on a dead path takes
// another path even before the value is suspect. When every value is
// suspect, all are used again (the fabric may spray on its own, round
// robin or adaptively, and the values then tell nothing).
//
// Packets flagged in order keep one path, the one the connection's flow
// hashes to. When orderedMoveAfter flagged packets are each lost twice,
// the second time on it, without one acknowledged in between (a single
// resend may be spurious: an original late behind a queue, a timer that
// fired while the loop was descheduled), the connection moves its
// ordered path: from then on every flagged packet (resends included)
// leaves with the source port of one of its good entropy values, a new
// flow for the fabric's hash. The receiver accepts a data packet from any
// port in IOIEntropyPorts (sprayedFrom).
//
// The ACKs of a receiver take one path too, the one its 5-tuple hashes
// to. When the peer resends packets we had (stale or duplicate), each
// resent at least twice, in ackMoveAfter successive rounds of its
// recovery (each packet resent more often than the last counted) spread
// over at least the shortest timeout, while our window stood still, our
// ACKs of them did not reach it: a peer that hears no ACK resends by its
// timer, while a burst of early resends, or of timeouts that fired
// together in a descheduled loop, is one round. The receiver then moves
// the path of its ACKs and NACKs to the source port of one of its
// entropy values. Until then they leave from the connection's own port,
// so that the sender's fast receive path takes them; it accepts ACKs and
// NACKs from any port of IOIEntropyPorts.
//
// A loss is a resend, early or by the timer; a resend the peer asked for
// by holding it off (an RNR or out-of-window NACK) is not a loss of the
// path. A sprayed packet lost while packets sent with it were
// acknowledged was lost to its path, which the fabric may have chosen by
// itself (round robin, at random, adaptively): such a loss does not spend
// the packet's retry budget (Options.RetryLimit), which is there to find
// a dead peer, up to rerouteBudget budgets in all; with one of four paths
// dead, a packet spent its eight transmissions on it once in a few tens
// of thousands of packets, in well under a millisecond of early resends,
// and its message was abandoned. Steering rewrites the source port of the copy being sent (its UDP
// checksum updated incrementally) and allocates nothing.

const (
	// numEV is the entropy values per connection: enough that every path
	// of a fabric of up to a few tens of paths hashes some of them.
	numEV = 32
	// suspectAfter is the losses in a row that make an entropy value
	// suspect; orderedMoveAfter those that move the ordered path.
	suspectAfter     = 2
	orderedMoveAfter = 2
	ackMoveAfter     = 2
	// rerouteBudget bounds the transmissions of a sprayed packet whose
	// losses did not count (steer), in retry budgets.
	rerouteBudget = 4
)

// retxCtx.route: how a packet's transmissions are steered.
const (
	routeNone    = 0    // the connection's own source port
	routeProbe   = 0x40 // with a value's slot+1: the transmission probed a suspect value
	routeSprayed = 0xfe // sprayed, not sent yet
	routeOrdered = 0xff // flagged in order: the ordered path's port
)

// pathSet is one connection's entropy values and their standing. The zero
// value is ready: the values are drawn at the first sprayed packet.
type pathSet struct {
	ev      [numEV]uint16
	fails   [numEV]uint8 // losses in a row
	suspect uint32       // bit i: value i is suspect
	next    uint8        // the slot the next sprayed packet starts from
	probe   uint8        // the suspect slot the next probe starts from
	ready   bool
	probeAt clock.Time // no probe before then

	// The ordered path: its source port (0: the connection's own), when
	// it last moved, flagged losses in a row since, the slot it last took.
	ordPort  uint16
	ordFails uint8
	ordSlot  uint8
	ordSince clock.Time

	// The path of our ACKs and NACKs: their source port (0: the
	// connection's own), the packets the peer sent again in a row while
	// the window (dupWin) stood at dupBSN, the slot it last took.
	ackPort uint16
	dupRun  uint8
	dupWin  uint8
	ackSlot uint8
	dupBSN  uint32
	// dupRetry is the highest resend count (wire.Header.Retry) of the
	// run: only a packet resent more often than the run's last counts.
	dupRetry uint8
	dupSince clock.Time // the run's first packet
}

// PathStats are an endpoint's multipath-health counters (all only grow).
type PathStats struct {
	// Reroutes: resends of sprayed packets sent on another entropy value
	// than the one they were lost on.
	Reroutes uint64
	// Suspects: entropy values found failing (no new packet takes them
	// but probes); Probes: packets sent on one; Restored: values a probe
	// brought back.
	Suspects, Probes, Restored uint64
	// OrderedMoves: times a connection moved its ordered path;
	// AckMoves: times a receiver moved the path of its ACKs.
	OrderedMoves, AckMoves uint64
}

// pathCounters are updated when a path's standing changes, never per
// packet, so they are atomics written at once.
type pathCounters struct {
	reroutes, suspects, probes, restored, orderedMoves, ackMoves atomic.Uint64
}

// PathStats returns the multipath-health counters; any goroutine.
func (e *Endpoint) PathStats() PathStats {
	p := &e.pathCnt
	return PathStats{Reroutes: p.reroutes.Load(), Suspects: p.suspects.Load(), Probes: p.probes.Load(),
		Restored: p.restored.Load(), OrderedMoves: p.orderedMoves.Load(), AckMoves: p.ackMoves.Load()}
}

// routeOf is how a new packet described by sh is steered.
func routeOf(sh *SendHeader) uint8 {
	switch {
	case sh.Flags.Has(wire.FlagIOIInOrder):
		return routeOrdered
	case sh.SrcPort >= IOIEntropyPorts:
		return routeSprayed
	}
	return routeNone
}

// init draws the connection's entropy values: distinct ports of
// IOIEntropyPorts, different for every connection.
func (p *pathSet) init(seed uint64, cid uint32) {
	k := uint64(0)
	for i := range p.ev {
	draw:
		for {
			k++
			v := IOIEntropyPorts | uint16(mix64(seed^uint64(cid)<<20^k)&(1<<14-1))
			for _, u := range p.ev[:i] {
				if u == v {
					continue draw
				}
			}
			p.ev[i] = v
			break
		}
	}
	p.ready = true
}

// mix64 is the MurmurHash3 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// nextIn returns the first slot of mask at or after from (cyclically), or
// -1 when mask is empty.
func nextIn(mask uint32, from uint8) int {
	if mask == 0 {
		return -1
	}
	r := bits.RotateLeft32(mask, -int(from))
	return (int(from) + bits.TrailingZeros32(r)) % numEV
}

// pick returns the slot of a sprayed transmission, never avoid (the slot
// its packet was just lost on, or -1): a suspect one when probe says a
// probe is due and there is one, else the next good one in turn.
func (p *pathSet) pick(avoid int, probe bool) (slot int, probed bool) {
	all := uint32(1<<numEV - 1)
	not := all
	if avoid >= 0 {
		not &^= 1 << avoid
	}
	if probe {
		if s := nextIn(p.suspect&not, p.probe); s >= 0 {
			p.probe = uint8(s+1) % numEV
			return s, true
		}
	}
	s := nextIn(^p.suspect&not, p.next)
	if s < 0 {
		s = nextIn(not, p.next) // every value suspect: use them all
	}
	p.next = uint8(s+1) % numEV
	return s, false
}

// steer picks the source port of x's transmission now being built in
// frame, learning from it when it is a resend (its previous one was lost).
func (e *Endpoint) steer(c *conn, x *retxCtx, frame []byte) {
	if x.resync {
		return // a resync is no data packet: the connection's port
	}
	p := &c.paths
	lost := x.sends > 0 && x.holdUntil == 0
	if x.route == routeOrdered {
		// Only a packet lost twice, the second time on this path, speaks
		// against the path: a single resend may be a spurious one (the
		// original late behind a queue, a timer that fired while the
		// loop was descheduled), and on a healthy fabric with reordering
		// those moved the path every few tens of milliseconds.
		if lost && x.sends >= 2 && x.sentAt >= p.ordSince {
			if p.ordFails++; p.ordFails >= orderedMoveAfter {
				e.moveOrdered(c)
			}
		}
		if p.ordPort != 0 {
			wire.SetClass(frame, p.ordPort, 0)
		}
		return
	}
	if !p.ready {
		p.init(e.hashSeed, c.localCID)
	}
	avoid := -1
	if x.route != routeSprayed {
		avoid = int(x.route&^routeProbe) - 1
		if lost {
			if p.fails[avoid] < 255 {
				p.fails[avoid]++
			}
			if p.fails[avoid] >= suspectAfter && p.suspect&(1<<avoid) == 0 {
				p.suspect |= 1 << avoid
				e.pathCnt.suspects.Add(1)
			}
			e.pathCnt.reroutes.Add(1)
			if x.tx > 0 && int(x.sends) < rerouteBudget*(e.opts.RetryLimit+1) &&
				c.rtt.rack.win[c.window(x.win)].progress > x.sentAt {
				// Lost while packets sent with it got through: a path
				// lost it, not the peer or the connection, and on a
				// fabric that sprays on its own (round robin, at random,
				// adaptively) no entropy value avoids a dead path. It
				// does not spend the retry budget, up to rerouteBudget
				// times that budget in all.
				x.tx--
			}
		}
	}
	probe := x.sends == 0 && p.suspect != 0 && e.now >= p.probeAt
	slot, probed := p.pick(avoid, probe)
	x.route = uint8(slot + 1)
	if probed {
		x.route |= routeProbe
		p.probeAt = e.now.Add(c.rtt.rto)
		e.pathCnt.probes.Add(1)
	}
	wire.SetClass(frame, p.ev[slot], 0)
}

// moveOrdered gives the connection's ordered path a new flow: the port of
// its next entropy value in good standing.
func (e *Endpoint) moveOrdered(c *conn) {
	p := &c.paths
	p.ordPort, p.ordFails, p.ordSince = e.newFlow(c, &p.ordSlot), 0, e.now
	e.pathCnt.orderedMoves.Add(1)
}

// newFlow returns the port of the connection's next entropy value in good
// standing from *cursor on (any, when none is), and moves the cursor past
// it: a new flow for a path that moves.
func (e *Endpoint) newFlow(c *conn, cursor *uint8) uint16 {
	p := &c.paths
	if !p.ready {
		p.init(e.hashSeed, c.localCID)
	}
	s := nextIn(^p.suspect&(1<<numEV-1), *cursor)
	if s < 0 {
		s = int(*cursor) % numEV
	}
	*cursor = uint8(s+1) % numEV
	return p.ev[s]
}

// pathAcked learns from x's acknowledgement, before its context goes: its
// path carries packets.
func (e *Endpoint) pathAcked(c *conn, x *retxCtx) {
	p := &c.paths
	switch r := x.route; {
	case r == routeNone || r == routeSprayed:
	case r == routeOrdered:
		if x.sentAt >= p.ordSince {
			p.ordFails = 0
		}
	default:
		s := int(r&^routeProbe) - 1
		switch {
		case p.suspect&(1<<s) == 0:
			p.fails[s] = 0
		case r&routeProbe != 0:
			// Only a probe speaks for a suspect value: a packet sent on
			// it before it failed says nothing of it now.
			p.suspect &^= 1 << s
			p.fails[s] = 0
			e.pathCnt.restored.Add(1)
		}
	}
}

// pathNotNew learns from a packet of window w (header hd) the peer sent
// again though we had it. A first resend may be an early one; from the
// second on, our acknowledgement of the first did not reach the peer
// either. ackMoveAfter of those in a row, while the window stood still,
// move the path of our ACKs.
func (e *Endpoint) pathNotNew(c *conn, w wire.Window, hd *wire.Header) {
	if hd.Retry < 2 {
		return
	}
	p := &c.paths
	k := c.window(w)
	if bsn := c.rx[k].bsn; bsn != p.dupBSN || p.dupWin != uint8(k) || p.dupRun == 0 {
		p.dupBSN, p.dupWin, p.dupRun, p.dupRetry, p.dupSince = bsn, uint8(k), 0, 0, e.now
	}
	if hd.Retry <= p.dupRetry {
		// The same round of the peer's recovery: one burst of resends
		// (its loop descheduled past their timers, early resends of
		// packets late behind a queue) says once, not per packet, that
		// it had not heard from us.
		return
	}
	p.dupRetry = hd.Retry
	if p.dupRun++; p.dupRun < ackMoveAfter || e.now.Sub(p.dupSince) < e.opts.MinRTO {
		// A peer that hears no ACK resends by its timer, rounds at least
		// the shortest timeout apart; early resends come faster.
		return
	}
	p.ackPort, p.dupRun, p.dupRetry = e.newFlow(c, &p.ackSlot), 0, 0
	e.pathCnt.ackMoves.Add(1)
}

// steerAck gives an ACK or NACK being built in frame the path of our
// ACKs.
func (c *conn) steerAck(frame []byte) {
	if c.paths.ackPort != 0 {
		wire.SetClass(frame, c.paths.ackPort, 0)
	}
}
