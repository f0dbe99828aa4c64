package peregrine

import (
	"context"
	"fmt"
)

// Recvs posted ahead, through the sidecar. A blocking Recv that got a
// message posts the connection's next Recv at once, with a run of the
// channel's buffers as long as the buffer it was given, before any call
// asks for it: the appliance places the next message in that run as it
// arrives, and the next Recv finds it there (often reaped already, with
// the completion of the Send before it) instead of a descriptor's trip
// through the appliance's loop and back after the call. An
// application's request-response loop pays one trip through the
// appliance a round trip instead of two.
//
// What a Recv posted ahead changes, and what it keeps:
//   - A connection has one at most, posted only after a Recv with a
//     message, of that Recv's buffer's length, and only while the Recvs
//     posted ahead hold at most 1/aheadShare of the channel's buffers: a
//     Send always finds room, whatever the connections wait for.
//   - A message longer than the buffer posted ahead stays queued in the
//     appliance, as for any Recv too short: the Recv that took the op
//     posts a Recv of its own. A message that fits the run but not the
//     buffer of the Recv that takes it stays here, held, for a Recv with
//     a larger buffer (ErrTooLarge until then), as the appliance would
//     keep it.
//   - It ends on the connection's Timeout like any Recv; one that ended
//     so before a call took it is set aside, and the call posts its own.
//   - A call whose context ends while it waits for one cancels it, as it
//     would its own Recv.
//   - The client does not count it in flight until a call takes it (its
//     completion goroutine polls the ring only for counted ops): an idle
//     connection with a Recv posted ahead costs no CPU.
//   - Closing the connection releases its run and its op: the close, the
//     completion or the post, whichever comes last (each looks under amu).

// aheadShare: the Recvs posted ahead hold at most 1/aheadShare of the
// channel's buffers.
const aheadShare = 8

// recv is a blocking Recv: it takes the Recv posted ahead, if any, and
// posts the next one once it has its message.
func (sc *sidecarConn) recv(ctx context.Context, buf []byte) (int, error) {
	if err := sc.check(opRecv, buf, nil, 0, RemoteAddr{}); err != nil {
		return 0, err
	}
	op, err := sc.takeAhead(len(buf))
	if err != nil {
		return 0, err
	}
	if op != nil {
		if n, err, done := sc.waitAhead(ctx, op, buf); done {
			if err == nil {
				sc.postAhead(len(buf))
			}
			return n, err
		}
	}
	n, err := sc.run(ctx, opRecv, buf, nil, 0, RemoteAddr{})
	if err == nil {
		sc.postAhead(len(buf))
	}
	return n, err
}

// takeAhead takes the Recv posted ahead, unless it holds a message longer
// than room (then that is the Recv's error, and the message stays).
func (sc *sidecarConn) takeAhead(room int) (*Op, error) {
	sc.amu.Lock()
	defer sc.amu.Unlock()
	op := sc.ahead
	if op == nil {
		return nil, nil
	}
	if o := &op.o; o.state.Load() == stateDone && o.status == StatusOK && o.n > room {
		return nil, statusErr("recv", StatusLocalLength, fmt.Errorf("%w: a %d-byte message for a %d-byte buffer (it stays queued)", ErrTooLarge, o.n, room))
	}
	sc.ahead = nil
	return op, nil
}

// waitAhead waits for the Recv posted ahead that this call took and copies
// its message into buf. done false: it ended without a message this call
// should report (too long for its run, or its Timeout ran before the call
// came): the call posts a Recv of its own.
func (sc *sidecarConn) waitAhead(ctx context.Context, op *Op, buf []byte) (n int, err error, done bool) {
	s, o := sc.s, &op.o
	// Counted from here on: a waiter that parks leaves the op to the
	// completion goroutine, which polls only while ops are counted. Watched
	// first, so that the count does not wake that goroutine.
	s.cl.Watch()
	s.cl.Begin()
	if !o.counted.CompareAndSwap(0, 1) {
		s.cl.End() // it has ended already
	}
	n, err = s.wait(ctx, op, true)
	switch {
	case err == nil && n > len(buf):
		// Kept for a Recv with a larger buffer.
		sc.amu.Lock()
		kept := !sc.closed.Load()
		if kept {
			sc.ahead = op
		}
		sc.amu.Unlock()
		if !kept {
			sc.releaseAhead(op)
		}
		return 0, statusErr("recv", StatusLocalLength, fmt.Errorf("%w: a %d-byte message for a %d-byte buffer (it stays queued)", ErrTooLarge, n, len(buf))), true
	case err == nil:
		s.life.RLock()
		if s.cl.IsDead() {
			err = s.goneErr("recv") // the channel may be unmapped
		} else {
			copy(buf, s.cl.Ch.Bytes(o.run, 0, uint32(n)))
		}
		s.life.RUnlock()
		sc.releaseAhead(op)
		return n, err, true
	}
	st := o.status
	sc.releaseAhead(op)
	if ctx.Err() == nil && (st == StatusLocalLength || st == StatusTimeout) {
		return 0, nil, false
	}
	return 0, err, true
}

// postAhead posts the connection's next Recv, of room bytes, if it has
// none and the channel's share for them has room; a Recv that cannot start
// at once (no slot, no buffers) is not posted.
func (sc *sidecarConn) postAhead(room int) {
	s := sc.s
	k := int64(s.cl.Buffers(room))
	if s.aheadBufs.Add(k) > int64(s.cl.Ch.Layout.Buffers/aheadShare) {
		s.aheadBufs.Add(-k)
		return
	}
	sc.amu.Lock()
	if sc.aheadOut || sc.closed.Load() {
		sc.amu.Unlock()
		s.aheadBufs.Add(-k)
		return
	}
	sc.aheadOut = true
	sc.amu.Unlock()
	op := s.spare.take()
	op.o.ahead, op.o.aheadLen = sc, room
	if err := sc.start(nil, op, opRecv, nil, nil, 0, RemoteAddr{}, false); err != nil {
		sc.releaseAhead(op)
		return
	}
	// Offered to the calls only now that it is posted (a spare op's state
	// is its previous use's until then).
	sc.amu.Lock()
	release := sc.closed.Load() && op.o.state.Load() == stateDone
	if !release {
		sc.ahead = op
	}
	sc.amu.Unlock()
	if release {
		sc.releaseAhead(op)
	}
}

// aheadEnded runs after the completion of a Recv posted ahead (gen: the
// start it completed): on a closed connection nobody will take it.
func (sc *sidecarConn) aheadEnded(op *Op, gen uint32) {
	if !sc.closed.Load() {
		return // a later close finds it ended
	}
	sc.amu.Lock()
	mine := sc.ahead == op && op.o.gen.Load() == gen
	if mine {
		sc.ahead = nil
	}
	sc.amu.Unlock()
	if mine {
		sc.releaseAhead(op)
	}
}

// closeAhead releases the closed connection's Recv posted ahead if it has
// ended; if not, counts it in flight, so that the completion goroutine
// reaps its end (the appliance ends it at the close) and aheadEnded
// releases it.
func (sc *sidecarConn) closeAhead() {
	sc.amu.Lock()
	op := sc.ahead
	ended := op != nil && op.o.state.Load() == stateDone
	if ended {
		sc.ahead = nil
	}
	sc.amu.Unlock()
	switch {
	case ended:
		sc.releaseAhead(op)
	case op != nil:
		sc.s.cl.Begin()
		if !op.o.counted.CompareAndSwap(0, 1) {
			sc.s.cl.End()
		}
	}
}

// releaseAhead gives a Recv posted ahead's run and op back; the
// connection may post another.
func (sc *sidecarConn) releaseAhead(op *Op) {
	s, o := sc.s, &op.o
	if o.nrun > 0 {
		s.cl.Free(o.run, o.nrun)
		o.nrun = 0
	}
	s.aheadBufs.Add(-int64(s.cl.Buffers(o.aheadLen)))
	sc.amu.Lock()
	sc.aheadOut = false
	sc.amu.Unlock()
	s.spare.put(op)
}
