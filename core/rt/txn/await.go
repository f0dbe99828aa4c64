package txn

import (
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// A connection awaits its peer (rt.Conn.SetAwaiting, so that a silent
// peer is probed and, gone, found) exactly when the peer holds the next
// move: the connection holds a transaction, and nothing of ours is
// pending on it —
//
//   - nothing queued in the scheduler (a packet not yet sent, one blocked
//     on the connection's window or establishment, paced, or waiting its
//     fair share behind other connections): our own backlog is not the
//     peer's silence, and with a thousand connections sharing one
//     scheduler, probing every connection whose next packet waits its turn
//     spent the transmit budget on probes instead of the work;
//   - no peer's push waiting in our grant queue for incast credit (ours
//     to give, again not the peer's silence);
//   - nothing unacknowledged in the transport: each such packet has its
//     retransmission timer, which finds a peer gone (RetryLimit) without
//     a probe.
//
// What is left is a connection that has sent all it has and waits for a
// response: a pull's data, a grant, a push's data after our grant, a
// peer's request being delivered in order, an abort notice's
// acknowledgement — or, closing with no transaction left, the peer's
// ConnClose. A connection that only has work of its own pending
// cannot wait forever either: its queued packets go out (the scheduler
// serves every flow; a blocked one reopens on its ACKs, whose packets are
// outstanding), and each is then covered by retransmission.
//
// The state changes with events of the packet path (a packet queued or
// sent, an ACK, a context taken or freed), so it is not decided there:
// each such event marks its connection (awaitMark: a flag and, the first
// time, an append to a preallocated list), and Poll settles the marked
// connections once before the transport's Poll (whose timers send the
// probes) and once after it (whose ACKs and requests changed them). The
// transport hears only transitions, and only the settled ones: a packet
// sent and its successor queued in the same round is no transition at
// all, so a steady stream of work on a connection costs no timer
// operation, and a connection's transitions are at most two per wait for
// its peer.
type awaitSet struct {
	dirty  []int32 // connections marked since the last settle, each once
	marked []bool  // by connection index: in dirty
	// ons and offs count the transitions handed to the transport (tests
	// bound them).
	ons, offs uint64
}

func (a *awaitSet) init(conns int) {
	a.dirty = make([]int32, 0, conns)
	a.marked = make([]bool, conns)
}

// awaitMark records that connection ci's awaiting may have changed.
func (e *Endpoint) awaitMark(ci int32) {
	a := &e.aw
	if ci < 0 || int(ci) >= len(a.marked) || a.marked[ci] {
		return
	}
	a.marked[ci] = true
	a.dirty = append(a.dirty, ci) // at most one entry per connection: no growth
}

// settleAwait tells the transport the awaiting of every marked connection
// that changed.
func (e *Endpoint) settleAwait() {
	a := &e.aw
	for _, ci := range a.dirty {
		a.marked[ci] = false
		c := &e.conns[ci]
		if !c.live {
			continue // its transport connection ended with it
		}
		want := e.awaitsPeer(ci, c)
		if want == c.awaiting {
			continue
		}
		c.awaiting = want
		c.rc.SetAwaiting(want)
		if want {
			a.ons++
		} else {
			a.offs++
		}
	}
	a.dirty = a.dirty[:0]
}

// awaitsPeer reports whether live connection ci waits for its peer and
// for nothing of its own (see awaitSet).
func (e *Endpoint) awaitsPeer(ci int32, c *conn) bool {
	if c.count == 0 {
		// Closing: our ConnClose went (or waits in the transport), and
		// the connection ends when the peer's comes. A peer that vanished
		// after acknowledging ours would otherwise leave it closing
		// forever, with no timer running (fault suite, link-flap seed
		// 710); probing it fails the connection instead.
		return c.closeSent
	}
	if c.grantHead >= 0 {
		return false
	}
	if e.sch.FlowLen(int(ci), sched.ClassData) > 0 || e.sch.FlowLen(int(ci), sched.ClassRequest) > 0 {
		return false
	}
	return c.rc.Outstanding(wire.WindowRequest) == 0 && c.rc.Outstanding(wire.WindowData) == 0
}
