package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// awaitConns is the fan-out of the scheduler-bound tests: as many
// connections as bench mcsq's naive design keeps open.
const awaitConns = 1000

// newFanOut builds a pair whose A holds n connections to B, all
// established, and regions for the operations. B's transport takes a
// large burst so that only A's scheduler (Burst packets a Poll) is the
// bottleneck once the starved loop runs.
func newFanOut(t *testing.T, n, quantum int, tweak func(a, b *Options)) (*pair, *faultMem, []*Conn) {
	t.Helper()
	p := newPair(t, 97, "delay=10us", func(a, b *Options) {
		a.Transport.MaxConns, b.Transport.MaxConns = n+8, n+8
		a.MaxOps, b.MaxOps = 8*n, 8*n
		a.Transport.Burst = 16
		b.Transport.Burst = 256
		a.Quantum = quantum
		if tweak != nil {
			tweak(a, b)
		}
	})
	f := newFaultMem(t, p, 256<<10)
	conns := make([]*Conn, 0, n)
	for k := range n {
		c, err := p.a.Open(p.peerB(), ConnOptions{})
		require.NoError(t, err)
		conns = append(conns, c)
		if (k+1)%32 == 0 || k+1 == n {
			// A few handshakes at a time: a thousand at once overflow
			// the rings (bench mcsq opens its naive design the same way).
			p.run(func() bool {
				for _, c := range conns {
					if c.Transport() == nil || c.Transport().State() != rt.StateEstablished {
						return false
					}
				}
				return true
			}, 100*time.Millisecond)
		}
	}
	p.run(func() bool { return p.settled() }, 10*time.Millisecond)
	return p, f, conns
}

// runStarved polls A and B once per step of virtual time until cond
// holds: a loop that spends step on each Poll, so A's scheduler hands the
// transport Burst packets per step and everything else waits in it. It
// fails the test when limit passes first and returns the time taken.
func (p *pair) runStarved(cond func() bool, step, limit time.Duration) time.Duration {
	p.t.Helper()
	start := p.clk.Now()
	for !cond() {
		if p.clk.Now().Sub(start) >= limit {
			p.t.Fatalf("condition not reached within %v: %d completions at A; A %+v; B %+v", limit, len(p.cqA), p.a.Transport().Stats(), p.b.Transport().Stats())
		}
		p.poll()
		p.clk.Advance(step)
	}
	return p.clk.Now().Sub(start)
}

// A thousand connections to a live peer, each with four two-packet
// pushes posted at once, behind a scheduler that sends 16 packets per
// 20 µs: the last connection's packets wait about 10 ms, many RTOs. A
// connection whose first packets went and were acknowledged while its
// next wait in our own scheduler is not waiting for its peer: no await
// probe. A push never waits for its peer with nothing of its own pending
// (its last packet's ACK completes it, and the retransmission timer
// covers that ACK), so the bound at A is exactly 0, whatever the
// scheduler's quantum. Before, every such connection probed its
// (answering) peer at every RTO from its first packet on: the probes
// and their answers took the whole transmit budget, and in 1 s of
// virtual time not one of the 4,000 pushes completed.
//
// B, the target, waits for the rest of a push whose first packet came:
// with a quantum that lets each connection send its whole backlog in its
// turn it never waits, and sends no probe either. With the default
// quantum A's turns split the pushes, B waits a scheduler round (many
// RTOs) for a push's second packet and probes A — A's backlog is B's
// peer's, which B cannot tell from silence. That count is logged, not
// bounded here (the probe schedule after an answered probe is the
// transport's: see the report of session 7).
func TestSchedulerBacklogIsNotPeerSilence(t *testing.T) {
	for _, tc := range []struct {
		name    string
		quantum int
	}{{"whole-turns", 64 << 10}, {"default-quantum", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p, f, conns := newFanOut(t, awaitConns, tc.quantum, nil)
			seg := p.a.Segment()
			const perConn = 4
			for k, c := range conns {
				for j := range perConn {
					_, err := c.Push(Op{Local: f.rSrc, Len: 2 * seg, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: uint64(k%16) * uint64(2*seg)},
						Tag: uint64(k*perConn + j), Solicit: SolicitNever})
					require.NoError(t, err)
				}
			}
			want := awaitConns * perConn
			took := p.runStarved(func() bool { return len(p.cqA) == want }, 20*time.Microsecond, time.Second)
			for _, cp := range p.cqA {
				require.Equal(t, StatusOK, cp.Status, "tag %d", cp.Tag)
			}
			sa, sb := p.a.Transport().Stats(), p.b.Transport().Stats()
			t.Logf("%d pushes on %d connections in %v: A sent %d data packets, %d retransmitted, %d await probes (%d awaiting transitions); B %d await probes",
				want, awaitConns, took, sa.TxData, sa.TxRetransmit, sa.AwaitProbes, p.a.aw.ons+p.a.aw.offs, sb.AwaitProbes)
			require.Greater(t, took, 5*p.a.Transport().Options().InitialRTO, "the scheduler held work for many RTOs")
			require.Zero(t, sa.AwaitProbes, "a connection whose next packets wait in our scheduler does not probe its peer")
			require.Zero(t, p.a.aw.ons, "a push never hands the peer the move with nothing of its own pending")
			if tc.quantum > 0 {
				require.Zero(t, sb.AwaitProbes, "B never waits for a push's rest")
			}
			p.run(func() bool { return p.settled() }, 10*time.Millisecond)
			p.requireSettled()
		})
	}
}

// The same fan-out to a peer that dies mid-run still ends every operation
// within the retransmission schedule. Each connection posts a pull, every
// other one two pushes after it, behind A's starved scheduler; B dies once it has taken half
// of the pulls' requests, so some connections have acknowledged requests
// and wait for pull data with nothing of their own pending (only await
// probes can find B gone: they must fail with ErrRetryExhausted after
// RetryLimit+1 unanswered probes, so A sends at most that many per
// connection), and the rest have packets queued or unacknowledged (their
// retransmission timers find it). Every operation completes exactly
// once (those B had not served with StatusConnFailed) within the bound;
// nothing is held afterwards.
func TestSchedulerBacklogDeadPeerStillFails(t *testing.T) {
	// B acknowledges every packet at once: the requests it took in its
	// last Poll are acknowledged and not yet served when it dies.
	p, f, conns := newFanOut(t, awaitConns, 0, func(_, b *Options) { b.Transport.AckEvery = 1 })
	seg := p.a.Segment()
	for k, c := range conns {
		_, err := c.Pull(Op{Local: f.rDst, LocalAddr: uint64(k%16) * uint64(3*seg), Len: 3 * seg,
			Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: uint64(3 * k)})
		require.NoError(t, err)
		for j := 1; j <= 2 && k%2 == 1; j++ {
			_, err := c.Push(Op{Local: f.rSrc, Len: 2 * seg, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: uint64(k%16) * uint64(2*seg)},
				Tag: uint64(3*k + j), Solicit: SolicitNever})
			require.NoError(t, err)
		}
	}
	p.runStarved(func() bool { return len(p.reqB) >= awaitConns/2 }, 20*time.Microsecond, time.Second)
	p.deadB = true
	okBefore := len(p.cqA)
	want := awaitConns + 2*(awaitConns/2)
	ro := p.a.Transport().Options()
	// The slowest connection: its backlog drains (as above, about 10 ms)
	// and then its last packet, or its last probe, runs RetryLimit+1
	// timeouts, each at most MaxRTO.
	bound := 20*time.Millisecond + time.Duration(ro.RetryLimit+1)*ro.MaxRTO
	took := p.runStarved(func() bool { return len(p.cqA) == want }, 20*time.Microsecond, bound)
	seen := byTag(t, p.cqA)
	require.Len(t, seen, want)
	failed, failedConns := 0, map[uint64]bool{}
	for _, cp := range p.cqA[okBefore:] {
		if cp.Status == StatusOK {
			continue // B's last ACKs and data, already on the wire
		}
		require.Equal(t, StatusConnFailed, cp.Status, "tag %d", cp.Tag)
		failed++
		failedConns[cp.Tag/3] = true
	}
	sa := p.a.Transport().Stats()
	t.Logf("B died after %d requests; %d operations completed before, %d failed %v after (bound %v); A sent %d await probes, %d connections failed",
		len(p.reqB), okBefore, failed, took, bound, sa.AwaitProbes, sa.ConnFailed)
	require.Positive(t, sa.AwaitProbes, "some connections only waited for pull data: probes found B gone")
	require.LessOrEqual(t, sa.AwaitProbes, uint64(awaitConns*(ro.RetryLimit+1)), "at most RetryLimit+1 probes per connection")
	require.Equal(t, uint64(len(failedConns)), sa.ConnFailed, "the connections with work in progress failed; the idle ones stay")
	for _, e := range []*Endpoint{p.a} {
		require.Zero(t, e.Outstanding(), "contexts held")
		require.Zero(t, e.sch.Len(), "scheduler items held")
	}
}

// The transport hears of awaiting on transitions only, and each turn-on
// (the one that arms its liveness timer) is a wait for the peer, not a
// packet: a stream of multi-packet pushes never hands the peer the move
// (no turn-on at all); pulls turn it on at most once each (after the
// request's ACK, while the data is due), and a pipeline of pulls whose
// requests go out together at most once per round of responses.
func TestAwaitingTogglesPerWaitNotPerPacket(t *testing.T) {
	p := newPair(t, 41, "delay=10us", nil)
	f := newFaultMem(t, p, 256<<10)
	c := p.connect(ConnOptions{})
	seg := p.a.Segment()
	const k = 40
	for j := range k {
		_, err := c.Push(Op{Local: f.rSrc, Len: 3 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: uint64(j), Solicit: SolicitNever})
		require.NoError(t, err)
	}
	p.run(func() bool { return len(p.cqA) == k && p.settled() }, time.Second)
	require.Zero(t, p.a.aw.ons, "pushes: nothing of the peer's is awaited")
	require.Zero(t, p.a.Transport().Stats().AwaitProbes)

	for j := range k {
		_, err := c.Pull(Op{Local: f.rDst, Len: 3 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: uint64(k + j)})
		require.NoError(t, err)
		p.run(func() bool { return len(p.cqA) == k+j+1 }, time.Second)
	}
	ons := p.a.aw.ons
	require.LessOrEqual(t, ons, uint64(k), "one wait per pull at most")
	require.Equal(t, p.a.aw.ons, p.a.aw.offs, "every wait ended")

	for j := range k {
		_, err := c.Pull(Op{Local: f.rDst, Len: 3 * seg, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: uint64(2*k + j)})
		require.NoError(t, err)
	}
	p.run(func() bool { return len(p.cqA) == 3*k && p.settled() }, time.Second)
	t.Logf("%d sequential pulls: %d turn-ons; %d pipelined: %d", k, ons, k, p.a.aw.ons-ons)
	require.Less(t, p.a.aw.ons-ons, uint64(k), "pipelined pulls share their waits")
	for _, cp := range p.cqA {
		require.Equal(t, StatusOK, cp.Status)
	}
	require.Zero(t, p.a.Transport().Stats().AwaitProbes, "a peer that answers within the RTO is never probed")
}

// A closing connection with no transaction left awaits the peer's
// ConnClose: every ConnClose of B is lost, so A's (acknowledged) close
// never completes by itself; B's retries run out and B fails its half,
// and A, probing while it waits, hears the bad-CID NACK and fails
// (ErrPeerReset) instead of staying closing forever with no timer
// running (as the fault suite's link-flap seed 710 found).
func TestClosingAwaitsPeerClose(t *testing.T) {
	p, m := newFaultPair(t, 5, nil)
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		return !fromA && h.Type() == wire.TypeConnClose
	}
	c := p.connect(ConnOptions{})
	rc := c.Transport()
	p.run(func() bool { return p.settled() }, time.Second)
	require.NoError(t, c.Close())
	p.run(func() bool {
		return rc.State() == rt.StateFailed || rc.State() == rt.StateFree || p.a.Transport().Conns() == 0
	}, time.Second)
	require.Zero(t, p.a.Transport().Conns(), "A's connection ended")
	require.Positive(t, p.a.Transport().Stats().AwaitProbes, "A probed while it waited for B's ConnClose")
}
