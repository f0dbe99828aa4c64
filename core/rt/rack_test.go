package rt

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/fabric"
)

// rackNet is two endpoints joined by an emulated multipath fabric on a
// virtual clock: IOI's sprayed paths (different delays, each
// its own rate), where packets overtake each other all the time.
type rackNet struct {
	t      *testing.T
	clk    *clock.Virtual
	pool   *mbuf.Pool
	fab    *fabric.Fabric
	a, b   *Endpoint
	pb     port.Port
	got    map[uint64]int // deliveries at b by sequence number
	cookie []uint64       // cookies acknowledged at a
	// bOff, when set, reports whether b's loop is off its CPU at a time:
	// b is not polled then, and its frames wait in its port.
	bOff func(clock.Time) bool
}

func newRackNet(t *testing.T, profile string, seed uint64, tweak func(o *Options)) *rackNet {
	t.Helper()
	prof, err := fabric.ParseProfile(profile)
	require.NoError(t, err)
	pool := newPool(t, 16384)
	pa, pb, fab, err := fabric.Link(pool, fabric.Options{Name: t.Name(), AtoB: prof, BtoA: prof, Seed: seed, LinkRing: 4096,
		Classify: fabric.TransportClassifier(0)})
	require.NoError(t, err)
	n := &rackNet{t: t, clk: clock.NewVirtual(1_000_000), pool: pool, fab: fab, pb: pb, got: map[uint64]int{}}
	oa := Options{Name: "a", Port: pa, Pool: pool, Clock: n.clk, LocalIP: ipA, Seed: seed, MaxConns: 2}
	ob := Options{Name: "b", Port: pb, Pool: pool, Clock: n.clk, LocalIP: ipB, Seed: seed + 1, MaxConns: 2}
	if tweak != nil {
		tweak(&oa)
		tweak(&ob)
	}
	n.a, err = NewEndpoint(oa)
	require.NoError(t, err)
	n.b, err = NewEndpoint(ob)
	require.NoError(t, err)
	setDeliver(n.b, func(_ *Conn, _ *wire.Header, p []byte) Verdict {
		n.got[binary.BigEndian.Uint64(p)]++
		return Accept
	})
	setAcked(n.a, func(_ *Conn, _ wire.Window, _ uint32, cookie uint64) { n.cookie = append(n.cookie, cookie) })
	t.Cleanup(func() {
		now := n.clk.Now()
		n.a.Stop(now)
		n.b.Stop(now)
		fab.Stop(now)
		drain := make([]mbuf.Handle, 64)
		for _, p := range []port.Port{pa, pb} {
			for k := p.RxBurst(0, drain); k > 0; k = p.RxBurst(0, drain) {
				pool.Free(drain[:k])
			}
		}
		_ = fab.Close()
		require.Zero(t, pool.InUse(), "frames in use after stop")
		n.a.Close()
		n.b.Close()
	})
	return n
}

func (n *rackNet) poll() int {
	now := n.clk.Now()
	work := n.a.Poll(now) + n.fab.Poll(now)
	if n.bOff == nil || !n.bOff(now) {
		work += n.b.Poll(now)
	}
	return work
}

// step polls, and when nothing moved jumps to the next deadline.
func (n *rackNet) step() {
	if n.poll() > 0 {
		return
	}
	next, ok := clock.Time(1<<63-1), false
	if t, k := n.a.NextDeadline(); k {
		next, ok = min(next, t), true
	}
	if t, k := n.b.NextDeadline(); k {
		next, ok = min(next, t), true
	}
	if t, k := n.fab.NextDeadline(); k {
		next, ok = min(next, t), true
	}
	if !ok {
		n.t.Fatal("nothing pending")
	}
	if err := n.clk.Set(max(next, n.clk.Now().Add(time.Microsecond))); err != nil {
		n.t.Fatal(err)
	}
}

// push sends packets of size bytes on c (cookies 1..packets), keeping the
// window full, and runs until every one is acknowledged; it returns the
// virtual time it took.
func (n *rackNet) push(c *Conn, packets, size int) time.Duration {
	n.t.Helper()
	start := n.clk.Now()
	body := make([]byte, size)
	for i := 1; i <= packets; {
		copy(body, payload(uint64(i), 8))
		if _, err := c.Send(SendHeader{Type: wire.TypePushRequest, RSN: uint32(i), Cookie: uint64(i)}, body); err != nil {
			if !errors.Is(err, ErrBusy) {
				n.t.Fatal(err)
			}
			n.step()
			continue
		}
		i++
	}
	for len(n.cookie) < packets {
		if n.clk.Now().Sub(start) > time.Second {
			n.t.Fatalf("push not acknowledged: %d of %d", len(n.cookie), packets)
		}
		n.step()
	}
	return n.clk.Now().Sub(start)
}

// pushWithLoss pushes packets of size bytes over profile, then over
// profile+loss on a new net with the same seed: the lossy net and its
// connection, and how long each push took.
func pushWithLoss(t *testing.T, profile, loss string, seed uint64, tweak func(o *Options), packets, size int) (n *rackNet, c *Conn, took, base time.Duration) {
	t.Helper()
	clean := newRackNet(t, profile, seed, tweak)
	base = clean.push(clean.connect(), packets, size)
	n = newRackNet(t, profile+loss, seed, tweak)
	c = n.connect()
	return n, c, n.push(c, packets, size), base
}

func (n *rackNet) connect() *Conn {
	n.t.Helper()
	c, err := n.a.Open(PeerAddr{MAC: macOf(n.pb), IP: ipB})
	require.NoError(n.t, err)
	for c.State() != StateEstablished {
		n.step()
	}
	return c
}

// sprayed: four paths of 1 Gbit/s each, one-way delays d, d+2, d+5,
// d+10 µs, frames sprayed round-robin (so every fourth packet takes the
// slowest path and the three after it overtake it).
const sprayed = "delay=10us,rate=4gbit,paths=4,path-rate=1gbit,path-delay=0/2us/5us/10us,spray=rr"

// TestSprayedPushHasNoSpuriousRetransmissions: a 1 MiB push sprayed over
// paths of different delays, with no loss and the default window (128
// packets), is sent exactly once. Before the RACK rule (session 6's
// transport) this push resent 291 packets the peer had: each packet's
// timeout ran from its own send, with an RTO learned mostly from packets
// that had not waited behind the window's queue on their path, so the
// queue outgrew it (4 resends with a window of 32); and a hole overtaken
// by 3 PSNs was resent once an SRTT had passed, however slow its path.
// Now the timeout runs from the last ACK that made progress and a hole
// gets the reordering the connection measures.
func TestSprayedPushHasNoSpuriousRetransmissions(t *testing.T) {
	n := newRackNet(t, sprayed, 7, nil)
	c := n.connect()
	const packets, size = 1024, 1024 // 1 MiB
	took := n.push(c, packets, size)
	st := n.a.Stats()
	t.Logf("1 MiB in %v; early %d, timeout %d, spurious %d; reordering window %v (min RTT %v)", took,
		st.TxEarlyRetransmit, st.TxRetransmit, st.SpuriousEarlyRetransmit, c.c.rtt.rack.reoWnd(), c.c.rtt.rack.minRTT)
	require.Zero(t, st.TxEarlyRetransmit+st.TxRetransmit, "no packet was lost: none is resent")
	require.Zero(t, n.b.Stats().RxDuplicate+n.b.Stats().RxStalePSN)
	require.Len(t, n.got, packets)
	for seq, k := range n.got {
		require.Equal(t, 1, k, "packet %d delivered once", seq)
	}
	// The window covers the paths' spread (10 µs) and no more than a
	// round trip or so.
	require.GreaterOrEqual(t, c.c.rtt.rack.reoWnd(), 5*time.Microsecond)
	require.Less(t, c.c.rtt.rack.reoWnd(), 4*c.c.rtt.rack.minRTT)
}

// TestSprayedPushRecoversLossEarly: the same push with 1 % loss on every
// path recovers its losses by the reordering rule, long before the
// retransmit timeout (5 ms here, so a timeout would show in the time):
// nearly every loss is resent early, and the push takes little longer
// than without loss.
func TestSprayedPushRecoversLossEarly(t *testing.T) {
	const packets, size = 1024, 1024
	long := func(o *Options) { o.MinRTO, o.InitialRTO = 5*time.Millisecond, 5*time.Millisecond }
	n, _, took, base := pushWithLoss(t, sprayed, ",path-loss=1%", 11, long, packets, size)
	st := n.a.Stats()
	fs := n.fab.Stats()
	lost := fs.AtoB.PathLossDrops
	t.Logf("1 MiB in %v (%v without loss); %d data frames lost, %d ACK frames lost; early %d, timeout %d, spurious %d",
		took, base, lost, fs.BtoA.PathLossDrops, st.TxEarlyRetransmit, st.TxRetransmit, st.SpuriousEarlyRetransmit)
	require.Positive(t, lost, "the fabric lost data packets")
	require.Len(t, n.got, packets, "every packet delivered")
	require.Zero(t, st.TxRetransmit, "no loss waited for its timeout")
	require.GreaterOrEqual(t, st.TxEarlyRetransmit, lost, "every lost data packet was resent early")
	require.LessOrEqual(t, st.TxEarlyRetransmit, lost+lost/2+2, "and few more")
	require.Less(t, took, base+time.Millisecond, "well under one 5 ms timeout of delay")
}

// TestEarlyResendsNeverAbandonSooner: early resends spend a packet's
// transmissions sooner than its timer would, but the packet is given up
// (a resync takes its place) only when its timer has run its whole
// schedule — RetryLimit+1 expiries, the RTO doubling each time — exactly
// as late as with early retransmission off. So a packet whose ACK is
// merely slow is never abandoned for the early resends it caused. Before,
// the early resends counted toward the limit and the resync followed one
// RTO after the last of them (about 2 ms here instead of at least 15).
func TestEarlyResendsNeverAbandonSooner(t *testing.T) {
	const limit = 3
	h := newHarness(t, func(a, b *Options) {
		a.RetryLimit, a.MaxOutstanding = limit, 16
		a.MinRTO, a.InitialRTO = time.Millisecond, time.Millisecond
		b.AckEvery = 1
	})
	ca, _ := h.connect()
	target := ca.Window(wire.WindowRequest).TxNSN + 4
	var sends []clock.Time
	var resyncAt clock.Time
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.PSN != target || f.Header.Window() != wire.WindowRequest {
			return 1
		}
		if f.Header.Type == wire.TypeResync {
			if resyncAt == 0 {
				resyncAt = h.clk.Now()
			}
			return 1
		}
		sends = append(sends, h.clk.Now())
		return 0 // every transmission of the packet is lost
	}
	h.sendAll(ca, wire.TypePushRequest, 0, 120, 256)
	h.run(func() bool { return len(eventsOf(h.evA, EventAbandoned)) == 1 && h.quiet() }, 5*time.Second)
	st := h.a.Stats()
	t.Logf("sends at %v; resync %v after the first; early %d, timeout %d", sends, resyncAt.Sub(sends[0]), st.TxEarlyRetransmit, st.TxRetransmit)
	require.Len(t, sends, limit+1, "sent RetryLimit+1 times")
	require.Positive(t, st.TxEarlyRetransmit, "some resends were early")
	require.GreaterOrEqual(t, resyncAt.Sub(sends[0]), (1<<(limit+1)-1)*time.Millisecond,
		"given up only after the timer's whole schedule (RTO 1+2+4+8 ms)")
	require.Equal(t, StateEstablished, ca.State())
}

// TestLossDetectionAllocatesNothing: sprayed pushes with loss — holes,
// the reordering window, timers moved to its end, early resends, spurious
// ones — allocate nothing per packet (the push's own buffer aside: one
// allocation per push of 512 packets).
func TestLossDetectionAllocatesNothing(t *testing.T) {
	n := newRackNet(t, sprayed+",path-loss=2%", 5, nil)
	setDeliver(n.b, func(*Conn, *wire.Header, []byte) Verdict { return Accept })
	n.cookie = make([]uint64, 0, 1024)
	c := n.connect()
	n.push(c, 512, 1024) // warm up: the caches, the timer wheel's slots
	const packets = 512
	allocs := testing.AllocsPerRun(5, func() {
		n.cookie = n.cookie[:0]
		n.push(c, packets, 1024)
	})
	st := n.a.Stats()
	t.Logf("%.1f allocations per push of %d packets; early %d, spurious %d, timeout %d", allocs, packets, st.TxEarlyRetransmit, st.SpuriousEarlyRetransmit, st.TxRetransmit)
	require.Positive(t, st.TxEarlyRetransmit, "the pushes recovered losses early")
	require.LessOrEqual(t, allocs, 1.0, "only the push's payload buffer")
}

// The reordering estimate outlives a run of packets that nothing overtook:
// on a sprayed connection most packets come in order, and between one
// burst of reordering (a message's sprayed middle, the ordered path's
// queue behind it) and the next there may be hundreds. Counting each as a
// full sample of 0 (1/64 of the gap per packet) left 0.04 % of a 2 ms
// estimate after 500 of them, and the next burst's packets on the ordered
// path were resent early: on the real clock the demo resent 24–40 thousand
// packets early for 6–7 thousand lost (stale at the target), against
// 9–11 thousand with this.
func TestReorderingEstimateOutlivesInOrderRuns(t *testing.T) {
	var r rackState
	r.minRTT = 300 * time.Microsecond
	r.lateness(2 * time.Millisecond)
	for range 500 {
		r.inOrder()
	}
	require.Greater(t, r.reoWnd(), time.Millisecond, "500 in-order packets leave most of a 2 ms lateness: %v", r.reoWnd())
	for range 20000 {
		r.inOrder()
	}
	require.Equal(t, r.minRTT/4, r.reoWnd(), "a long in-order stretch still decays it to the floor")
	// An overtaken packet's smaller lateness still pulls it down as before.
	r.lateness(time.Millisecond)
	r.lateness(0)
	require.Less(t, r.reoWnd(), 1250*time.Microsecond)
}

// TestLossWithoutReorderingKeepsTheWindowTight: on a path that loses 1 %
// each way and never reorders, every hole is a loss. The receiver
// acknowledges first copies together (AckEvery, AckDelay) but a resend
// that fills a hole at once, so a resend goes round faster than most first
// copies. An ACK sooner after a resend than the least RTT was taken for
// the first copy's: the needed resend was called spurious, and the hole's
// whole wait widened the reordering window (and, for a timer's resend,
// the timeout) by a quarter more each time, which the next hole waited
// out. Now an early resend is too soon against half the least RTT, and a
// timer's only by the peer's duplicate report.
// Before, these 4096 pushes took 2.93 ms against 1.38 without loss, with
// 7 resends called spurious and 3 timeouts, and a window of 105 µs; now
// 1.59 ms and 48 µs, all resends early.
func TestLossWithoutReorderingKeepsTheWindowTight(t *testing.T) {
	const packets, size = 4096, 64
	const path = "delay=2us,rate=4gbit"
	coalesce := func(o *Options) { o.AckEvery, o.AckDelay = 64, 50*time.Microsecond }
	n, c, took, base := pushWithLoss(t, path, ",loss=1%", 3, coalesce, packets, size)
	st := n.a.Stats()
	fs := n.fab.Stats()
	cc := &n.a.conns[c.c.idx]
	t.Logf("%d pushes in %v (%v without loss); %d data and %d ACK frames lost; early %d, timeout %d, resends found unneeded: early %d, timeout %d; SRTT %v, reordering window %v, least RTT %v",
		packets, took, base, fs.AtoB.LossRandom, fs.BtoA.LossRandom, st.TxEarlyRetransmit, st.TxRetransmit, st.SpuriousDupReport, st.SpuriousTimeout,
		cc.rtt.srtt, cc.rtt.rack.reoWnd(), cc.rtt.rack.minRTT)
	require.Positive(t, fs.AtoB.LossRandom, "the fabric lost data packets")
	require.Len(t, n.got, packets, "every packet delivered")
	require.Zero(t, st.SpuriousDupReport+st.SpuriousTimeout, "no resend the peer had already: the path does not reorder")
	require.Zero(t, st.TxRetransmit, "every loss resent early")
	require.Less(t, cc.rtt.rack.reoWnd(), 2*cc.rtt.srtt, "the reordering window within two round trips")
	require.Less(t, took, base+base/4, "the lossy push within a quarter of the lossless one")
}

// warmRackNet is a net on a 5 µs lossless path whose connection has
// pushed 256 packets: its RTT and reordering window learnt (before).
func warmRackNet(t *testing.T) (n *rackNet, c *Conn, cc *conn, before time.Duration) {
	t.Helper()
	n = newRackNet(t, "delay=2us,rate=4gbit", 1, nil)
	c = n.connect()
	n.push(c, 256, 64)
	cc = &n.a.conns[c.c.idx]
	return n, c, cc, cc.rtt.rack.reoWnd()
}

// sendBurst sends count 64 B pushes on c at once (cookies from 1001).
func (n *rackNet) sendBurst(c *Conn, count int) {
	n.t.Helper()
	for i := 1001; i <= 1000+count; i++ {
		_, err := c.Send(SendHeader{Type: wire.TypePushRequest, RSN: uint32(i), Cookie: uint64(i)}, payload(uint64(i), 64))
		require.NoError(n.t, err)
	}
}

// TestTailAckLossIsNoReordering: the ACK of a burst's last packets is
// lost and nothing follows them, so the retransmit timer asks the peer
// for an ACK; its answer acknowledges the burst. Those packets were sent
// before the ask and acknowledged with it, not after it: no packet
// overtook them. (Before the timeout asked, it resent the oldest, and the
// resend's ACK acknowledged the rest with it: the same question.) Taken
// for overtaken, each gave a lateness of a whole timeout and the
// reordering window grew to it, so every later hole waited a timeout
// before it was resent — through the fabric at 1 % loss each way a
// host's 1 ms stall turned 2 M pushes a second into 0.3 M for the rest of
// the run.
func TestTailAckLossIsNoReordering(t *testing.T) {
	n, c, cc, before := warmRackNet(t)
	n.fab.SetLinkDown(fabric.BtoA, true)
	const tail = 8
	n.sendBurst(c, tail)
	for len(n.got) < 256+tail {
		n.step()
	}
	// The peer's ACK of the tail goes into the dead link.
	require.NoError(t, n.clk.Set(n.clk.Now().Add(100*time.Microsecond)))
	n.poll()
	require.Positive(t, n.fab.Stats().BtoA.LinkDown, "the tail's ACK was lost")
	n.fab.SetLinkDown(fabric.BtoA, false)
	for len(n.cookie) < 256+tail {
		n.step()
	}
	st := n.a.Stats()
	t.Logf("reordering window %v before, %v after; SRTT %v, RTO %v; asks %d, resends %d", before, cc.rtt.rack.reoWnd(), cc.rtt.srtt, cc.rtt.rto, st.TimeoutAsks, st.TxRetransmit)
	require.Positive(t, st.TimeoutAsks, "the timer asked for the tail's ACK")
	require.Zero(t, st.TxRetransmit, "the tail was resent though the answer acknowledged it")
	require.Less(t, cc.rtt.rack.reoWnd(), 50*time.Microsecond, "the reordering window far below the timeout (the path's round trip is 5 µs)")
}

// TestPeerStallIsNoReordering: the peer's poll loop stops for a few
// timeouts while a window is in flight. The timer resends its probe, the
// oldest packet, again and again; when the peer runs again it
// acknowledges the probe's first copy — taken as the latest resend's —
// and then the packets sent with that first copy, all of them sent
// before the resend. Neither the reordering window nor its floor may
// learn the stall from them: they came in order.
func TestPeerStallIsNoReordering(t *testing.T) {
	n, c, cc, before := warmRackNet(t)
	const burst = 64
	n.sendBurst(c, burst)
	// The peer's loop is off its CPU for 3 ms: the sender and the fabric
	// run, the peer's frames wait in its port.
	stallEnd := n.clk.Now().Add(3 * time.Millisecond)
	for n.clk.Now() < stallEnd {
		now := n.clk.Now()
		if n.a.Poll(now)+n.fab.Poll(now) == 0 {
			next := stallEnd
			if t, ok := n.a.NextDeadline(); ok {
				next = min(next, t)
			}
			if t, ok := n.fab.NextDeadline(); ok {
				next = min(next, t)
			}
			require.NoError(t, n.clk.Set(max(next, now.Add(time.Microsecond))))
		}
	}
	require.Positive(t, n.a.Stats().TxRetransmit, "the timer resent the probe during the stall")
	for len(n.cookie) < 256+burst {
		n.step()
	}
	r := &cc.rtt.rack
	t.Logf("reordering window %v before, %v after (estimate %v, floor %v); SRTT %v; timeouts %d, early resends %d", before, r.reoWnd(), r.reo, r.floor, cc.rtt.srtt, n.a.Stats().TxRetransmit, n.a.Stats().TxEarlyRetransmit)
	require.Less(t, r.reoWnd(), 50*time.Microsecond, "the reordering window far below the stall (the path's round trip is 5 µs)")
}

// TestPeerStallLeavesLossRecoveryFast: 20,000 pushes on a path that loses
// 1 % each way, once as they are and once with the peer's loop off its
// CPU for 3 ms a millisecond in. The stall may cost its own length and a
// little more, not the rest of the run: before, the reordering window
// learnt the stall from the packets acknowledged after it and the holes
// after it waited for what it learnt — 21.0 ms against 7.5 without the
// stall; 10.0 against 7.2 now.
func TestPeerStallLeavesLossRecoveryFast(t *testing.T) {
	const packets, size, seed = 20000, 64, 5
	const path = "delay=2us,rate=4gbit,loss=1%"
	const stallFor = 3 * time.Millisecond
	clean := newRackNet(t, path, seed, nil)
	base := clean.push(clean.connect(), packets, size)
	n := newRackNet(t, path, seed, nil)
	c := n.connect()
	stallAt := n.clk.Now().Add(time.Millisecond)
	n.bOff = func(now clock.Time) bool { return now >= stallAt && now < stallAt.Add(stallFor) }
	took := n.push(c, packets, size)
	cc := &n.a.conns[c.c.idx]
	st := n.a.Stats()
	t.Logf("%d pushes in %v with a %v stall, %v without; early resends %d, timeouts %d; reordering window %v, SRTT %v, RTO %v",
		packets, took, stallFor, base, st.TxEarlyRetransmit, st.TxRetransmit, cc.rtt.rack.reoWnd(), cc.rtt.srtt, cc.rtt.rto)
	require.Less(t, took, base+stallFor+base/2, "the stall cost more than itself")
}
