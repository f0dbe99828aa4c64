package txnload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/rt/txn"
	"github.com/peregrine-net/peregrine/fabric"
)

// sendRun is a Send load's setting.
type sendRun struct {
	profile    string // the fabric's, both ways
	sizes      []int
	conns      int
	initialSeq uint32 // both endpoints' txn.Options.InitialSeq
	n          uint64 // Sends to complete
}

// sendRig is a Send load between two endpoints joined by an in-process
// fabric on a virtual clock.
type sendRig struct {
	clk  *clock.Virtual
	a, b *txn.Endpoint
	fab  *fabric.Fabric
	l    *SendLoad
	cq   []txn.Completion
}

func newSendRig(t *testing.T, o sendRun) *sendRig {
	t.Helper()
	r := &sendRig{cq: make([]txn.Completion, 64)}
	var peer rt.PeerAddr
	r.clk, r.a, r.b, r.fab, peer = linked(t, o.profile, txn.Options{InitialSeq: o.initialSeq},
		txn.Options{InitialSeq: o.initialSeq, OnConnEvent: func(ev txn.ConnEvent) { r.l.Recv.OnConnEvent(ev) }})
	var err error
	r.l, err = NewSends(SendOptions{Initiator: r.a, Target: r.b, Peer: peer, Sizes: o.sizes, Conns: o.conns})
	require.NoError(t, err)
	return r
}

// step polls every stage once (handing the initiator's completions to
// the load) and moves the clock on when nothing moved.
func (r *sendRig) step() {
	now := r.clk.Now()
	work := r.l.Poll(now) + r.a.Poll(now) + r.fab.Poll(now) + r.l.Recv.Poll(now) + r.b.Poll(now)
	for k := r.a.Completions(r.cq); k > 0; k = r.a.Completions(r.cq) {
		for i := range r.cq[:k] {
			r.l.Complete(&r.cq[i])
		}
		work += k
	}
	if work == 0 {
		r.clk.Advance(time.Microsecond)
	}
}

// runSends runs a Send load until o.n Sends completed at both ends.
func runSends(t *testing.T, o sendRun) SendStats {
	t.Helper()
	r := newSendRig(t, o)
	for {
		s := r.l.Stats()
		if s.Completed+s.Failed >= o.n && s.Received+s.RecvFailed >= s.Completed {
			return s
		}
		if s.Posted >= o.n {
			r.l.Stop()
		}
		r.step()
		require.Less(t, r.clk.Now(), clock.Time(10*time.Second))
	}
}

// WQEs complete out of order (a 512 B Send overtakes a 64 KiB one), so
// the target may post a buffer again only once the WQE that held it
// completed: with sizes that overtake one another, every WQE must still
// hold its own Send, byte for byte.
func TestSendsOfMixedSizesArriveIntact(t *testing.T) {
	for _, o := range []sendRun{
		{sizes: []int{512, 4 << 10, 64 << 10}, n: 300},
		{sizes: []int{512, 4 << 10, 8 << 10}, n: 300},
		{sizes: []int{4 << 10, 64 << 10}, n: 300},
		{sizes: []int{512, 4 << 10, 64 << 10}, conns: 3, profile: "loss=1%,reorder=2%/20us,delay=5us", n: 300},
	} {
		st := runSends(t, o)
		require.Zero(t, st.BadData, "%+v: %+v", o, st)
		require.Equal(t, st.Completed, st.Received, "%+v: %+v", o, st)
		require.Zero(t, st.Failed, "%+v: %+v", o, st)
	}
}

// WQE numbers, like Send numbers, count from the transport's InitialSeq:
// Send k is in the connection's k-th WQE whatever its number.
func TestSendsCheckedFromTheFirstWQE(t *testing.T) {
	st := runSends(t, sendRun{sizes: []int{4 << 10, 8 << 10}, conns: 2, initialSeq: 1<<32 - 40, n: 200})
	require.Zero(t, st.BadData, "%+v", st)
	require.Equal(t, st.Completed, st.Received, "%+v", st)
	require.GreaterOrEqual(t, st.Received, uint64(200), "%+v", st)
}

// Reposting a WQE's buffer once its completion is checked allocates
// nothing: the free buffers are a list made with the connection.
func TestSendsSteadyStateAllocatesNothing(t *testing.T) {
	r := newSendRig(t, sendRun{sizes: []int{512, 4 << 10, 64 << 10}})
	for r.l.Stats().Received < 200 {
		r.step()
	}
	before := r.l.Stats()
	require.Zero(t, testing.AllocsPerRun(2000, r.step))
	after := r.l.Stats()
	require.Greater(t, after.Received, before.Received+100, "Sends went on during the measurement")
	require.Zero(t, after.BadData)
}
