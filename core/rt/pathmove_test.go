package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// A receiver moves the path of its ACKs only on evidence that they are
// lost: the peer resending what we had in successive rounds of its
// recovery, a timeout apart, while our window stands still. A burst of
// packets resent twice at one instant — the peer's loop descheduled past
// their timers, or early resends of packets late behind a queue — moved
// it on a healthy fabric.
func TestAckPathNeedsRoundsOfResends(t *testing.T) {
	e := &Endpoint{}
	e.opts.MinRTO = time.Millisecond
	c := &conn{}
	c.rx[1].bsn = 100
	dup := func(psn uint32, retry uint8) {
		e.pathNotNew(c, wire.WindowData, &wire.Header{PSN: psn, Retry: retry})
	}
	e.now = clock.Time(time.Second)
	for psn := uint32(90); psn < 99; psn++ {
		dup(psn, 2) // one burst, every packet resent twice
	}
	dup(95, 3) // one more round, too soon for a timer's
	require.Zero(t, e.PathStats().AckMoves, "one burst of resends is one round")

	// The peer's timer sends them again, and again: our ACKs are lost.
	e.now = e.now.Add(2 * time.Millisecond)
	dup(90, 4)
	require.EqualValues(t, 1, e.PathStats().AckMoves, "rounds of resends a timeout apart")
	require.NotZero(t, c.paths.ackPort)

	// The window moves: a new run starts from nothing.
	c.rx[1].bsn = 120
	e.now = e.now.Add(5 * time.Millisecond)
	dup(110, 5)
	require.EqualValues(t, 1, e.PathStats().AckMoves)
}
