package txn

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// portTrace records, for every data packet a port sends, its UDP source
// port per transmission: the path an ECMP switch hashes it to.
type portTrace struct {
	port.Port
	pool  *mbuf.Pool
	ports map[[2]uint32][]uint16 // (RSN, offset) → source port of each transmission
}

func (p *portTrace) TxBurst(q int, hs []mbuf.Handle) int {
	for _, h := range hs {
		f, err := wire.DecodeFrame(p.pool.Data(h))
		if err != nil || !ioiData(f.Header.Type) || f.Header.Offset == abortOffset {
			continue
		}
		k := [2]uint32{f.Header.RSN, f.Header.Offset}
		p.ports[k] = append(p.ports[k], f.SrcPort)
	}
	return p.Port.TxBurst(q, hs)
}

// deadPath is a pair over four paths of 1 Gbit/s, one of which the test
// takes down in the data direction: the path the connection's ordered
// flow hashes to, found with a first message sent wholly in order.
type deadPath struct {
	*pair
	fab   *fabric.Fabric
	trace *portTrace
	conn  *Conn
	dead  int
	ack   int // the path B's ACKs take back (it sends nothing else here)
	src   []byte
	dst   []byte
	ls    Region
	rr    Region
}

const deadPathMsg = 256 << 10

func newDeadPath(t *testing.T, spray string, mode ioi.Mode) *deadPath {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: 16384, CacheSize: 128})
	require.NoError(t, err)
	prof, err := fabric.ParseProfile("delay=10us,rate=4gbit,paths=4,path-rate=1gbit,path-delay=0/2us/5us/10us,spray=" + spray)
	require.NoError(t, err)
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: "paths", AtoB: prof, BtoA: prof, Seed: 0xfab, LinkRing: 4096,
		Classify: fabric.TransportClassifier(0)})
	require.NoError(t, err)
	tr := &portTrace{Port: pa, pool: pool, ports: map[[2]uint32][]uint16{}}
	x := &deadPath{fab: fab, trace: tr}
	x.pair = buildPair(t, pool, tr, pb, fab, 5, func(a, b *Options) {
		for _, o := range []*Options{a, b} {
			o.IOI = ioi.Config{Mode: mode}
			o.Transport.MinRTO = time.Millisecond
			o.Transport.MaxOutstanding = 14
		}
		a.SolicitThreshold = -1
	})
	t.Cleanup(func() {
		x.close()
		require.Zero(t, pool.InUse(), "pool in-use after stop")
		_ = pool.Close()
	})
	x.src = pattern(3, deadPathMsg)
	x.dst = make([]byte, deadPathMsg)
	x.ls, err = x.a.Register(x.src, 0)
	require.NoError(t, err)
	x.rr, err = x.b.Register(x.dst, RemoteWrite)
	require.NoError(t, err)
	x.conn = x.connect(ConnOptions{Ordered: true})
	// The ordered path: where a wholly in-order push goes.
	cfg := ioi.Config{Mode: ioi.ModeInOrder}
	probe, err := x.a.Open(x.peerB(), ConnOptions{Ordered: true, IOI: &cfg})
	require.NoError(t, err)
	x.run(func() bool { return probe.Transport() != nil && probe.Transport().State() == rt.StateEstablished }, 100*time.Millisecond)
	// A second connection between the same ports: the same 5-tuple, so
	// the same ordered path as x.conn.
	before, back := fab.Stats().AtoB.Paths, fab.Stats().BtoA.Paths
	_, err = probe.Push(Op{Local: x.ls, Len: 64 << 10, Remote: wire.RegionRef{Key: x.rr.Key}})
	require.NoError(t, err)
	x.run(func() bool { return len(x.cqA) == 1 }, time.Second)
	require.Equal(t, StatusOK, x.cqA[0].Status)
	x.cqA = x.cqA[:0]
	after, ackAfter := fab.Stats().AtoB.Paths, fab.Stats().BtoA.Paths
	for i := range after {
		if after[i]-before[i] > after[x.dead]-before[x.dead] {
			x.dead = i
		}
		if ackAfter[i]-back[i] > ackAfter[x.ack]-back[x.ack] {
			x.ack = i
		}
	}
	require.Greater(t, after[x.dead]-before[x.dead], uint64(30), "the in-order push kept one path")
	require.NoError(t, fab.SetPathDown(fabric.AtoB, x.dead, true))
	return x
}

// push sends n messages one after the other and returns how many ended
// other than OK (or could not be posted: the connection failed); the
// bytes of each OK one must have landed.
func (x *deadPath) push(t *testing.T, n int) (failed int) {
	t.Helper()
	for i := range n {
		clear(x.dst)
		x.cqA = x.cqA[:0]
		if _, err := x.conn.Push(Op{Local: x.ls, Len: deadPathMsg, Remote: wire.RegionRef{Key: x.rr.Key}}); err != nil {
			return failed + n - i
		}
		x.run(func() bool { return len(x.cqA) == 1 }, 10*time.Second)
		if x.cqA[0].Status != StatusOK {
			failed++
			continue
		}
		require.True(t, bytes.Equal(x.src, x.dst), "an OK push placed its bytes")
	}
	return failed
}

func (x *deadPath) deadFrames() uint64 {
	d := x.fab.Stats().AtoB.PathDetail[x.dead]
	return d.Frames + d.Drops
}

func (x *deadPath) String() string {
	return fmt.Sprintf("dead path %d\nfabric %+v\npaths %+v\nrt %+v\nioi %+v", x.dead, x.fab.Stats().AtoB,
		x.a.Transport().PathStats(), x.a.Transport().Stats(), x.a.IOIStats())
}

// With entropy spraying (an ECMP switch hashing the 5-tuple), a sprayed
// packet lost on a dead path is resent with another source port, so on
// another path; no message is lost while three paths are healthy. (Before,
// a resend kept its packet's source port, landed on the same dead path
// every time, and 12 of 12 messages were abandoned here.)
func TestSprayedResendTakesAnotherPath(t *testing.T) {
	x := newDeadPath(t, "entropy", ioi.ModeSprayed)
	require.Zero(t, x.push(t, 12), "messages abandoned with three healthy paths\n%v", x)
	resent := 0
	for k, ports := range x.trace.ports {
		for i := 1; i < len(ports); i++ {
			require.NotEqual(t, ports[i-1], ports[i], "packet %v resent on the source port it was lost on", k)
			resent++
		}
	}
	require.Positive(t, resent)
	ps := x.a.Transport().PathStats()
	require.Positive(t, ps.Reroutes, "%v", x)
	require.Positive(t, ps.Suspects)
}

// When the ordered path dies, the flagged packets time out on it; the
// connection moves its ordered path to a new flow and every message
// completes, in order (before, every one was abandoned).
func TestOrderedPathMovesOffADeadPath(t *testing.T) {
	for _, tc := range []struct {
		spray string
		mode  ioi.Mode
	}{{"adaptive", ioi.ModeInOrder}, {"rr", ioi.ModeIOI}, {"entropy", ioi.ModeIOI}} {
		t.Run(tc.spray+"/"+tc.mode.String(), func(t *testing.T) {
			x := newDeadPath(t, tc.spray, tc.mode)
			require.Zero(t, x.push(t, 6), "messages abandoned with three healthy paths\n%v", x)
			ps := x.a.Transport().PathStats()
			require.Positive(t, ps.OrderedMoves, "%v", x)
			require.Zero(t, x.b.IOIStats().Stale+x.b.IOIStats().Forged, "%v", x)
			tx, rx := x.a.IOIStats(), x.b.IOIStats()
			require.Equal(t, tx.PktHead+tx.PktTail+tx.PktInOrder, rx.InSequence, "every flagged packet handed over in sequence, once")
		})
	}
}

// The sender learns which entropy values lead to the dead path and stops
// spraying onto them but for one probe per retransmit timeout; when the
// path comes back, a probe gets through and the path carries its share
// again.
func TestSenderStopsSprayingOntoADeadPath(t *testing.T) {
	x := newDeadPath(t, "entropy", ioi.ModeSprayed)
	require.Zero(t, x.push(t, 4), "%v", x)
	// Learned: from now on the dead path sees probes, not traffic.
	st0, dead0, probes0 := x.fab.Stats().AtoB, x.deadFrames(), x.a.Transport().PathStats().Probes
	require.Zero(t, x.push(t, 8), "%v", x)
	st1, dead1, probes1 := x.fab.Stats().AtoB, x.deadFrames(), x.a.Transport().PathStats().Probes
	total := st1.Received - st0.Received
	t.Logf("after learning: %d of %d frames into the dead path, %d probes", dead1-dead0, total, probes1-probes0)
	require.LessOrEqual(t, dead1-dead0, probes1-probes0, "only probes go down the dead path\n%v", x)
	require.Less(t, float64(dead1-dead0), 0.02*float64(total))

	require.NoError(t, x.fab.SetPathDown(fabric.AtoB, x.dead, false))
	restored := x.a.Transport().PathStats().Restored
	before := x.fab.Stats().AtoB.PathDetail[x.dead].Frames
	require.Zero(t, x.push(t, 8), "%v", x)
	require.Greater(t, x.a.Transport().PathStats().Restored, restored, "a probe brought the path's values back")
	back := x.fab.Stats().AtoB.PathDetail[x.dead].Frames - before
	require.Greater(t, float64(back), 0.1*float64(x.fab.Stats().AtoB.Received-st1.Received), "the path carries traffic again\n%v", x)
}

// A fabric that sprays on its own (here at random) cannot be steered: with
// two of four paths dead every transmission of a sprayed packet is lost
// with probability 1/2, and one packet in 256 lost its eight transmissions
// in a row, within a millisecond of early resends, abandoning its message
// though two paths were healthy. Such losses, while the packets sent with
// it get through, do not spend the retry budget.
func TestSprayedPacketsOutliveUnluckyDraws(t *testing.T) {
	x := newDeadPath(t, "random", ioi.ModeSprayed)
	require.NoError(t, x.fab.SetPathDown(fabric.AtoB, (x.dead+1)%4, true))
	require.Zero(t, x.push(t, 6), "messages abandoned with two healthy paths\n%v", x)
	require.Positive(t, x.a.Transport().PathStats().Reroutes)
}

// Under ECMP hashing a receiver's ACKs take one path back. When it dies,
// the sender resends what the receiver has; the receiver, seeing the same
// packets again while its window stands still, moves its ACKs to another
// path (before, the connection failed: 10 of 10 messages lost).
func TestAckPathMovesOffADeadPath(t *testing.T) {
	x := newDeadPath(t, "entropy", ioi.ModeIOI)
	require.NoError(t, x.fab.SetPathDown(fabric.BtoA, x.ack, true))
	require.Zero(t, x.push(t, 10), "messages lost with three healthy paths each way\n%v", x)
	require.Positive(t, x.b.Transport().PathStats().AckMoves, "%v", x)
	require.Positive(t, x.fab.Stats().BtoA.PathDownDrops)
}
