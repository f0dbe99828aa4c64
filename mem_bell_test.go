package peregrine_test

import (
	"runtime"
	"testing"

	"github.com/peregrine-net/peregrine"
)

// A frame on a mem port wakes the receiving endpoint's sleeping loop: the
// port has no descriptor to sleep on, so the sender's transmit rings the
// loop that consumes the queue. Before, the frame waited out the rest of
// the sleep (up to SleepMax, a millisecond), at every hop of a request
// that came after a quiet spell. The sender's own loop is rung by its
// caller's submission; the receiver's wakes only by the frame.
func TestMemFrameWakesTheLoop(t *testing.T) {
	mine, peer := openInProcess(t, peregrine.Options{})
	ctx := doorCtx(t)
	c, p := dialPeer(t, mine, peer, peregrine.ConnOptions{})
	buf := make([]byte, 64)
	for i := range 3 {
		var op peregrine.Op
		if err := p.RecvAsync(&op, buf); err != nil {
			t.Fatal(err)
		}
		for !peregrine.LoopAsleep(peer) { // until the peer's loop, idle, sleeps
			if ctx.Err() != nil {
				t.Fatalf("round %d: the peer's loop never slept", i)
			}
			runtime.Gosched()
		}
		before := peregrine.LoopStats(peer).InputWakes
		if err := c.Send(ctx, []byte("wake up")); err != nil {
			t.Fatal(err)
		}
		if _, err := op.Wait(ctx); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		for peregrine.LoopStats(peer).InputWakes == before { // published by its next sleep
			if ctx.Err() != nil {
				t.Fatalf("round %d: the message reached the peer, but no frame ended its loop's sleep", i)
			}
			runtime.Gosched()
		}
	}
}
