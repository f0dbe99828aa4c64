package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// fabricPair is a and b joined by a fabric of two paths each way, as an
// ECMP switch: a frame flagged in order keeps the path its 5-tuple hashes
// to. Everything runs on a virtual clock; a's transmissions pass a tap.
type fabricPair struct {
	t    *testing.T
	clk  *clock.Virtual
	fab  *fabric.Fabric
	pb   port.Port
	a, b *Endpoint
	tap  *tapPort
	// got holds the PSNs b delivered, gotAt when.
	got   []uint32
	gotAt []clock.Time
	// after, when set, runs after every round of polls.
	after func()
}

func newFabricPair(t *testing.T, seed uint64) *fabricPair {
	t.Helper()
	pool := newPool(t, 8192)
	prof, err := fabric.ParseProfile("delay=10us,rate=10gbit,paths=2,path-delay=0/2us,spray=entropy")
	require.NoError(t, err)
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: t.Name(), AtoB: prof, BtoA: prof, Seed: seed, LinkRing: 2048,
		Classify: fabric.TransportClassifier(0)})
	require.NoError(t, err)
	x := &fabricPair{t: t, clk: clock.NewVirtual(1_000_000), fab: fab, pb: pb, tap: &tapPort{Port: pa, pool: pool}}
	x.a, err = NewEndpoint(Options{Name: "a", Port: x.tap, Pool: pool, Clock: x.clk, LocalIP: ipA, Seed: seed, MaxConns: 4,
		MinRTO: time.Millisecond})
	require.NoError(t, err)
	x.b, err = NewEndpoint(Options{Name: "b", Port: pb, Pool: pool, Clock: x.clk, LocalIP: ipB, Seed: seed + 1, MaxConns: 4,
		MinRTO: time.Millisecond})
	require.NoError(t, err)
	setDeliver(x.b, func(_ *Conn, hd *wire.Header, _ []byte) Verdict {
		x.got = append(x.got, hd.PSN)
		x.gotAt = append(x.gotAt, x.clk.Now())
		return Accept
	})
	t.Cleanup(func() {
		now := x.clk.Now()
		x.a.Stop(now)
		x.b.Stop(now)
		fab.Stop(now)
		x.a.Close()
		x.b.Close()
		_ = fab.Close()
		_ = pa.Close()
		_ = pb.Close()
	})
	return x
}

// run polls a, the fabric and b until cond holds, jumping to the next
// deadline when all three are idle; it fails the test past limit.
func (x *fabricPair) run(cond func() bool, limit time.Duration) {
	x.t.Helper()
	end := x.clk.Now().Add(limit)
	for !cond() {
		now := x.clk.Now()
		w := x.a.Poll(now) + x.fab.Poll(now) + x.b.Poll(now)
		require.NoError(x.t, x.a.CheckInvariants())
		if x.after != nil {
			x.after()
		}
		if w > 0 {
			continue
		}
		next, ok := clock.Time(0), false
		for _, d := range []func() (clock.Time, bool){x.a.NextDeadline, x.fab.NextDeadline, x.b.NextDeadline} {
			if at, has := d(); has && (!ok || at < next) {
				next, ok = at, true
			}
		}
		require.True(x.t, ok, "nothing pending and the condition does not hold")
		next = max(next, now.Add(time.Microsecond))
		require.LessOrEqual(x.t, next, end, "condition not reached within %v", limit)
		require.NoError(x.t, x.clk.Set(next))
	}
}

// connect opens a connection from a to b and runs until it is
// established at a.
func (x *fabricPair) connect() *Conn {
	x.t.Helper()
	c, err := x.a.Open(PeerAddr{MAC: macOf(x.pb), IP: ipB})
	require.NoError(x.t, err)
	x.run(func() bool { return c.State() == StateEstablished }, 100*time.Millisecond)
	return c
}

// sendOrdered sends n data packets flagged in order (IOI's head and tail,
// every packet of a wholly in-order message) and returns their PSNs.
func sendOrdered(t *testing.T, c *Conn, n int) []uint32 {
	t.Helper()
	var psns []uint32
	for i := range n {
		psn, err := c.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Flags: wire.FlagIOIInOrder, RSN: uint32(i)},
			payload(uint64(i), 256))
		require.NoError(t, err)
		psns = append(psns, psn)
	}
	return psns
}

// When the path of a connection's in-order packets dies with a window of
// them in flight, nothing is acknowledged and the timeout's F-RTO probe
// is all that moves. It leaves on another path than the one its packet
// was lost on, so one round trip later its ACK decides and the held
// packets go; the expiries of packets held again count against the path
// as the timeouts that resent them did before F-RTO, and the ordered path
// moves three timeouts after the death (1+2), as it did then. The probe
// used to be resent on the dead path, alone, until it had been lost there
// three times: it got through, and the path moved, seven timeouts
// (1+2+4) after the death. The fabric's hash may send a probe's new flow
// down the dead path too (one in two here): the next probe takes another
// flow, never one its packet was lost on, and the held packets' expiries
// find the dead path all the same.
func TestFRTOProbeLeavesTheDeadPath(t *testing.T) {
	const n = 32
	through := 0 // seeds whose first probe the fabric put on the live path
	for seed := uint64(1); seed <= 8; seed++ {
		x := newFabricPair(t, seed)
		ca := x.connect()
		sendOrdered(t, ca, 64) // RTT samples: the timeout is the estimator's
		x.run(func() bool { return x.a.Outstanding() == 0 && len(x.got) == 64 }, time.Second)

		// The ordered path: the one in-order packets took.
		paths := x.fab.Stats().AtoB.Paths
		dead := 0
		for i := range paths {
			if paths[i] > paths[dead] {
				dead = i
			}
		}
		require.NoError(t, x.fab.SetPathDown(fabric.AtoB, dead, true))
		deathAt, rto := x.clk.Now(), ca.RTO()
		moves := x.a.PathStats().OrderedMoves
		var movedAt clock.Time
		x.after = func() {
			if movedAt == 0 && x.a.PathStats().OrderedMoves > moves {
				movedAt = x.clk.Now()
			}
		}
		ports := map[uint32][]uint16{} // source port of each transmission
		var probeAt clock.Time         // the first resend of the window's first packet
		psns := []uint32{}
		x.tap.tap = func(f *wire.Frame) int {
			if f.Header.Type == wire.TypePushUnsolicitedData {
				ports[f.Header.PSN] = append(ports[f.Header.PSN], f.SrcPort)
				if probeAt == 0 && len(psns) > 0 && f.Header.PSN == psns[0] && len(ports[psns[0]]) == 2 {
					probeAt = x.clk.Now()
				}
			}
			return 1
		}
		psns = sendOrdered(t, ca, n)
		x.run(func() bool { return x.a.Outstanding() == 0 && len(x.got) == 64+n }, time.Second)

		first := ports[psns[0]]
		var firstAt clock.Time
		for i, psn := range x.got {
			if psn == psns[0] {
				firstAt = x.gotAt[i]
			}
		}
		t.Logf("seed %d: RTO %v, path %d dead; the window's first packet left from ports %v, probed %v and delivered %v after the death; the ordered path moved %v after it; %+v",
			seed, rto, dead, first, probeAt.Sub(deathAt), firstAt.Sub(deathAt), movedAt.Sub(deathAt), x.a.PathStats())
		require.GreaterOrEqual(t, len(first), 2, "seed %d: the window's first packet was never resent", seed)
		for i := range first {
			for j := range i {
				require.NotEqual(t, first[j], first[i], "seed %d: the window's first packet resent from a port it was lost on (transmissions %d and %d)", seed, j, i)
			}
		}
		if firstAt.Sub(probeAt) < 100*time.Microsecond {
			through++ // the probe arrived one round trip after it left
		}
		require.NotZero(t, movedAt, "seed %d: the ordered path never moved", seed)
		require.Less(t, movedAt.Sub(deathAt), 7*rto/2, "seed %d: dead path found later than three timeouts after its death", seed)
		seen := map[uint32]bool{}
		for _, psn := range x.got[64:] {
			require.False(t, seen[psn], "seed %d: PSN %d delivered twice", seed, psn)
			seen[psn] = true
		}
		require.Zero(t, x.a.Stats().Internal+x.b.Stats().Internal)
	}
	require.Positive(t, through, "no seed's first probe went down the live path")
}

// When no path leads to the peer for a while, no probe gets through and
// the F-RTO episode holds every other expiry until the probe's next
// timeout, again and again. A held expiry is the evidence against the
// ordered path that the resend it stands for was before F-RTO: the path
// moves at the packets' second timeout, three timeouts after the loss
// (1+2), as it did when every expiry resent. Counted at resends alone,
// held packets said nothing and only the probe's resends spoke.
func TestHeldTimeoutsFindADeadPath(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.MinRTO, b.MinRTO = time.Millisecond, time.Millisecond })
	ca, _ := h.connect()
	sendOrdered(t, ca, 64)
	h.run(h.quiet, time.Second)
	delivered := len(h.gotB)

	blackHole := true
	h.pa.tap = func(f *wire.Frame) int {
		if blackHole && f.Header.Type == wire.TypePushUnsolicitedData {
			return 0
		}
		return 1
	}
	deathAt, rto := h.clk.Now(), ca.RTO()
	const n = 32
	sendOrdered(t, ca, n)
	h.run(func() bool { return h.a.PathStats().OrderedMoves > 0 }, 20*rto)
	movedAt := h.clk.Now()
	t.Logf("RTO %v: ordered path moved %v after the loss; %+v; %d resends", rto, movedAt.Sub(deathAt), h.a.PathStats(), h.a.Stats().TxRetransmit)
	require.Less(t, movedAt.Sub(deathAt), 7*rto/2, "dead path found later than three timeouts after the loss")

	blackHole = false
	h.run(h.quiet, time.Second)
	require.Len(t, h.gotB, delivered+n, "delivered exactly once")
	require.Zero(t, h.a.Stats().Internal+h.b.Stats().Internal)
}
